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

import ml_dtypes
import numpy as np
import torch

from torch_acc import library, registry
from torch_acc._C import PrivateUse1Hooks
from torch_acc.backend_registration import setup_privateuseone_for_python_backend

__all__ = ["DEVICE", "NumpyGenerator", "register", "setup"]

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
    torch.bfloat16: ml_dtypes.bfloat16,
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


# torch and NumPy exchange bfloat16 (ml_dtypes') data as the int16 of the same bits.
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _to_cpu(payload) -> torch.Tensor:
    arr = np.array(payload, order="C")
    if arr.dtype == _BFLOAT16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def _from_cpu(tensor: torch.Tensor):
    _np_dtype(tensor.dtype)
    tensor = tensor.resolve_conj().resolve_neg()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(_BFLOAT16).copy()
    return tensor.numpy().copy()


def _copy_into(dst, src):
    if isinstance(dst, np.ndarray) and dst.flags.writeable:
        np.copyto(dst, src, casting="unsafe")
        return dst
    return np.array(np.broadcast_to(src, np.shape(dst)), dtype=np.asarray(dst).dtype)


# --- random numbers ---------------------------------------------------------------------


class NumpyGenerator:
    """The state of one ``torch.Generator`` of the ``npy`` device: a NumPy PCG64 generator.

    ``numpy`` is the ``numpy.random.Generator`` the random kernels draw from. The state as
    torch sees it (``get_state()``) is the seed followed by the PCG64 state, as bytes.
    """

    #: The seed of a new generator: the one torch gives its CPU and CUDA generators.
    DEFAULT_SEED = 67280421310721
    _FIELDS = (("seed", 8), ("state", 16), ("inc", 16), ("has_uint32", 1), ("uinteger", 4))
    STATE_SIZE = sum(n for _, n in _FIELDS)

    def __init__(self, seed: int = DEFAULT_SEED):
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> None:
        self._seed = int(seed)
        self.numpy = np.random.Generator(np.random.PCG64(self._seed))

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> torch.Tensor:
        pcg = self.numpy.bit_generator.state
        values = {"seed": self._seed, **pcg["state"], "has_uint32": pcg["has_uint32"],
                  "uinteger": pcg["uinteger"]}
        data = b"".join(values[name].to_bytes(n, "little") for name, n in self._FIELDS)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)

    def set_state(self, state: torch.Tensor) -> None:
        if state.numel() != self.STATE_SIZE:
            raise ValueError(
                f"expected a {DEVICE} generator state of {self.STATE_SIZE} bytes, but got "
                f"{state.numel()}"
            )
        data, values, start = bytes(state.numpy()), {}, 0
        for name, n in self._FIELDS:
            values[name] = int.from_bytes(data[start:start + n], "little")
            start += n
        self.manual_seed(values["seed"])
        self.numpy.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": values["state"], "inc": values["inc"]},
            "has_uint32": values["has_uint32"],
            "uinteger": values["uinteger"],
        }


class _Hooks(PrivateUse1Hooks):
    def get_new_generator(self, device_index: int) -> NumpyGenerator:
        return NumpyGenerator()

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]


def _normal_(self, mean=0.0, std=1.0, *, generator):
    self[...] = generator.numpy.normal(mean, std, self.shape)
    return self


def _uniform_(self, from_=0.0, to=1.0, *, generator):
    self[...] = generator.numpy.uniform(from_, to, self.shape)
    return self


def _bernoulli_(self, p=0.5, *, generator):
    self[...] = generator.numpy.random(self.shape) < p
    return self


def _bernoulli(self, p=None, *, generator):
    return (generator.numpy.random(self.shape) < (self if p is None else p)).astype(self.dtype)


def _random_high(dtype: np.dtype) -> int:
    """One past the largest value ``random_()`` draws for ``dtype`` (as torch's CPU kernel)."""
    if dtype == np.bool_:
        return 2
    if dtype.kind == "f":
        return 2 ** (np.finfo(dtype).nmant + 1) + 1
    return int(np.iinfo(dtype).max) + 1


def _random_(self, low=0, high=None, *, generator):
    if high is None:
        high = _random_high(self.dtype)
    if low >= high:
        raise ValueError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    self[...] = generator.numpy.integers(low, high, self.shape, dtype=np.int64)
    return self


def _random_to(self, high, *, generator):
    return _random_(self, 0, high, generator=generator)


def _randperm_out(n, *, generator, out):
    return generator.numpy.permutation(n).astype(out.dtype)


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


def _mm(a, b):
    # NumPy multiplies bfloat16 matrices into float32.
    return np.matmul(a, b).astype(_result_type(_kind(a), _kind(b)), copy=False)


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


def _cat(tensors, dim=0):
    dtype = _result_type(*((_NUMPY_TO_TORCH[t.dtype], False) for t in tensors))
    return np.concatenate(tensors, axis=dim, dtype=dtype)


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
    "mm": _mm,
    "gt.Scalar": lambda self, other: np.asarray(self > other),
    "cat": _cat,
    "sum.dim_IntList": _sum,
    "mean.dim": _mean,
    "fill_.Scalar": _fill,
    "zero_": _zero,
    "normal_": _normal_,
    "uniform_": _uniform_,
    "bernoulli_.float": _bernoulli_,
    "bernoulli_.Tensor": _bernoulli_,
    "bernoulli": _bernoulli,
    "bernoulli.p": _bernoulli,
    "random_": _random_,
    "random_.from": _random_,
    "random_.to": _random_to,
    "randperm.generator_out": _randperm_out,
}

_registered = False


def setup() -> str:
    """Set up the ``npy`` device and register its kernels (idempotent). Returns ``"npy"``."""
    global _registered
    setup_privateuseone_for_python_backend(DEVICE, hook=_Hooks())
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
