# Owner(s): ["module: PrivateUse1"]
"""What a backend's payload functions (library.impl_payload) return is checked.

A backend ``chk`` of NumPy payloads, whose four payload functions are the NumPy backend's
unless a test replaces one: a result of the wrong kind, shape, dtype or layout is an error
naming the backend, the function and what it returned, never a tensor over the wrong data.
"""

import contextlib

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

import torch_acc
from torch_acc import library
from torch_acc.backends.numpy import _common


class PayloadFunctions:
    """The payload functions registered for ``chk``: each calls ``self.functions[name]``."""

    def __init__(self):
        self.functions = {
            "as_strided": _common.as_strided,
            "to_cpu": _common.to_cpu,
            "from_cpu": _common.from_cpu,
            "copy_into": _common.copy_into,
        }

    def registered(self, name: str):
        def call(*args):
            return self.functions[name](*args)

        call.__qualname__ = f"chk_{name}"
        return call

    @contextlib.contextmanager
    def replaced(self, **functions):
        saved = dict(self.functions)
        self.functions.update(functions)
        try:
            yield
        finally:
            self.functions = saved


FUNCTIONS = PayloadFunctions()
torch_acc.setup_privateuseone_for_python_backend("chk")
library.impl_payload(**{name: FUNCTIONS.registered(name) for name in FUNCTIONS.functions})


@library.impl("empty.memory_format")
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return np.zeros(size, _common.np_dtype(dtype or torch.get_default_dtype()))


@library.impl("empty_strided")
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return np.zeros(size, _common.np_dtype(dtype or torch.get_default_dtype()))


@library.impl("add.Tensor")
def add(a, b, *, alpha=1):
    return _common.promoted(a + alpha * b, a, b)


def _chk(t: torch.Tensor) -> torch.Tensor:
    return t.to("chk")


class TestToCpu(TestCase):
    def test_correct_functions_work(self):
        x = _chk(torch.arange(6.0).reshape(2, 3))
        self.assertEqual((x[:, 1:] + x[:, 1:]).cpu(), 2 * torch.arange(6.0).reshape(2, 3)[:, 1:])
        y = _chk(torch.zeros(2, 3))
        y.copy_(x)
        self.assertEqual(y.cpu(), x.cpu())

    def test_an_array_is_not_a_cpu_tensor(self):
        x = _chk(torch.ones(3))
        message = (
            r"the chk backend's payload function to_cpu \(chk_to_cpu\) returned a "
            r"numpy.ndarray of shape \(3,\) and dtype float32, but expected a CPU "
            r"torch.Tensor of shape \(3,\) and dtype torch.float32 \(the tensor's\)"
        )
        with FUNCTIONS.replaced(to_cpu=lambda p: p):
            with self.assertRaisesRegex(TypeError, message):
                x.cpu()
            with self.assertRaisesRegex(TypeError, message):
                str(x)

    def test_wrong_shape_or_dtype(self):
        x = _chk(torch.ones(3))
        # copy_ into the CPU would broadcast a (1,) tensor or cast a float64 one silently.
        for result, got in (
            (torch.zeros(1), r"a cpu torch.Tensor of shape \(1,\) and dtype torch.float32"),
            (
                torch.zeros(3, dtype=torch.float64),
                r"a cpu torch.Tensor of shape \(3,\) and dtype torch.float64",
            ),
        ):
            with self.subTest(got=got), FUNCTIONS.replaced(to_cpu=lambda p, r=result: r):
                with self.assertRaisesRegex(
                    RuntimeError,
                    rf"to_cpu \(chk_to_cpu\) returned {got}, but expected a CPU torch.Tensor of "
                    r"shape \(3,\) and dtype torch.float32",
                ):
                    x.cpu()


class TestFromCpu(TestCase):
    def test_none(self):
        with FUNCTIONS.replaced(from_cpu=lambda t: None):
            with self.assertRaisesRegex(
                TypeError,
                r"the chk backend's payload function from_cpu \(chk_from_cpu\) returned None, "
                r"but expected a payload of shape \(2, 3\) and dtype torch.float32 \(the CPU "
                r"tensor's\)",
            ):
                _chk(torch.ones(2, 3))

    def test_wrong_shape_or_dtype(self):
        for result, got in (
            (np.zeros(2, np.float32), r"shape \(2,\) and dtype float32"),
            (np.zeros((2, 3)), r"shape \(2, 3\) and dtype float64"),
        ):
            with self.subTest(got=got), FUNCTIONS.replaced(from_cpu=lambda t, r=result: r):
                with self.assertRaisesRegex(
                    RuntimeError,
                    rf"from_cpu \(chk_from_cpu\) returned a numpy.ndarray of {got}, but expected "
                    r"a payload of shape \(2, 3\) and dtype torch.float32",
                ):
                    _chk(torch.ones(2, 3))


