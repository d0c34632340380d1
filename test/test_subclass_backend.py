# Owner(s): ["module: PrivateUse1"]
"""The seed PR's style end to end: a tensor subclass holding NumPy data, torch.library kernels.

The backend is defined here, as the seed PR's test defines it: tensor-level kernels registered
with ``torch.library`` that make ``NumpyTensor`` results (``create_empty_tensor`` plus a
payload), side by side with the fallback that setup installs.
"""


import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _C
from torch_acc.backend_registration import setup_privateuseone_for_python_backend

#: The device name this backend registers.
DEVICE = "npy"

#: The dtypes this backend supports: those NumPy has.
_TORCH_TO_NUMPY = {
    torch.bool: np.bool_,
    torch.uint8: np.uint8,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.int32: np.int32,
    torch.int64: np.int64,
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.complex64: np.complex64,
    torch.complex128: np.complex128,
}
_NUMPY_TO_TORCH = {np.dtype(v): k for k, v in _TORCH_TO_NUMPY.items()}


def _np_dtype(dtype: torch.dtype):
    """The NumPy dtype of a torch dtype: CPU's error for a dtype a kernel lacks, a
    ``NotImplementedError``, naming the backend, where NumPy has none."""
    try:
        return _TORCH_TO_NUMPY[dtype]
    except KeyError:
        raise NotImplementedError(
            f"the {DEVICE} backend does not support dtype {dtype}"
        ) from None


class NumpyTensor(torch.Tensor):
    """A tensor on the ``npy`` device; its data is the NumPy array ``raw_data``."""

    @staticmethod
    def __new__(cls, raw_data: np.ndarray, device_index: int = 0):
        res = _C.create_empty_tensor(raw_data.shape, _NUMPY_TO_TORCH[raw_data.dtype], device_index)
        res.__class__ = cls
        return res

    def __init__(self, raw_data: np.ndarray, device_index: int = 0):
        self.raw_data = raw_data

    # The array is the tensor's payload, not a Python attribute, so that tensors
    # PyTorch makes in C++ from this one (``detach()``, gradients) carry it too, even when
    # they come back to Python as plain ``torch.Tensor`` objects.
    @property
    def raw_data(self) -> np.ndarray:
        return _C.payload(self)

    @raw_data.setter
    def raw_data(self, value: np.ndarray) -> None:
        _C.set_payload(self, value)

    # Results of ops are whatever the kernels return (NumpyTensor on npy, plain tensors on
    # CPU): no re-wrapping into this class by the default __torch_function__.
    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self, *, tensor_contents=None):
        if tensor_contents is None:
            cpu = self.detach().cpu()
            # torch prints a subclass as "<class name>(" followed by the contents.
            indent = len(type(self).__name__) + 1
            tensor_contents = torch._tensor_str._tensor_str(cpu, indent)
        return super().__repr__(tensor_contents=tensor_contents)

    __str__ = __repr__


def _wrap(value, like, dtype: torch.dtype | None = None) -> NumpyTensor:
    """A tensor holding ``value`` on the device of ``like`` (a tensor or a device)."""
    arr = np.asarray(value)
    if dtype is not None:
        arr = arr.astype(_np_dtype(dtype), copy=False)
    elif arr.dtype not in _NUMPY_TO_TORCH:
        raise TypeError(f"the {DEVICE} backend got a NumPy result of unsupported dtype {arr.dtype}")
    device = like if isinstance(like, torch.device) else like.device
    return NumpyTensor(arr, device.index or 0)


def _on_device(*args) -> torch.Tensor:
    """The argument whose device the result goes to; all npy arguments must share it."""
    ours = [a for a in args if isinstance(a, torch.Tensor) and a.device.type == DEVICE]
    for other in ours[1:]:
        if other.device != ours[0].device:
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{ours[0].device} and {other.device}!"
            )
    return ours[0]


def _unwrap(t) -> np.ndarray:
    """The NumPy data of a tensor argument: ours, or a CPU scalar/tensor PyTorch passes along."""
    if isinstance(t, torch.Tensor) and t.device.type == DEVICE:
        return _C.payload(t)
    if isinstance(t, torch.Tensor):
        if t.device.type == "cpu" and t.dim() == 0:
            return t.detach().numpy()
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{DEVICE} and {t.device}! (the {DEVICE} backend takes CPU tensors only as 0-dim "
            "scalars)"
        )
    return np.asarray(t)


def _binary(op):
    def kernel(a, b, *args, **kwargs):
        dtype = torch.result_type(a, b)
        return _wrap(op(_unwrap(a), _unwrap(b), *args, **kwargs), _on_device(a, b), dtype)

    return kernel


def _add(a, b, *, alpha=1):
    return a + alpha * b if alpha != 1 else a + b


def _sub(a, b, *, alpha=1):
    return a - alpha * b if alpha != 1 else a - b


def _add_out(a, b, *, alpha=1, out):
    result = _add(_unwrap(a), _unwrap(b), alpha=alpha)
    _C.set_payload(out, np.asarray(result, dtype=_unwrap(out).dtype))
    return out


def _inplace(op):
    def kernel(self, other, *args, **kwargs):
        data = _unwrap(self)
        data[...] = op(data, _unwrap(other), *args, **kwargs)
        return self

    return kernel


def _div(a, b):
    return np.true_divide(a, b)


def _div_result(a, b):
    dtype = torch.result_type(a, b)
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    return _wrap(_div(_unwrap(a), _unwrap(b)), _on_device(a, b), dtype)


