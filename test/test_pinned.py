# Owner(s): ["module: PrivateUse1"]
"""Pinned host memory once a Python backend is the accelerator: pin_memory(), DataLoader."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase
from torch.utils.data import DataLoader, TensorDataset

from torch_acc import _compat
from torch_acc.backends import reference

reference.setup()


class TestPinMemory(TestCase):
    def test_pin_memory_copies_into_pinned_host_memory(self):
        t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        self.assertFalse(t.is_pinned())
        p = t.pin_memory()
        self.assertEqual(p.device, torch.device("cpu"))
        self.assertTrue(p.is_pinned())
        self.assertEqual(p, t)
        self.assertNotEqual(p.data_ptr(), t.data_ptr())
        self.assertIs(p.pin_memory(), p)
        # Views of pinned memory are pinned; copies are not.
        self.assertTrue(p[1].is_pinned())
        self.assertFalse(p.clone().is_pinned())

    def test_pinned_factories(self):
        for t in (torch.empty(4, pin_memory=True), torch.zeros(3, 2, pin_memory=True)):
            self.assertEqual(t.device, torch.device("cpu"))
            self.assertTrue(t.is_pinned())
        self.assertEqual(torch.zeros(3, 2, pin_memory=True), torch.zeros(3, 2))

    def test_pinned_memory_is_released(self):
        p = torch.ones(1024).pin_memory()
        ptr = p.untyped_storage().data_ptr()
        view = p[:10]
        del p
        self.assertTrue(view.is_pinned())
        del view
        # The address is forgotten with the memory: a CPU tensor that reuses it is not pinned.
        for _ in range(100):
            t = torch.empty(1024)
            if t.untyped_storage().data_ptr() == ptr:
                self.assertFalse(t.is_pinned())
                break

    def test_copy_to_device_from_pinned(self):
        p = torch.arange(4.0).pin_memory()
        d = p.to("ref", non_blocking=True)
        self.assertEqual(d.device, torch.device("ref:0"))
        self.assertEqual(d.cpu(), torch.arange(4.0))


class TestDataLoader(TestCase):
    def _check(self, **kwargs):
        data = TensorDataset(torch.arange(20.0).reshape(10, 2), torch.arange(10))
        if _compat.DATALOADER_NEEDS_PIN_MEMORY_DEVICE:
            kwargs["pin_memory_device"] = "ref"
        batches = list(DataLoader(data, batch_size=4, pin_memory=True, **kwargs))
        self.assertEqual(len(batches), 3)
        for x, y in batches:
            self.assertTrue(x.is_pinned())
            self.assertTrue(y.is_pinned())
        self.assertEqual(torch.cat([x for x, _ in batches]), data.tensors[0])
        self.assertEqual(torch.cat([y for _, y in batches]), data.tensors[1])

    def test_pin_memory_in_main_process(self):
        self._check()

    def test_pin_memory_thread_with_workers(self):
        self._check(num_workers=2)


if __name__ == "__main__":
    run_tests()
