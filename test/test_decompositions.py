# Owner(s): ["module: PrivateUse1"]
"""Operators without a kernel run through torch._decomp; otherwise a clear error.

The backend here is a small one, ``dec``: the passthrough backend's payload functions (CPU
tensors) and a dozen of its kernels (arithmetic, exp/log, mm, sum, mean, fill), so that most
operators must decompose and some cannot.
"""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import library
from torch_acc._fallback import MissingKernelError
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import reference

DEVICE = "dec"
KERNELS = (
    "empty.memory_format", "empty_strided", "cat",
    "add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "neg", "exp", "log", "gt.Scalar",
    "fill_.Scalar", "zero_",
    "mm", "sum.dim_IntList", "mean.dim",
    "relu", "threshold_backward",
)

setup_privateuseone_for_python_backend(DEVICE)
library.impl_payload(**reference.PAYLOAD_FUNCTIONS)
for _name in KERNELS:
    library.impl(_name, reference.passthrough_kernel(_name))


class TestDecompositions(TestCase):
    def test_decomposed_operators_match_cpu(self):
        x = torch.randn(3, 4)
        cases = {
            "addmm": lambda t: torch.addmm(t[0, :2], t[:, :2].t() @ t[:, :2], t[:2, :2]),
            "silu": torch.nn.functional.silu,
            "sigmoid": torch.sigmoid,
            "rsub": lambda t: 2 - t,
            "square": lambda t: t.square(),
            "linear": lambda t: torch.nn.functional.linear(t, t[:2], t[0, :2]),
            "mse_loss": lambda t: torch.nn.functional.mse_loss(t, t * 2),
            "softplus_like": lambda t: (t.exp() + 1).log(),
            "mean": lambda t: t.mean(),
        }
        for name, fn in cases.items():
            with self.subTest(op=name):
                self.assertEqual(fn(x.to(DEVICE)).cpu(), fn(x), atol=1e-5, rtol=1e-5)

    def test_operator_of_another_namespace_names_itself(self):
        lib = torch.library.Library("acc_test", "DEF")
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CPU")
        self.assertEqual(torch.ops.acc_test.twice(torch.ones(2)), torch.full((2,), 2.0))
        with self.assertRaisesRegex(
            MissingKernelError,
            r"^acc_test.twice.default has no kernel for the dec backend and no decomposition\. "
            r"Register a kernel with torch.library.impl\('acc_test::twice.default', "
            r"'privateuseone'\) \(tensors\)\.$",
        ):
            torch.ops.acc_test.twice(torch.ones(2).to(DEVICE))

    def test_backward_through_decompositions(self):
        x = torch.randn(4, 3)
        w = torch.randn(2, 3)
        xd = x.to(DEVICE)
        wd = w.to(DEVICE).requires_grad_()
        torch.nn.functional.linear(xd, wd).relu().mean().backward()
        wc = w.clone().requires_grad_()
        torch.nn.functional.linear(x, wc).relu().mean().backward()
        self.assertEqual(wd.grad.cpu(), wc.grad, atol=1e-6, rtol=1e-5)

    def test_no_kernel_no_decomposition(self):
        t = torch.ones(3, device=DEVICE)
        with self.assertRaises(MissingKernelError) as ctx:
            torch.special.bessel_j0(t)
        msg = str(ctx.exception)
        self.assertIn("aten.special_bessel_j0", msg)
        self.assertIn(f"{DEVICE} backend", msg)
        self.assertIn(f"{library.__name__}.impl('special_bessel_j0.default', fn)", msg)
        self.assertIsInstance(ctx.exception, NotImplementedError)

    def test_structured_operator_without_kernel(self):
        # tanh's functional kernel calls tanh.out: the error names the functional overload.
        with self.assertRaisesRegex(MissingKernelError, r"aten\.tanh\.default has no kernel"):
            torch.tanh(torch.ones(2, device=DEVICE))

    def test_decomposition_names_the_missing_operators(self):
        t = torch.ones(3, device=DEVICE)
        for fn, needed in [
            (torch.nn.functional.gelu, "aten.erf.default"),
            (lambda x: x.softmax(0), "aten.amax.default"),
        ]:
            with self.subTest(needed=needed):
                with self.assertRaises(MissingKernelError) as ctx:
                    fn(t)
                self.assertIn(needed, ctx.exception.missing)
                self.assertIn(f"its decomposition needs {needed}", str(ctx.exception))


if __name__ == "__main__":
    run_tests()
