# Owner(s): ["module: PrivateUse1"]
"""What a backend's kernels return is checked: results, aliasing, mutated tensors, errors.

A careless backend is simulated by registering kernels that return nonsense for operators
this file does not otherwise use (registration is per process).
"""

import os
import subprocess
import sys

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import library
from torch_acc.backends import numpy as npy_backend

npy_backend.setup()


@library.impl("aten::hypot")
def _hypot_float64(a, b):
    return np.hypot(a, b).astype(np.float64)  # float32 inputs: the result must be float32


@library.impl("aten::mv")
def _mv_wrong_shape(a, v):
    return np.zeros((a.shape[0] + 1,), a.dtype)


@library.impl("aten::xlogy.Tensor")
def _xlogy_none(a, b):
    return None


@library.impl("aten::tanh")
def _tanh_returns_input(a):
    return a


@library.impl("aten::max.dim")
def _max_dim_one_array(a, dim, keepdim=False):
    return a.max(axis=dim, keepdims=keepdim)


@library.impl("aten::aminmax")
def _aminmax_three(a, *, dim=None, keepdim=False):
    return a.min(), a.max(), a.min()


@library.impl("aten::atan2_")
def _atan2_inplace_reshapes(a, b):
    return np.arctan2(a, b).reshape(-1)


@library.impl("aten::clamp")
def _clamp_wrong_arity(a):
    return a


@library.impl("aten::cosh")
def _cosh_raises_custom(a):
    raise np.linalg.LinAlgError("the backend could not do it")


class TestAlwaysChecked(TestCase):
    def test_none_for_a_tensor_result(self):
        x = torch.ones(3, device="npy")
        with self.assertRaisesRegex(
            RuntimeError,
            r"the npy kernel for aten::xlogy.Tensor \(_xlogy_none\) returned None for result 0",
        ):
            torch.xlogy(x, x)

    def test_input_payload_returned(self):
        x = torch.ones(3, device="npy")
        with self.assertRaisesRegex(
            RuntimeError,
            r"aten::tanh \(_tanh_returns_input\) returned the payload of its argument 'self'",
        ):
            torch.tanh(x)

    def test_wrong_number_of_results(self):
        x = torch.ones(2, 3, device="npy")
        with self.assertRaisesRegex(
            RuntimeError, r"aten::max.dim \(_max_dim_one_array\) returned numpy.ndarray, but "
            r"the operator has 2 results"
        ):
            torch.max(x, 0)
        with self.assertRaisesRegex(RuntimeError, "returned 3 results, but the operator has 2"):
            torch.aminmax(x)

    def test_inplace_result_of_another_shape(self):
        x = torch.ones(2, 3, device="npy")
        view = x[0]
        with self.assertRaisesRegex(
            RuntimeError,
            r"returned a payload of shape \[6\] for the tensor it mutates in place \('self'\), "
            r"whose shape is \[2, 3\]",
        ):
            x.atan2_(torch.ones(2, 3, device="npy"))
        self.assertEqual(x.shape, (2, 3))
        self.assertEqual(view.cpu(), torch.ones(3))

    def test_kernel_errors_name_the_operator_and_kernel(self):
        x = torch.ones(3, device="npy")
        with self.assertRaises(TypeError) as caught:
            torch.clamp(x, min=0.0)
        message = str(caught.exception)
        self.assertIn("in the npy kernel for aten::clamp (_clamp_wrong_arity): ", message)
        self.assertIn("takes 1 positional argument", message)
        self.assertIsInstance(caught.exception.__cause__, TypeError)

    def test_kernel_errors_keep_their_type(self):
        with self.assertRaises(np.linalg.LinAlgError) as caught:
            torch.cosh(torch.ones(3, device="npy"))
        self.assertIn("in the npy kernel for aten::cosh (_cosh_raises_custom): the backend "
                      "could not do it", str(caught.exception))
        self.assertIsInstance(caught.exception.__cause__, np.linalg.LinAlgError)

    def test_unchecked_dtype_is_what_the_kernel_returned(self):
        # Outside checked mode, a functional result's dtype is not compared (that would
        # cost a meta call per operator).
        x = torch.ones(3, device="npy")
        self.assertEqual(torch.hypot(x, x).dtype, torch.float64)


class TestCheckedMode(TestCase):
    def test_dtype_against_meta(self):
        x = torch.ones(3, device="npy")
        with library.check_kernels():
            with self.assertRaisesRegex(
                RuntimeError,
                r"aten::hypot \(_hypot_float64\) returned Double \[3\] for result 0, but the "
                r"operator's meta function gives Float \[3\]",
            ):
                torch.hypot(x, x)
        self.assertEqual(torch.hypot(x, x).dtype, torch.float64)  # off again

    def test_shape_against_meta(self):
        a, v = torch.ones(4, 4, device="npy"), torch.ones(4, device="npy")
        self.assertEqual(torch.mv(a, v).shape, (5,))
        with library.check_kernels():
            with self.assertRaisesRegex(
                RuntimeError, r"returned Float \[5\] for result 0, but the operator's meta "
                r"function gives Float \[4\]"
            ):
                torch.mv(a, v)

    def test_correct_kernels_pass(self):
        a = torch.randn(3, 4)
        with library.check_kernels():
            for f in (lambda t: t + 1, lambda t: t @ t.T, lambda t: t.sum(0),
                      lambda t: torch.softmax(t, 1), lambda t: t.amax(1)):
                self.assertEqual(f(a.to("npy")).cpu(), f(a))

    def test_environment_variable(self):
        code = (
            "import torch, numpy as np\n"
            "from torch_acc import library\n"
            "from torch_acc.backends import numpy as b\n"
            "b.setup()\n"
            "library.impl('aten::hypot', lambda a, c: np.hypot(a, c).astype(np.float64))\n"
            "x = torch.ones(2, device='npy')\n"
            "try:\n"
            "    torch.hypot(x, x)\n"
            "except RuntimeError as e:\n"
            "    print('refused:', e)\n"
        )
        env = dict(os.environ, TORCH_ACC_CHECK_KERNELS="1")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        self.assertIn("refused: the npy kernel for aten::hypot", out.stdout, out.stderr)


if __name__ == "__main__":
    run_tests()