class TestCopyInto(TestCase):
    def test_none(self):
        x, y = _chk(torch.zeros(3)), _chk(torch.ones(3))
        with FUNCTIONS.replaced(copy_into=lambda dst, src: None):
            with self.assertRaisesRegex(
                TypeError,
                r"the chk backend's payload function copy_into \(chk_copy_into\) returned "
                r"None, but expected the dst payload it was given or a new payload of dst's "
                r"shape \(3,\) and dtype torch.float32",
            ):
                x.copy_(y)
        self.assertEqual(x.cpu(), torch.zeros(3))

    def test_new_payload_of_the_wrong_dtype(self):
        x, y = _chk(torch.zeros(3)), _chk(torch.ones(3))
        with FUNCTIONS.replaced(copy_into=lambda dst, src: np.ones(3)):
            with self.assertRaisesRegex(
                RuntimeError,
                r"copy_into \(chk_copy_into\) returned a numpy.ndarray of shape \(3,\) and dtype "
                r"float64, but expected the dst payload",
            ):
                x.copy_(y)

    @staticmethod
    def immutable(dst, src):
        """A backend whose payloads are immutable: a new payload laid out as ``dst``."""
        result = np.empty_like(dst)
        np.copyto(result, src, casting="unsafe")
        return result

    def test_new_payload_for_a_whole_tensor(self):
        x = _chk(torch.zeros(2, 3))
        with FUNCTIONS.replaced(copy_into=self.immutable):
            x.copy_(_chk(torch.arange(3.0)))
            alias = x.detach()
            self.assertEqual(alias.cpu(), torch.arange(3.0).expand(2, 3))
            self.assertEqual(x[1].cpu(), torch.arange(3.0))

    def test_new_payload_for_part_of_a_payload(self):
        x = _chk(torch.zeros(2, 3))
        with FUNCTIONS.replaced(copy_into=self.immutable):
            for view in (x[0], x[1], x[:, 1:]):
                with self.subTest(view=view.shape), self.assertRaisesRegex(
                    RuntimeError,
                    r"copy_into \(chk_copy_into\) returned a numpy.ndarray of shape "
                    r"\(\d, ?\d?\) and dtype float32, but expected the dst payload it was "
                    r"given: dst is a view of part of a payload, which a new payload cannot "
                    r"replace \(write into dst\)",
                ):
                    view.copy_(_chk(torch.ones(view.shape)))
        self.assertEqual(x.cpu(), torch.zeros(2, 3))

    def test_new_payload_laid_out_otherwise(self):
        # A transposed view spans its whole payload, in the other order.
        x = _chk(torch.zeros(3, 2)).t()
        c_order = lambda dst, src: np.ascontiguousarray(  # noqa: E731
            np.broadcast_to(src, dst.shape), dst.dtype
        )
        with FUNCTIONS.replaced(copy_into=c_order):
            with self.assertRaisesRegex(
                RuntimeError,
                r"copy_into \(chk_copy_into\) returned a numpy.ndarray of shape "
                r"\(2, 3\) and dtype float32, but expected the dst payload it was given or a "
                r"new payload laid out as dst \(strides \(1, 2\)\), but the new payload has "
                r"strides \(3, 1\)",
            ):
                x.copy_(_chk(torch.ones(2, 3)))


class TestAsStrided(TestCase):
    def test_a_payload_of_the_whole_base(self):
        x = _chk(torch.arange(6.0))
        message = (
            r"the chk backend's payload function as_strided \(chk_as_strided\) returned a "
            r"numpy.ndarray of shape \(6,\) and dtype float32, but expected a payload of the "
            r"view's shape \(2,\) \(size \(2,\), stride \(1,\), storage offset 1\)"
        )
        with FUNCTIONS.replaced(as_strided=lambda p, size, stride, offset: p):
            with self.assertRaisesRegex(RuntimeError, message):
                x[1:3] + x[1:3]
            with self.assertRaisesRegex(RuntimeError, message):
                x[1:3].cpu()

    def test_not_a_payload(self):
        x = _chk(torch.arange(6.0))
        with FUNCTIONS.replaced(as_strided=lambda p, size, stride, offset: None):
            with self.assertRaisesRegex(
                TypeError,
                r"as_strided \(chk_as_strided\) returned None, but expected a payload of the "
                r"view's shape \(3,\) \(size \(3,\), stride \(2,\), storage offset 0\)",
            ):
                x[::2].cpu()


if __name__ == "__main__":
    run_tests()
