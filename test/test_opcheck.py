# Owner(s): ["module: PrivateUse1"]
"""torch_acc.testing.opcheck: one operator's kernel against CPU, with the contract enforced."""

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import library
from torch_acc.backends import numpy as npy_backend
from torch_acc.testing import opcheck, OpCheckError

npy_backend.setup()


@library.impl("aten::hypot")
def _hypot_off_by_one(a, b):
    return np.hypot(a, b) + 1  # wrong values, right dtype and shape


@library.impl("aten::copysign.Tensor")
def _copysign_float64(a, b):
    return np.copysign(a, b).astype(np.float64)


@library.impl("aten::fmod.Tensor")
def _fmod_never_raises(a, b):
    return np.zeros_like(a)


@library.impl("aten::logaddexp")
def _logaddexp_mutates(a, b):
    a += 1  # writes its input
    return np.logaddexp(a, b)


class TestOpcheck(TestCase):
    def test_correct_kernels_pass(self):
        a, b = torch.randn(3, 4), torch.randn(4, 2)
        opcheck(torch.ops.aten.mm.default, (a, b), device="npy")
        opcheck("aten::add.Tensor", (a, a), ((a, 2.0), {"alpha": 3}), device="npy")
        opcheck(torch.ops.aten.add_.Tensor, (a.clone(), a), device="npy")
        out = torch.empty(0)
        opcheck(torch.ops.aten.mul.out, ((a, a), {"out": out}), device="npy")
        # Both raise: fine.
        opcheck(torch.ops.aten.mm.default, (a, a), device="npy")

    def test_wrong_values(self):
        x = torch.rand(3)
        with self.assertRaisesRegex(OpCheckError, r"aten.hypot.default on npy, sample 0: "
                                    r"result 0: values differ"):
            opcheck(torch.ops.aten.hypot.default, (x, x), device="npy")

    def test_wrong_dtype_is_caught_by_the_contract(self):
        x = torch.rand(3)
        with self.assertRaisesRegex(
            OpCheckError, r"the device raised RuntimeError: the npy kernel for "
            r"aten::copysign.Tensor \(_copysign_float64\) returned Double \[3\]"
        ):
            opcheck(torch.ops.aten.copysign.Tensor, (x, x), device="npy")

    def test_mutated_input(self):
        x = torch.rand(3)
        with self.assertRaisesRegex(OpCheckError, "tensor argument 0 after the call"):
            opcheck(torch.ops.aten.logaddexp.default, (x, x), device="npy")

    def test_error_on_one_side(self):
        # Integer division by zero: CPU raises, the careless kernel does not.
        ints = torch.tensor([1, 2, 3])
        with self.assertRaisesRegex(OpCheckError, "CPU raised RuntimeError: ZeroDivisionError, "
                                    "the device did not"):
            opcheck(torch.ops.aten.fmod.Tensor, (ints, torch.zeros(3, dtype=torch.long)),
                    device="npy")

    def test_bad_arguments(self):
        with self.assertRaisesRegex(TypeError, "expected an aten operator overload"):
            opcheck("nonsense", (torch.rand(2),), device="npy")
        with self.assertRaisesRegex(TypeError, "expected each sample to be a tuple"):
            opcheck(torch.ops.aten.relu.default, [torch.rand(2)], device="npy")


if __name__ == "__main__":
    run_tests()