def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    device = torch.device(DEVICE, 0) if device is None else torch.device(device)
    return _wrap(np.empty(tuple(size), _np_dtype(dtype or torch.get_default_dtype())), device)


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    # Seed-style tensors always have contiguous metadata; the data layout is NumPy's.
    return _empty(size, dtype=dtype, device=device)


def _copy_from(src, dst, non_blocking=False):
    if dst.device.type == DEVICE:
        data = _unwrap(src) if src.device.type == DEVICE else src.detach().cpu().numpy()
        np.copyto(_unwrap(dst), data.astype(_unwrap(dst).dtype, copy=False))
    else:
        dst.copy_(torch.from_numpy(np.array(_unwrap(src), order="C")))
    return dst


def _sum(self, dim=None, keepdim=False, *, dtype=None):
    axis = None if dim is None or len(dim) == 0 else tuple(dim)
    if dtype is None:
        dtype = self.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = torch.int64
    return _wrap(np.sum(_unwrap(self), axis=axis, keepdims=keepdim, dtype=_np_dtype(dtype)), self)


def _as_strided(self, size, stride, storage_offset=None):
    base = _unwrap(self)
    if not base.flags.c_contiguous:
        base = np.array(base, order="C")
    flat = base.reshape(-1)[storage_offset or 0 :]
    item = base.itemsize
    view = np.lib.stride_tricks.as_strided(flat, tuple(size), tuple(s * item for s in stride))
    return _wrap(view.copy(), self)


def _fill(self, value):
    _unwrap(self)[...] = _unwrap(value)
    return self


def _local_scalar_dense(self):
    return _unwrap(self).item()


_KERNELS = {
    "empty.memory_format": _empty,
    "empty_strided": _empty_strided,
    "_copy_from": _copy_from,
    "detach": lambda self: _wrap(_unwrap(self), self),
    "view": lambda self, size: _wrap(_unwrap(self).reshape(tuple(size)), self),
    "_unsafe_view": lambda self, size: _wrap(_unwrap(self).reshape(tuple(size)), self),
    "as_strided": _as_strided,
    # Seed-style tensors alias nothing: an expanded tensor is a writable copy.
    "expand": lambda self, size, *, implicit=False: _wrap(
        np.broadcast_to(_unwrap(self), tuple(size)).copy(), self
    ),
    "add.Tensor": _binary(_add),
    "add.out": _add_out,
    "add_.Tensor": _inplace(_add),
    "sub.Tensor": _binary(_sub),
    "sub_.Tensor": _inplace(_sub),
    "mul_.Tensor": _inplace(np.multiply),
    "mul.Tensor": _binary(np.multiply),
    "div.Tensor": _div_result,
    "neg": lambda self: _wrap(-_unwrap(self), self),
    "sum": lambda self, *, dtype=None: _sum(self, dtype=dtype),
    "sum.dim_IntList": _sum,
    "mm": lambda self, other: _wrap(_unwrap(self) @ _unwrap(other), _on_device(self, other)),
    "fill_.Scalar": _fill,
    "_local_scalar_dense": _local_scalar_dense,
}

_lib: torch.library.Library | None = None


def setup() -> str:
    """Set up the ``npy`` device and register the seed-style kernels."""
    global _lib
    setup_privateuseone_for_python_backend(DEVICE)
    if _lib is None:
        lib = torch.library.Library("aten", "IMPL")
        for name, kernel in _KERNELS.items():
            lib.impl(name, kernel, "PrivateUse1")
        _lib = lib
    return DEVICE


setup()


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
        np.testing.assert_allclose(_unwrap(a.grad), np.ones((2, 2)))
        ac, bc = a_cpu.clone().requires_grad_(), b_cpu.clone().requires_grad_()
        a.grad = b.grad = None
        ((a * b + a) @ b).sum().backward()
        ((ac * bc + ac) @ bc).sum().backward()
        self.assertEqual(a.grad.cpu(), ac.grad)
        self.assertEqual(b.grad.cpu(), bc.grad)

    def test_gradients_keep_the_subclass(self):
        a_cpu, b_cpu = torch.randn(2, 2), torch.randn(2, 2)
        a = a_cpu.to("npy").requires_grad_()
        b = b_cpu.to("npy").requires_grad_()
        (a * b).sum().backward()
        # The gradients are the backend's tensors, as its kernels made them.
        self.assertIs(type(a.grad), NumpyTensor)
        np.testing.assert_allclose(a.grad.raw_data, b_cpu.numpy())
        self.assertIs(type(b.grad), NumpyTensor)

    def test_detach_keeps_the_subclass_and_the_version_counter(self):
        # The detach kernel's result is the detached tensor (torch 2.6 made a copy of it
        # without its Python object); it shares the input's version counter and data.
        a = torch.ones(3).to("npy").requires_grad_()
        d = a.detach()
        self.assertIs(type(d), NumpyTensor)
        self.assertFalse(d.requires_grad)
        self.assertIsNone(d.grad_fn)
        version = a._version
        d.add_(1)
        self.assertEqual(a._version, version + 1)
        self.assertEqual(a.detach().cpu(), torch.full((3,), 2.0))
        p = torch.nn.Parameter(torch.ones(2).to("npy"))
        self.assertIsInstance(p, NumpyTensor)
        self.assertIs(type(p.detach()), NumpyTensor)

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
        with self.assertRaisesRegex(
            NotImplementedError, "npy backend does not support dtype torch.uint16"
        ):
            torch.ones(2, dtype=torch.uint16).to("npy")


if __name__ == "__main__":
    run_tests()
