# Owner(s): ["module: PrivateUse1"]
"""torch.accelerator and the device module on a Python backend: streams, memory figures."""

import gc
import subprocess
import sys
import textwrap
import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _compat
from torch_acc.backends import reference

reference.setup()

needs_accelerator_memory = unittest.skipUnless(
    _compat.ACCELERATOR_MEMORY, "this torch has no torch.accelerator memory functions"
)


class TestAccelerator(TestCase):
    def test_current_accelerator(self):
        self.assertEqual(torch.accelerator.current_accelerator(), torch.device("ref"))
        self.assertEqual(torch.accelerator.device_count(), 1)

    def test_synchronize(self):
        x = torch.ones(3, device="ref") * 2
        torch.accelerator.synchronize()
        torch.accelerator.synchronize(0)
        torch.ref.synchronize()
        self.assertEqual(x.cpu(), torch.full((3,), 2.0))

    def test_device_context(self):
        with torch.ref.device("ref:0"):
            self.assertEqual(torch.ref.current_device(), 0)
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 1\)"):
            with torch.ref.device(1):
                pass
        self.assertEqual(torch.ref.current_device(), 0)

    def test_current_stream(self):
        s = torch.accelerator.current_stream()
        self.assertEqual(s.device, torch.device("ref:0"))
        self.assertEqual(s.stream_id, 0)
        self.assertTrue(s.query())
        s.synchronize()


class TestMemoryOfPayloads(TestCase):
    """The ref backend's hooks report no figures: torch reports the bytes of its live payloads
    (test_memory_stats.py has the details)."""

    @needs_accelerator_memory
    def test_accelerator_memory(self):
        gc.collect()
        base = torch.accelerator.memory_allocated()
        x = torch.ones(1000, device="ref")
        self.assertEqual(torch.accelerator.memory_allocated(), base + 4000)
        self.assertGreaterEqual(torch.accelerator.max_memory_allocated(), base + 4000)
        self.assertEqual(torch.accelerator.memory_reserved(), base + 4000)
        self.assertGreaterEqual(torch.accelerator.max_memory_reserved(), base + 4000)
        stats = torch.accelerator.memory_stats()
        self.assertEqual(stats["allocated_bytes.all.current"], base + 4000)
        torch.accelerator.empty_cache()
        del x
        gc.collect()
        torch.accelerator.reset_peak_memory_stats()
        self.assertEqual(torch.accelerator.max_memory_allocated(), base)
        torch.accelerator.reset_accumulated_memory_stats()
        self.assertEqual(torch.accelerator.memory_stats()["allocated_bytes.all.freed"], 0)

    @needs_accelerator_memory
    def test_accelerator_memory_info_is_an_error(self):
        with self.assertRaisesRegex(
            NotImplementedError,
            r"the ref backend reports no free and total memory: its hooks \(_Hooks\) define no "
            r"mem_get_info\(device_index\)",
        ):
            torch.accelerator.get_memory_info()

    def test_device_module_memory(self):
        gc.collect()
        base = torch.ref.memory_allocated()
        x = torch.ones(1000, device="ref")
        self.assertEqual(torch.ref.memory_stats()["allocated_bytes.all.current"], base + 4000)
        self.assertEqual(torch.ref.memory_allocated(), base + 4000)
        self.assertGreaterEqual(torch.ref.max_memory_allocated("ref:0"), base + 4000)
        self.assertEqual(torch.ref.memory_reserved(0), base + 4000)
        self.assertGreaterEqual(torch.ref.max_memory_reserved(), base + 4000)
        torch.ref.empty_cache()
        del x
        gc.collect()
        torch.ref.reset_peak_memory_stats()
        self.assertEqual(torch.ref.max_memory_allocated(), base)
        torch.ref.reset_accumulated_memory_stats()
        self.assertEqual(torch.ref.memory_stats()["allocated_bytes.all.allocated"], 0)
        with self.assertRaisesRegex(NotImplementedError, "the ref backend reports no free"):
            torch.ref.mem_get_info()


_REPORTING_BACKEND = """
import torch
from torch_acc import PrivateUse1Hooks
from torch_acc.backend_registration import setup_privateuseone_for_python_backend

class Hooks(PrivateUse1Hooks):
    def __init__(self):
        super().__init__()
        self.stats = {"allocated_bytes.all.current": 1024, "allocated_bytes.all.peak": 4096,
                      "reserved_bytes.all.current": 8192, "allocation.all.current": 3}
        self.calls = []

    def memory_stats(self, device_index):
        self.calls.append(("memory_stats", device_index))
        return self.stats

    def reset_peak_memory_stats(self, device_index):
        self.calls.append(("reset_peak_memory_stats", device_index))
        self.stats["allocated_bytes.all.peak"] = self.stats["allocated_bytes.all.current"]

    def empty_cache(self):
        self.calls.append("empty_cache")

    def mem_get_info(self, device_index):
        return (100, 200)

HOOKS = Hooks()
setup_privateuseone_for_python_backend("mem", hook=HOOKS)
"""


class TestMemoryFromBackend(TestCase):
    """A backend reporting its own figures through its hooks (each run in a fresh process)."""

    def _run(self, body: str) -> list[str]:
        code = _REPORTING_BACKEND + textwrap.dedent(body)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout.splitlines()

    def test_device_module(self):
        out = self._run(
            """
            m = torch.mem
            print(m.memory_allocated(), m.max_memory_allocated(), m.memory_reserved(),
                  m.max_memory_reserved())
            m.reset_peak_memory_stats()
            m.empty_cache()
            print(m.max_memory_allocated(), m.mem_get_info())
            try:
                m.reset_accumulated_memory_stats()
            except RuntimeError as e:
                print(e)
            print(HOOKS.calls)
            """
        )
        self.assertEqual(
            out,
            [
                "1024 4096 8192 0",
                "1024 (100, 200)",
                "Hooks defines memory_stats() but no reset_accumulated_memory_stats(device_index)",
                "[('memory_stats', 0), ('memory_stats', 0), ('memory_stats', 0), "
                "('memory_stats', 0), ('reset_peak_memory_stats', 0), 'empty_cache', "
                "('memory_stats', 0)]",
            ],
        )

    @needs_accelerator_memory
    def test_accelerator(self):
        out = self._run(
            """
            acc = torch.accelerator
            print(acc.memory_allocated(), acc.max_memory_allocated(), acc.memory_reserved())
            print(acc.memory_stats()["allocation.all.current"], acc.get_memory_info())
            acc.reset_peak_memory_stats()
            acc.empty_cache()
            print(acc.max_memory_allocated(), HOOKS.calls[-3:])
            try:
                acc.reset_accumulated_memory_stats()
            except RuntimeError as e:
                print(str(e).splitlines()[0])
            HOOKS.stats = {"allocated_bytes.everything": 1}
            try:
                acc.memory_allocated()
            except ValueError as e:
                print(str(e).splitlines()[0])
            """
        )
        self.assertEqual(
            out,
            [
                "1024 4096 8192",
                "3 (100, 200)",
                "1024 [('reset_peak_memory_stats', 0), 'empty_cache', ('memory_stats', 0)]",
                "Hooks defines memory_stats() but no reset_accumulated_memory_stats(device_index)",
                "expected Hooks.memory_stats() to name statistics as torch does, "
                "<statistic>.<all|small_pool|large_pool>.<current|peak|allocated|freed> "
                "(such as allocated_bytes.all.current), but got 'allocated_bytes.everything'",
            ],
        )


if __name__ == "__main__":
    run_tests()
