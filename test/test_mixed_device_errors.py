# Owner(s): ["module: PrivateUse1"]
"""Mixing devices in one operator fails as it does on CUDA; CPU scalars are fine."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc._C import DeviceGuard
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import reference


class TwoDevices(DeviceGuard):
    def device_count(self):
        return 2


setup_privateuseone_for_python_backend("ref", device_guard=TwoDevices(), hook=reference._Hooks())
reference.setup()

SAME_DEVICE = "Expected all tensors to be on the same device, but found at least two devices"


class TestMixedDevices(TestCase):
    def test_cpu_tensor(self):
        a = torch.ones(2, 2, device="ref")
        with self.assertRaisesRegex(RuntimeError, SAME_DEVICE + ", ref:0 and cpu!"):
            a + torch.ones(2, 2)
        with self.assertRaisesRegex(RuntimeError, SAME_DEVICE):
            torch.mm(a, torch.ones(2, 2))

    def test_two_device_indices(self):
        a = torch.ones(2, device="ref:0")
        b = torch.ones(2, device="ref:1")
        with self.assertRaisesRegex(RuntimeError, SAME_DEVICE + ", ref:0 and ref:1!"):
            a + b

    def test_cpu_scalars_are_allowed(self):
        a = torch.ones(2, device="ref:1")
        self.assertEqual((a + torch.tensor(1.0)).cpu(), torch.full((2,), 2.0))
        self.assertEqual((a * 2).device, torch.device("ref:1"))


if __name__ == "__main__":
    run_tests()
