# Owner(s): ["module: PrivateUse1"]
"""Choosing the current accelerator: what torch.accelerator and get_device_module report."""

import threading
import types
from unittest import mock

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import current_accelerator, register_backend, registry, set_current_accelerator
from torch_acc._patches import autocast_device_type
from torch_acc.backends import reference


class TestCurrentAccelerator(TestCase):
    @classmethod
    def setUpClass(cls):
        # Registering again what the torch.backends entry point registered is harmless.
        register_backend("ref", reference)
        register_backend("second", types.ModuleType("second"))

    def test_choose_backend_then_cpu(self):
        set_current_accelerator("ref")
        self.assertEqual(registry.backends()["ref"], True)
        self.assertEqual(torch.accelerator.current_accelerator(), torch.device("ref"))
        self.assertEqual(current_accelerator(), torch.device("ref"))
        self.assertEqual(torch.accelerator.device_count(), 1)
        self.assertTrue(torch.accelerator.is_available())
        self.assertIs(torch.get_device_module(), torch.ref)
        set_current_accelerator("cpu")
        self.assertIsNone(torch.accelerator.current_accelerator())
        self.assertEqual(torch.accelerator.device_count(), 0)
        self.assertFalse(torch.accelerator.is_available())
        self.assertIs(torch.get_device_module(), torch.cpu)
        # An explicit device still gets its own module.
        self.assertIs(torch.get_device_module("ref"), torch.ref)
        # Tensors on the backend are unaffected by the choice.
        t = torch.ones(2, device="ref")
        set_current_accelerator(None)
        self.assertEqual((t + 1).cpu(), torch.full((2,), 2.0))
        set_current_accelerator("ref")

    def test_bad_choices(self):
        with self.assertRaisesRegex(ValueError, "unknown accelerator 'nosuch'"):
            set_current_accelerator("nosuch")
        if not torch.cuda.is_available():
            with self.assertRaisesRegex(ValueError, "cannot make cuda the current accelerator"):
                set_current_accelerator("cuda")
        # A second Python backend cannot be bound next to the first on a stock wheel.
        set_current_accelerator("ref")
        with self.assertRaisesRegex(RuntimeError, "PrivateUse1 is bound to backend 'ref'"):
            set_current_accelerator("second")

    def test_index_is_not_dropped(self):
        # The accelerator is a device type; an index given with it is an error, not ignored.
        set_current_accelerator("ref")
        for device in ("ref:99", torch.device("ref", 0), "cpu:0"):
            with self.subTest(device=device):
                with self.assertRaisesRegex(
                    ValueError,
                    r"set_current_accelerator takes a device type, but got '\w+:\d+' \(with "
                    r"an index\): use set_current_accelerator\('\w+'\)",
                ):
                    set_current_accelerator(device)
                self.assertEqual(torch.accelerator.current_accelerator(), torch.device("ref"))

    def test_concurrent_set_and_get(self):
        set_current_accelerator("ref")
        seen, errors = set(), []
        allowed = {None, torch.device("ref")}

        def setter():
            for i in range(2000):
                set_current_accelerator("ref" if i % 2 else "cpu")

        def getter():
            try:
                for _ in range(2000):
                    seen.add(torch.accelerator.current_accelerator())
            except Exception as e:  # noqa: BLE001 - re-raised in the main thread
                errors.append(e)

        threads = [threading.Thread(target=setter)] + [
            threading.Thread(target=getter) for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertLessEqual(seen, allowed)
        set_current_accelerator("ref")

    def test_autocast_defaults_to_the_current_accelerator(self):
        set_current_accelerator("cpu")
        a = torch.ones(2, 2)
        autocast = torch.autocast(dtype=torch.bfloat16)
        self.assertEqual(autocast.device, "cpu")
        with autocast:
            self.assertTrue(torch.is_autocast_enabled("cpu"))
            self.assertEqual(torch.mm(a, a).dtype, torch.bfloat16)
        self.assertEqual(torch.mm(a, a).dtype, torch.float32)
        set_current_accelerator("ref")
        self.assertEqual(autocast_device_type(None), "ref")
        self.assertEqual(autocast_device_type("cpu"), "cpu")
        with self.assertRaisesRegex(ValueError, "Expected `device_type` of type `str`"):
            torch.autocast(3)

    def test_torch_with_the_series_gets_the_choice_in_cpp(self):
        # With the series' ATen change, at::getAccelerator honours the choice: it is handed to
        # torch._C._accelerator_setCurrentAccelerator (None for none).
        calls = []
        with mock.patch.object(
            torch._C, "_accelerator_setCurrentAccelerator", calls.append, create=True
        ):
            set_current_accelerator("cpu")
            set_current_accelerator("ref")
        self.assertEqual(calls, [None, torch.device("ref")])
        self.assertEqual(current_accelerator(), torch.device("ref"))


if __name__ == "__main__":
    run_tests()
