r"""The reference backend: device ``"npy"``, whose device data are NumPy arrays.

Tensors on ``npy`` are plain ``torch.Tensor`` objects whose payload is a NumPy array; the
kernels below take and return arrays (registered through the library module). Views share
their base's array, so writes through a view show in the base. Operators without a kernel
here run through PyTorch's decompositions.

Example::

    >>> # xdoctest: +SKIP
    >>> import torch
    >>> from torch_acc.backends import numpy as npy_backend
    >>> npy_backend.setup()
    'npy'
    >>> (torch.ones(2, device="npy") * 3).sum()
    tensor(6., device='npy:0')
"""

import functools
import sys

import numpy as np
import torch

from torch_acc import library, registry
from torch_acc.backend_registration import setup_privateuseone_for_python_backend

__all__ = ["DEVICE", "register", "setup"]

#: The device name this backend registers.
DEVICE = "npy"

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
    try:
        return _TORCH_TO_NUMPY[dtype]
    except KeyError:
        raise TypeError(
            f"the {DEVICE} backend does not support dtype {dtype}: expected one of "
            f"{', '.join(str(d) for d in _TORCH_TO_NUMPY)}"
        ) from None


def _kind(x):
    """What type promotion needs to know of an operand: its dtype, and whether it is a scalar."""
    if isinstance(x, np.ndarray | np.generic):
        return (_NUMPY_TO_TORCH[x.dtype], x.ndim == 0)
    return (type(x), True)


@functools.cache
def _result_type(*kinds) -> np.dtype:
    def operand(kind):
        t, scalar = kind
        if isinstance(t, torch.dtype):
            return torch.empty(() if scalar else (1,), dtype=t)
        return t(1)

    return np.dtype(_np_dtype(torch.result_type(*(operand(k) for k in kinds))))


_ndarray = np.ndarray


def _promoted(result, a, b):
    """``result`` in the dtype PyTorch gives for ``a`` and ``b`` (NumPy promotes differently)."""
    # Every binary kernel runs this, so the common case, two arrays of one dtype, comes first
    # and cheapest: exact types and identical (builtin, hence shared) dtype objects.
    if type(a) is _ndarray and type(b) is _ndarray and a.dtype is b.dtype:
        return result
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype:
        return result
    return np.asarray(result, dtype=_result_type(_kind(a), _kind(b)))


# --- payload functions ------------------------------------------------------------------


def _as_strided(payload, size, stride, storage_offset):
    arr = np.asarray(payload)
    item = arr.itemsize
    extent = storage_offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1
    flat = np.lib.stride_tricks.as_strided(arr, (max(extent, storage_offset),), (item,))
    return np.lib.stride_tricks.as_strided(
        flat[storage_offset:], tuple(size), tuple(s * item for s in stride)
    )


def _to_cpu(payload) -> torch.Tensor:
    return torch.from_numpy(np.array(payload, order="C"))


def _from_cpu(tensor: torch.Tensor):
    _np_dtype(tensor.dtype)
    return tensor.resolve_conj().resolve_neg().numpy().copy()


def _copy_into(dst, src):
    if isinstance(dst, np.ndarray) and dst.flags.writeable:
        np.copyto(dst, src, casting="unsafe")
        return dst
    return np.array(np.broadcast_to(src, np.shape(dst)), dtype=np.asarray(dst).dtype)


# --- kernels ----------------------------------------------------------------------------


def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return np.empty(tuple(size), _np_dtype(dtype or torch.get_default_dtype()))


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    np_dtype = np.dtype(_np_dtype(dtype or torch.get_default_dtype()))
    extent = sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1
    flat = np.empty((max(extent, 0),), np_dtype)
    return np.lib.stride_tricks.as_strided(
        flat, tuple(size), tuple(s * np_dtype.itemsize for s in stride)
    )


def _add(a, b, *, alpha=1):
    return _promoted(a + alpha * b if alpha != 1 else a + b, a, b)


def _sub(a, b, *, alpha=1):
    return _promoted(a - alpha * b if alpha != 1 else a - b, a, b)


def _mul(a, b):
    return _promoted(a * b, a, b)


def _div(a, b):
    out = np.true_divide(a, b)
    dtype = _result_type(_kind(a), _kind(b))
    if dtype.kind in "biu":
        dtype = np.dtype(_np_dtype(torch.get_default_dtype()))
    return np.asarray(out, dtype=dtype)


def _inplace(op):
    def kernel(self, other, *, alpha=1):
        value = op(self, other, alpha=alpha) if alpha != 1 else op(self, other)
        np.copyto(self, value, casting="unsafe")
        return self

    return kernel


def _sum(self, dim=None, keepdim=False, *, dtype=None):
    axis = None if not dim else tuple(dim)
    if dtype is None:
        dtype = _NUMPY_TO_TORCH[self.dtype]
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = torch.int64
    return np.asarray(np.sum(self, axis=axis, keepdims=keepdim, dtype=_np_dtype(dtype)))


def _mean(self, dim=None, keepdim=False, *, dtype=None):
    axis = None if not dim else tuple(dim)
    np_dtype = self.dtype if dtype is None else _np_dtype(dtype)
    return np.asarray(np.mean(self, axis=axis, keepdims=keepdim, dtype=np_dtype))


def _fill(self, value):
    self[...] = value
    return self


def _zero(self):
    self[...] = 0
    return self


def _arange_out(start, end, step=1, *, out):
    return np.arange(start, end, step, dtype=out.dtype)


def _threshold_backward(grad, self, threshold):
    return np.where(self <= threshold, np.zeros((), grad.dtype), grad)


_KERNELS = {
    "empty.memory_format": _empty,
    "empty_strided": _empty_strided,
    "arange.start_out": _arange_out,
    "add.Tensor": _add,
    "add_.Tensor": _inplace(_add),
    "sub.Tensor": _sub,
    "sub_.Tensor": _inplace(_sub),
    "mul.Tensor": _mul,
    "mul_.Tensor": _inplace(_mul),
    "div.Tensor": _div,
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "relu": lambda self: np.maximum(self, np.zeros((), self.dtype)),
    "threshold_backward": _threshold_backward,
    "mm": np.matmul,
    "sum.dim_IntList": _sum,
    "mean.dim": _mean,
    "fill_.Scalar": _fill,
    "zero_": _zero,
}

_registered = False


def setup() -> str:
    """Set up the ``npy`` device and register its kernels (idempotent). Returns ``"npy"``."""
    global _registered
    setup_privateuseone_for_python_backend(DEVICE)
    if not _registered:
        library.impl_payload(
            as_strided=_as_strided, to_cpu=_to_cpu, from_cpu=_from_cpu, copy_into=_copy_into
        )
        for name, kernel in _KERNELS.items():
            library.impl(name, kernel)
        _registered = True
    return DEVICE


def register() -> None:
    """The ``torch.backends`` entry point: record the backend, bind nothing."""
    registry.autoload(DEVICE, sys.modules[__name__])
