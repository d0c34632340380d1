r"""Does a payload tensor leak? RSS growth over many create/drop cycles.

Creates and drops ``torch_acc.wrap(payload)`` tensors (and views of them) in a loop, and
reports how much the process's resident memory grew between a warm-up and the end. Target:
less than 1 MB over 1,000,000 cycles.

Run it with ``python bench/payload_lifetime.py [--cycles N]``.
"""

import argparse
import gc
import os
import time

import numpy as np

import torch_acc
from torch_acc.backends import numpy as npy_backend


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cycles(n: int, arr: np.ndarray) -> None:
    for _ in range(n):
        t = torch_acc.wrap(arr)
        v = t[1:]
        del t, v


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1_000_000)
    args = parser.parse_args()
    npy_backend.setup()
    arr = np.ones((4, 4), np.float32)
    _cycles(20_000, arr)  # warm-up: allocator pools, caches
    gc.collect()
    before = _rss_bytes()
    start = time.perf_counter()
    _cycles(args.cycles, arr)
    elapsed = time.perf_counter() - start
    gc.collect()
    growth = (_rss_bytes() - before) / 2**20
    print(f"{args.cycles} create/view/drop cycles in {elapsed:.1f} s "
          f"({elapsed / args.cycles * 1e6:.2f} us each)")
    print(f"RSS growth: {growth:.2f} MB (target < 1 MB: {'met' if growth < 1 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
