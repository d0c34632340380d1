# Owner(s): ["module: PrivateUse1"]
"""Choosing the current accelerator: what torch.accelerator and get_device_module report."""

import threading

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

import torch_acc
from torch_acc import registry


class TestCurrentAccelerator(TestCase):
    def test_choose_backend_then_cpu(self):
        torch_acc.set_current_accelerator("npy")
        self.assertEqual(registry.backends()["npy"], True)
        self.assertEqual(torch.accelerator.current_accelerator(), torch.device("npy"))
        self.assertEqual(torch_acc.current_accelerator(), torch.device("npy"))
        self.assertEqual(torch.accelerator.device_count(), 1)
        self.assertTrue(torch.accelerator.is_available())
        self.assertIs(torch.get_device_module(), torch.npy)
        torch_acc.set_current_accelerator("cpu")
        self.assertIsNone(torch.accelerator.current_accelerator())
        self.assertEqual(torch.accelerator.device_count(), 0)
        self.assertFalse(torch.accelerator.is_available())
        self.assertIs(torch.get_device_module(), torch.cpu)
        # An explicit device still gets its own module.
        self.assertIs(torch.get_device_module("npy"), torch.npy)
        # Tensors on the backend are unaffected by the choice.
        t = torch.ones(2, device="npy")
        torch_acc.set_current_accelerator(None)
        self.assertEqual((t + 1).cpu(), torch.full((2,), 2.0))
        torch_acc.set_current_accelerator("npy")

    def test_bad_choices(self):
        with self.assertRaisesRegex(ValueError, "unknown accelerator 'nosuch'"):
            torch_acc.set_current_accelerator("nosuch")
        if not torch.cuda.is_available():
            with self.assertRaisesRegex(ValueError, "cannot make cuda the current accelerator"):
                torch_acc.set_current_accelerator("cuda")
        # A second Python backend cannot be bound next to the first on a stock wheel.
        torch_acc.set_current_accelerator("npy")
        with self.assertRaisesRegex(RuntimeError, "PrivateUse1 is bound to backend 'npy'"):
            torch_acc.set_current_accelerator("ref")

    def test_concurrent_set_and_get(self):
        torch_acc.set_current_accelerator("npy")
        seen, errors = set(), []
        allowed = {None, torch.device("npy")}

        def setter():
            for i in range(2000):
                torch_acc.set_current_accelerator("npy" if i % 2 else "cpu")

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
        torch_acc.set_current_accelerator("npy")


if __name__ == "__main__":
    run_tests()
