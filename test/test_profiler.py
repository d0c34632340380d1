# Owner(s): ["module: PrivateUse1"]
"""torch.profiler on a Python backend: each operator's device time, the time its kernels ran.

The device is synchronous, so its time is that of the backend's kernels: an operator that ran
none (a view, an operator on CPU) has none, and an operator's or a range's time includes that
of the operators it calls. Memory events come from the payloads' figures.
"""

import json
import os
import tempfile
import threading
import time

import torch
from torch.profiler import profile, ProfilerActivity, record_function
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import library
from torch_acc.backends import reference

reference.setup()


# ref's kernels call CPU's operator of the same name, and the profiler's event list folds an
# event into its parent of the same name, keeping the inner event's device time
# (EventList._remove_dup_nodes): the operators timed here get kernels that call others.
@library.impl("aten::mm")
def _mm(self, mat2):
    return torch.matmul(self, mat2)


@library.impl("aten::relu")
def _relu(self):
    return torch.clamp_min(self, 0)


@library.impl("aten::threshold_backward")
def _threshold_backward(grad_output, self, threshold):
    return torch.where(self > threshold, grad_output, 0)


# A kernel that runs an operator on the device, whose kernel takes longer: each nanosecond
# of device time counts once, towards the innermost kernel running.
_OUTER_S, _INNER_S = 0.02, 0.15


@library.impl("aten::hardtanh")
def _hardtanh(self, min_val=-1.0, max_val=1.0):
    time.sleep(_OUTER_S)
    torch.sigmoid(torch.zeros(1, device="ref"))
    return torch.clamp(self, min_val, max_val)


@library.impl("aten::sigmoid")
def _sigmoid(self):
    time.sleep(_INNER_S)
    return torch.reciprocal(torch.exp(torch.neg(self)) + 1)


def _step(x, w):
    with record_function("step"):
        y = torch.mm(x, w).relu()
        view = y.t()
        cpu = torch.ones(64, 64) @ torch.ones(64, 64)
        return (view.sum() + cpu.sum().item()).cpu()


def _named(prof, name):
    events = prof.events() if isinstance(prof, profile) else prof.function_events
    return [e for e in events if e.name == name]


class TestProfiler(TestCase):
    def setUp(self):
        self.x = torch.randn(256, 256, device="ref")
        self.w = torch.randn(256, 256, device="ref")
        _step(self.x, self.w)  # warm

    def _check_device_times(self, prof):
        # The mm on ref ran a kernel; the mm on CPU and the one inside the kernel ran none.
        mms = _named(prof, "aten::mm")
        self.assertEqual(len(mms), 3, mms)
        timed = [e for e in mms if e.device_time_total > 0]
        self.assertEqual(len(timed), 1, mms)
        (mm,) = timed
        self.assertLessEqual(mm.device_time_total, mm.cpu_time_total)
        (relu,) = _named(prof, "aten::relu")
        self.assertGreater(relu.device_time_total, 0)
        # A view and operators on CPU alone ran no kernel of the backend.
        self.assertEqual([e.device_time_total for e in _named(prof, "aten::t")], [0])
        self.assertEqual([e.device_time_total for e in _named(prof, "aten::ones")], [0, 0])
        # A range's device time includes its operators'.
        (step,) = _named(prof, "step")
        self.assertGreaterEqual(
            step.device_time_total, mm.device_time_total + relu.device_time_total
        )
        averages = {e.key: e for e in prof.key_averages()}
        self.assertEqual(averages["aten::relu"].self_device_time_total, relu.device_time_total)

    def test_autograd_profiler_records_device_time(self):
        with torch.autograd.profiler.profile(use_device="ref", use_kineto=False) as prof:
            _step(self.x, self.w)
        self._check_device_times(prof)
        self.assertIn("Self REF", prof.key_averages().table())

    def test_torch_profiler_records_device_time(self):
        # From torch 2.13 through torch_acc's kineto plugin (csrc/acc/Hooks.cpp); on 2.6
        # through the profiler's PrivateUse1 events.
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            _step(self.x, self.w)
        self._check_device_times(prof)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                names = {e.get("name") for e in json.load(f)["traceEvents"]}
        self.assertLessEqual({"aten::mm", "step"}, names)

    def _check_nested_kernels(self, prof):
        (outer,) = _named(prof, "aten::hardtanh")
        (inner,) = _named(prof, "aten::sigmoid")
        us = 1e6
        self.assertGreaterEqual(inner.device_time_total, _INNER_S * us)
        self.assertGreaterEqual(outer.device_time_total, (_OUTER_S + _INNER_S) * us)
        # The outer kernel's own time: its sleep, not the inner kernel's.
        self.assertGreaterEqual(outer.self_device_time_total, _OUTER_S * us)
        self.assertLess(outer.self_device_time_total, _INNER_S * us)

    def test_nested_kernels_count_once(self):
        x = torch.ones(4, device="ref")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            torch.nn.functional.hardtanh(x)
        self._check_nested_kernels(prof)
        with torch.autograd.profiler.profile(use_device="ref", use_kineto=False) as prof:
            torch.nn.functional.hardtanh(x)
        self._check_nested_kernels(prof)

    def test_range_ended_on_another_thread(self):
        # A range whose future completes on another thread ends there: its events are of two
        # threads, whose kernel times have nothing in common. No device time, no error.
        with torch.autograd.profiler.profile(use_device="ref", use_kineto=False) as prof:
            fut = torch.futures.Future()
            with record_function("async_range") as rf:
                done = rf._call_end_callbacks_on_future(fut)
                torch.mm(self.x, self.w)
            thread = threading.Thread(target=lambda: fut.set_result(None))
            thread.start()
            thread.join()
            done.wait()
        (rng,) = _named(prof, "async_range")
        self.assertEqual(rng.device_time_total, 0)
        (mm,) = [e for e in _named(prof, "aten::mm") if e.device_time_total > 0]
        self.assertGreater(mm.device_time_total, 0)

    def test_backward_kernels_have_device_time(self):
        w = self.w.clone().requires_grad_()
        with torch.autograd.profiler.profile(use_device="ref", use_kineto=False) as prof:
            torch.mm(self.x, w).relu().sum().backward()
        (backward,) = _named(prof, "aten::threshold_backward")
        self.assertGreater(backward.device_time_total, 0)

    def test_memory_events_come_from_the_payloads(self):
        with torch.autograd.profiler.profile(
            use_device="ref", use_kineto=False, profile_memory=True
        ) as prof:
            y = torch.ones(1024, device="ref")
            del y
        (ones,) = _named(prof, "aten::ones")
        self.assertEqual(ones.device_memory_usage, 4096)
        self.assertEqual(
            [e.device_memory_usage for e in _named(prof, "[memory]") if e.device_memory_usage],
            [-4096],
        )


if __name__ == "__main__":
    run_tests()
