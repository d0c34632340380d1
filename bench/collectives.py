r"""Collectives and a DDP training step on ``npy`` against gloo on CPU tensors, in one run.

Two ranks (processes of this script, on loopback) run, in alternating rounds so that a slow
spell of a shared machine falls on both:

- ``all_reduce`` (sum, float32) of 1 KB, 1 MB and 64 MB: on ``npy`` tensors through the ``acc``
  backend (``torch_acc.distributed``), and on CPU tensors through a gloo group;
- a training step of the demo's MLP (batch 64, 32 samples per rank) with
  ``DistributedDataParallel``: on ``npy`` (the ``acc`` backend) and on CPU (gloo), and the
  same step in one process without DDP on both devices, for the single-process ratio.

A time is the median over rounds of the time per call of a timed loop. It prints the times
and ratios against the targets: ``all_reduce`` of 64 MB within 1.3x of gloo on CPU tensors,
the DDP step within the single-process step ratio plus 0.2. A miss does not change the exit
status.

Run from the repository root::

    python bench/collectives.py            # about a minute
"""

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

SIZES = {"1 KB": 1 << 10, "1 MB": 1 << 20, "64 MB": 64 << 20}
ALL_REDUCE_TARGET, DDP_MARGIN = 1.3, 0.2
ROUNDS = 5


def _time(fn, seconds: float) -> float:
    """Seconds per call of ``fn``: a loop of about ``seconds`` after a warm-up call."""
    fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n


def _agreed(fn, seconds: float) -> float:
    """:func:`_time` for collectives: the ranks agree on the loop's length (from the slowest
    rank's warm-up call), so that they make the same number of calls."""
    fn()
    start = time.perf_counter()
    fn()
    once = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(once, op=dist.ReduceOp.MAX, group=_gloo)
    n = max(1, int(seconds / float(once)))
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


_gloo = None


def _step(device: str, model: nn.Module, x, y, ddp_group=None):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = copy.deepcopy(model).to(device)
    if ddp_group is not None:
        model = DDP(model, process_group=ddp_group)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    x, y = x.to(device), y.to(device)

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _worker(rank: int, init: str, seconds: float) -> None:
    global _gloo
    from torch_acc import demo
    from torch_acc.backends import numpy as npy_backend

    torch.set_num_threads(1)
    npy_backend.setup()
    dist.init_process_group(
        "cpu:gloo,npy:acc",
        init_method=f"file://{init}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=120),
    )
    _gloo = dist.new_group(backend="gloo")
    times: dict[str, list[float]] = {}
    tensors = {}
    for name, nbytes in SIZES.items():
        n = nbytes // 4
        tensors[name] = {"npy": torch.ones(n).to("npy"), "cpu": torch.ones(n)}
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=gen)
    y = torch.randint(0, 4, (64,), generator=gen)
    torch.manual_seed(0)
    model = demo.mlp()
    shard = slice(rank * 32, (rank + 1) * 32)
    steps = {
        "ddp npy": _step("npy", model, x[shard], y[shard], dist.group.WORLD),
        "ddp cpu": _step("cpu", model, x[shard], y[shard], _gloo),
        "single npy": _step("npy", model, x, y),
        "single cpu": _step("cpu", model, x, y),
    }
    for _ in range(ROUNDS):
        for name, pair in tensors.items():
            for dev, group in (("npy", dist.group.WORLD), ("cpu", _gloo)):
                t = pair[dev]
                times.setdefault(f"all_reduce {name} {dev}", []).append(
                    _agreed(lambda t=t, g=group: dist.all_reduce(t, group=g), seconds)
                )
        for name in ("ddp npy", "ddp cpu"):
            times.setdefault(name, []).append(_agreed(steps[name], seconds))
        for name in ("single npy", "single cpu"):
            times.setdefault(name, []).append(_time(steps[name], seconds))
    if rank == 0:
        _report({k: statistics.median(v) for k, v in times.items()})
    dist.destroy_process_group()


def _report(t: dict[str, float]) -> None:
    print(f"{'':24}{'npy':>12}{'cpu (gloo)':>14}{'ratio':>8}  target")
    for name in SIZES:
        a, b = t[f"all_reduce {name} npy"], t[f"all_reduce {name} cpu"]
        target = f"<= {ALL_REDUCE_TARGET}x" if name == "64 MB" else ""
        print(
            f"{'all_reduce ' + name:24}{a * 1e3:>10.3f}ms{b * 1e3:>12.3f}ms{a / b:>7.2f}x  {target}"
        )
    single = t["single npy"] / t["single cpu"]
    ddp = t["ddp npy"] / t["ddp cpu"]
    print(
        f"{'train step, 1 process':24}{t['single npy'] * 1e3:>10.3f}ms"
        f"{t['single cpu'] * 1e3:>12.3f}ms{single:>7.2f}x"
    )
    print(
        f"{'train step, DDP 2 ranks':24}{t['ddp npy'] * 1e3:>10.3f}ms"
        f"{t['ddp cpu'] * 1e3:>12.3f}ms{ddp:>7.2f}x  <= {single + DDP_MARGIN:.2f}x"
    )
    big = t["all_reduce 64 MB npy"] / t["all_reduce 64 MB cpu"]
    print(
        f"all_reduce 64 MB: {'met' if big <= ALL_REDUCE_TARGET else 'MISSED'}; "
        f"DDP step: {'met' if ddp <= single + DDP_MARGIN else 'MISSED'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=0.3, help="length of a timed loop (default 0.3)"
    )
    parser.add_argument("--worker", nargs=2, metavar=("RANK", "INIT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(int(args.worker[0]), args.worker[1], args.seconds)
        return 0
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([repo, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--seconds",
                    str(args.seconds),
                    "--worker",
                    str(rank),
                    init,
                ],
                env=env,
            )
            for rank in range(2)
        ]
        return max(p.wait() for p in procs)


if __name__ == "__main__":
    raise SystemExit(main())
