# Owner(s): ["module: PrivateUse1"]
"""Memory figures of a backend whose hooks report none: the bytes of its live payloads,
counted in C++ as payloads are bound and released, per device."""

import gc
import subprocess
import sys
import textwrap
import unittest

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

import torch_acc
from torch_acc import _C, _compat
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import numpy as npy_backend


class TwoDeviceGuard(_C.DeviceGuard):
    def device_count(self):
        return 2


setup_privateuseone_for_python_backend(
    "npy", device_guard=TwoDeviceGuard(), hook=npy_backend._Hooks()
)
npy_backend.setup()

MB = 1 << 20

needs_accelerator_memory = unittest.skipUnless(
    _compat.ACCELERATOR_MEMORY, "this torch has no torch.accelerator memory functions"
)


def _allocated(device=0) -> int:
    gc.collect()
    return torch.npy.memory_allocated(device)


class TestPayloadMemory(TestCase):
    def setUp(self):
        gc.collect()
        torch.npy.reset_peak_memory_stats(0)
        torch.npy.reset_peak_memory_stats(1)

    def test_live_bytes_current_and_peak(self):
        base = _allocated()
        tensors = [torch.ones(MB // 4, device="npy") for _ in range(4)]  # 4 MB of float32
        self.assertGreaterEqual(_allocated() - base, 4 * MB)
        self.assertLess(_allocated() - base, 4 * MB + 4096)
        self.assertGreaterEqual(torch.npy.max_memory_allocated(), base + 4 * MB)
        del tensors
        self.assertEqual(_allocated(), base)
        self.assertGreaterEqual(torch.npy.max_memory_allocated(), base + 4 * MB)
        torch.npy.reset_peak_memory_stats()
        self.assertEqual(torch.npy.max_memory_allocated(), base)

    def test_bytes_by_dtype_and_the_payloads_own_layout(self):
        base = _allocated()
        x = torch.zeros(1000, dtype=torch.float64, device="npy")
        self.assertEqual(_allocated() - base, 8000)
        y = torch.zeros(1000, dtype=torch.int8, device="npy")
        self.assertEqual(_allocated() - base, 9000)
        # A strided payload spans from its first to its last element: 3 * 4 + 1 * 2 + 1.
        z = torch_acc.wrap(np.zeros((4, 4))[:, ::2])
        self.assertEqual(_allocated() - base, 9000 + 15 * 8)
        del x, y, z
        self.assertEqual(_allocated(), base)

    def test_views_and_aliases_share_their_payload(self):
        base = _allocated()
        x = torch.zeros(MB // 4, device="npy")
        views = [x[::2], x.detach(), x.view(2, -1), x[10:]]
        self.assertEqual(_allocated() - base, MB)
        del x
        self.assertEqual(_allocated() - base, MB)
        del views
        self.assertEqual(_allocated(), base)

    def test_inplace_results_and_resize(self):
        base = _allocated()
        x = torch.zeros(1000, device="npy")
        x.add_(1).mul_(3)
        torch.neg(x, out=x)
        self.assertEqual(_allocated() - base, 4000)
        x.resize_(3000)  # The payload grows, as CPU's storage does.
        self.assertEqual(_allocated() - base, 12000)
        x.resize_(10)  # ... and keeps its size when the tensor shrinks.
        self.assertEqual(_allocated() - base, 12000)
        out = torch.empty(0, device="npy")
        torch.add(x, x, out=out)  # out= rebinds its own, unshared payload
        self.assertEqual(_allocated() - base, 12040)
        del x, out
        self.assertEqual(_allocated(), base)

    def test_per_device(self):
        base0, base1 = _allocated(0), _allocated(1)
        x = torch.ones(MB // 4, device="npy:1")
        y = (x * 2).to("npy:0")
        self.assertEqual(_allocated(1) - base1, MB)  # x; x * 2 is gone
        self.assertEqual(_allocated(0) - base0, MB)
        del x
        self.assertEqual(_allocated(1) - base1, 0)
        self.assertEqual(torch.npy.max_memory_allocated(1) - base1, 2 * MB)
        torch.npy.reset_peak_memory_stats(1)
        self.assertEqual(torch.npy.max_memory_allocated(1), base1)
        self.assertEqual(torch.npy.max_memory_allocated(0) - base0, MB)
        del y

    def test_statistics(self):
        torch.npy.reset_accumulated_memory_stats()
        before = torch.npy.memory_stats()
        x = torch.zeros(250, device="npy")
        stats = torch.npy.memory_stats()
        self.assertEqual(stats["allocation.all.current"] - before["allocation.all.current"], 1)
        self.assertEqual(
            stats["allocated_bytes.all.allocated"] - before["allocated_bytes.all.allocated"],
            1000,
        )
        # Nothing is cached: what is reserved and active is what is allocated.
        for name in ("reserved_bytes", "active_bytes"):
            self.assertEqual(stats[f"{name}.all.current"], stats["allocated_bytes.all.current"])
        self.assertEqual(torch.npy.memory_reserved(), torch.npy.memory_allocated())
        del x
        gc.collect()
        stats = torch.npy.memory_stats()
        self.assertEqual(
            stats["allocated_bytes.all.freed"] - before["allocated_bytes.all.freed"], 1000
        )
        torch.npy.reset_accumulated_memory_stats()
        stats = torch.npy.memory_stats()
        self.assertEqual(stats["allocated_bytes.all.allocated"], 0)
        self.assertEqual(stats["allocated_bytes.all.freed"], 0)
        self.assertEqual(stats["allocation.all.freed"], 0)

    def test_device_that_does_not_exist(self):
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 2\)"):
            torch.npy.memory_stats(2)
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 2\)"):
            _C.payload_memory_stats(-3)

    @needs_accelerator_memory
    def test_accelerator(self):
        acc = torch.accelerator
        base = _allocated(1)
        x = torch.ones(MB // 4, device="npy:1")
        self.assertEqual(acc.memory_allocated(1) - base, MB)
        self.assertEqual(acc.memory_allocated("npy:1"), torch.npy.memory_allocated(1))
        self.assertEqual(
            acc.memory_stats(1)["allocation.all.current"],
            torch.npy.memory_stats(1)["allocation.all.current"],
        )
        del x
        gc.collect()
        self.assertEqual(acc.memory_allocated(1), base)
        self.assertGreaterEqual(acc.max_memory_allocated(1), base + MB)
        acc.reset_peak_memory_stats(1)
        self.assertEqual(acc.max_memory_allocated(1), base)
        acc.reset_accumulated_memory_stats(1)
        self.assertEqual(acc.memory_stats(1)["allocated_bytes.all.allocated"], 0)


_OWN_FIGURES = """
import torch
from torch_acc import _compat
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import numpy as npy_backend

class Hooks(npy_backend._Hooks):
    def memory_stats(self, device_index):
        return {"allocated_bytes.all.current": 7, "allocated_bytes.all.peak": 9}

    def reset_peak_memory_stats(self, device_index):
        print("reset", device_index)

setup_privateuseone_for_python_backend("npy", hook=Hooks())
npy_backend.setup()
x = torch.ones(1 << 20, device="npy")
print(torch.npy.memory_allocated(), torch.npy.max_memory_allocated())
torch.npy.reset_peak_memory_stats()
if _compat.ACCELERATOR_MEMORY:
    print(torch.accelerator.memory_allocated(), torch.accelerator.max_memory_allocated())
    torch.accelerator.reset_peak_memory_stats()
else:
    print(7, 9)
    print("reset", 0)
"""


class TestBackendFiguresWin(TestCase):
    def test_hooks_memory_stats_win(self):
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_OWN_FIGURES)], capture_output=True, text=True
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines(), ["7 9", "reset 0", "7 9", "reset 0"])


if __name__ == "__main__":
    run_tests()
