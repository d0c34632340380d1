# Owner(s): ["module: PrivateUse1"]
"""The seed PR's style end to end: a tensor subclass holding NumPy data, torch.library kernels."""

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import numpy as npy_backend
from torch_acc.backends.numpy import NumpyTensor

npy_backend.setup()


class TestSubclassBackend(TestCase):
    def test_to_and_cpu(self):
        x = torch.randn(3, 4)
        y = x.to("npy")
        self.assertIsInstance(y, NumpyTensor)
        self.assertEqual(y.device, torch.device("npy:0"))
        self.assertEqual(y.shape, x.shape)
        self.assertEqual(y.dtype, x.dtype)
        np.testing.assert_array_equal(y.raw_data, x.numpy())
        back = y.cpu()
        self.assertIs(type(back), torch.Tensor)
        self.assertEqual(back, x)

    def test_tensor_constructor(self):
        t = torch.tensor([[1, 2], [3, 4]], device="npy")
        self.assertEqual(t.dtype, torch.int64)
        self.assertEqual(t.cpu(), torch.tensor([[1, 2], [3, 4]]))

    def test_arithmetic(self):
        a_cpu, b_cpu = torch.randn(2, 3), torch.randn(2, 3)
        a, b = a_cpu.to("npy"), b_cpu.to("npy")
        self.assertEqual((a + b).cpu(), a_cpu + b_cpu)
        self.assertEqual((a - b).cpu(), a_cpu - b_cpu)
        self.assertEqual((a * b).cpu(), a_cpu * b_cpu)
        self.assertEqual((a / b).cpu(), a_cpu / b_cpu)
        self.assertEqual((a + 2).cpu(), a_cpu + 2)
        self.assertEqual(torch.add(a, b, alpha=3).cpu(), torch.add(a_cpu, b_cpu, alpha=3))
        self.assertEqual((-a).cpu(), -a_cpu)

    def test_type_promotion(self):
        i = torch.tensor([1, 2, 3], device="npy")
        f = torch.tensor([0.5, 1.0, 1.5], device="npy")
        self.assertEqual((i + f).dtype, torch.float32)
        self.assertEqual((i / 2).dtype, torch.float32)
        self.assertEqual((i * 2).dtype, torch.int64)
        self.assertEqual((i / 2).cpu(), torch.tensor([1, 2, 3]) / 2)

    def test_sum_and_mm(self):
        a_cpu, b_cpu = torch.randn(3, 4), torch.randn(4, 5)
        a, b = a_cpu.to("npy"), b_cpu.to("npy")
        self.assertEqual(a.sum().cpu(), a_cpu.sum())
        self.assertEqual(a.sum(dim=1).cpu(), a_cpu.sum(dim=1))
        self.assertEqual(a.sum(0, keepdim=True).cpu(), a_cpu.sum(0, keepdim=True))
        self.assertEqual((a @ b).cpu(), a_cpu @ b_cpu)
        self.assertEqual(a.sum().item(), a_cpu.sum().item(), atol=1e-5, rtol=1e-5)

    def test_backward(self):
        a_cpu, b_cpu = torch.randn(2, 2), torch.randn(2, 2)
        a = a_cpu.to("npy").requires_grad_()
        b = b_cpu.to("npy").requires_grad_()
        (a + b).sum().backward()
        np.testing.assert_allclose(npy_backend._unwrap(a.grad), np.ones((2, 2)))
        ac, bc = a_cpu.clone().requires_grad_(), b_cpu.clone().requires_grad_()
        a.grad = b.grad = None
        ((a * b + a) @ b).sum().backward()
        ((ac * bc + ac) @ bc).sum().backward()
        self.assertEqual(a.grad.cpu(), ac.grad)
        self.assertEqual(b.grad.cpu(), bc.grad)

    def test_repr(self):
        t = torch.tensor([[1.0, 2.0], [3.0, 4.5]], device="npy")
        self.assertExpectedInline(
            repr(t),
            """\
NumpyTensor([[1.0000, 2.0000],
             [3.0000, 4.5000]], device='npy:0')""",
        )
        self.assertExpectedInline(
            str(torch.tensor([1, 2], device="npy")), """NumpyTensor([1, 2], device='npy:0')"""
        )
        g = torch.ones(2, device="npy").requires_grad_() * 2
        self.assertExpectedInline(
            repr(g), """NumpyTensor([2., 2.], device='npy:0', grad_fn=<MulBackward0>)"""
        )

    def test_mixed_devices_error(self):
        a = torch.ones(2, 2, device="npy")
        with self.assertRaisesRegex(RuntimeError, "Expected all tensors to be on the same device"):
            a @ torch.ones(2, 2)

    def test_unsupported_dtype_names_backend(self):
        with self.assertRaisesRegex(TypeError, "npy backend does not support dtype torch.bfloat16"):
            torch.ones(2, dtype=torch.bfloat16).to("npy")


if __name__ == "__main__":
    run_tests()
