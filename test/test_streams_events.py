# Owner(s): ["module: PrivateUse1"]
"""Streams and events of a synchronous Python backend, through torch's generic APIs."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference

reference.setup()


class TestStreams(TestCase):
    def test_default_stream(self):
        s = torch.Stream(device="ref")
        self.assertEqual((s.device_type, s.device_index, s.stream_id),
                         (torch._C._autograd.DeviceType.PrivateUse1.value, 0, 0))
        self.assertEqual(s, torch.accelerator.current_stream())
        self.assertTrue(s.query())
        s.synchronize()

    def test_work_on_a_stream_is_done(self):
        s = torch.Stream(device="ref")
        default = torch.accelerator.current_stream()
        torch.accelerator.set_stream(s)
        try:
            y = torch.ones(3, device="ref") * 3
        finally:
            torch.accelerator.set_stream(default)
        s.synchronize()
        self.assertTrue(s.query())
        self.assertEqual(y.cpu(), torch.full((3,), 3.0))

    def test_wait_stream(self):
        a = torch.Stream(device="ref")
        b = torch.accelerator.current_stream()
        a.wait_stream(b)
        b.wait_stream(a)
        self.assertTrue(a.query())


class TestDeviceModule(TestCase):
    """``torch.ref``'s streams and events, under the names of ``torch.cuda``'s (FSDP asks a
    device's module for them)."""

    def test_stream_event_current_stream(self):
        mod = torch.ref
        s = mod.Stream(priority=-1)
        self.assertIsInstance(s, torch.Stream)
        self.assertEqual(s.device, torch.device("ref:0"))
        with self.assertRaisesRegex(ValueError, r"device index in \[0, 1\) for ref, but got 1"):
            mod.Stream("ref:1")
        self.assertEqual(mod.current_stream(), torch.accelerator.current_stream())
        e = mod.Event()
        self.assertIsInstance(e, torch.Event)
        y = torch.ones(2, device="ref") * 2
        e.record(s)
        e.synchronize()
        self.assertTrue(e.query())
        self.assertEqual(y.cpu(), torch.full((2,), 2.0))

    def test_stream_context_restores_stream_and_device(self):
        mod = torch.ref
        device, before = mod.current_device(), mod.current_stream()
        other = mod.Stream(priority=-1)
        with mod.stream(other):
            self.assertEqual(mod.current_stream(), other)
        self.assertEqual(mod.current_device(), device)
        self.assertEqual(mod.current_stream(), before)
        with mod.stream(None):
            self.assertEqual(mod.current_stream(), before)


class TestEvents(TestCase):
    def test_record_query_synchronize(self):
        e = torch.Event(device="ref")
        x = torch.arange(4.0, device="ref") + 1
        e.record()
        self.assertTrue(e.query())
        e.synchronize()
        self.assertEqual(x.cpu(), torch.arange(4.0) + 1)

    def test_stream_records_and_waits(self):
        s = torch.accelerator.current_stream()
        e = s.record_event()
        self.assertIsInstance(e, torch.Event)
        self.assertTrue(e.query())
        s.wait_event(e)
        e.wait(s)


if __name__ == "__main__":
    run_tests()
