"""What every kernel module of the ``npy`` backend shares: dtypes, type promotion, payloads."""

import functools
import math

import ml_dtypes
import numpy as np
import torch

from torch_acc import versions

#: The device name this backend registers.
DEVICE = "npy"

TORCH_TO_NUMPY = {
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
NUMPY_TO_TORCH = {np.dtype(v): k for k, v in TORCH_TO_NUMPY.items()}


def np_dtype(dtype: torch.dtype, op: str | None = None):
    """The NumPy dtype of a torch dtype; a ``NotImplementedError`` naming the backend (and
    ``op``, the operator asking, where given) if it has none. That is CPU's error for a dtype
    a kernel lacks; a ``TypeError`` would not do: torch's reflected operators (``1j * t``)
    turn it into "unsupported operand type(s)"."""
    try:
        return TORCH_TO_NUMPY[dtype]
    except KeyError:
        raise NotImplementedError(
            ("" if op is None else f"{op}: ")
            + f"the {DEVICE} backend does not support dtype {dtype}: expected one of "
            f"{', '.join(str(d) for d in TORCH_TO_NUMPY)}"
        ) from None


def scalar_type_name(dtype: torch.dtype) -> str:
    """PyTorch's C++ name of a dtype (``Float``, ``Long``), as its error messages use."""
    return torch.empty((), dtype=dtype).type().removeprefix("torch.").removesuffix("Tensor")


def unsupported(op: str, dtype) -> NotImplementedError:
    """CPU's error for a dtype an operator has no kernel for (``"floor_vml_cpu" not
    implemented for 'Bool'``), naming the operator and the backend; ``dtype`` a NumPy one."""
    name = scalar_type_name(NUMPY_TO_TORCH[np.dtype(dtype)])
    return NotImplementedError(f"\"{op}\" not implemented for '{name}' by the {DEVICE} backend")


def kind(x):
    """What type promotion needs to know of an operand: its dtype, and whether it is a scalar."""
    if isinstance(x, np.ndarray | np.generic):
        return (NUMPY_TO_TORCH[x.dtype], x.ndim == 0)
    return (type(x), True)


def result_type(*kinds) -> np.dtype:
    """The NumPy dtype of ``torch.result_type`` for operands described by :func:`kind`."""
    # An integer tensor and a Python float give the default dtype, which may change.
    return _result_type(torch.get_default_dtype(), kinds)


@functools.cache
def _result_type(default_dtype: torch.dtype, kinds: tuple) -> np.dtype:
    def operand(k):
        t, scalar = k
        if isinstance(t, torch.dtype):
            return torch.empty(() if scalar else (1,), dtype=t)
        return t(1)

    operands = [operand(k) for k in kinds]
    if len(operands) != 2:
        # torch.result_type takes two operands; the same promotion for any number of them.
        from torch._prims_common import elementwise_dtypes, ELEMENTWISE_TYPE_PROMOTION_KIND

        _, dtype = elementwise_dtypes(
            *operands, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
        )
        return np.dtype(np_dtype(dtype))
    return np.dtype(np_dtype(torch.result_type(*operands)))


_ndarray = np.ndarray


def promoted(result, a, b):
    """``result`` in the dtype PyTorch gives for ``a`` and ``b`` (NumPy promotes differently)."""
    # Every binary kernel runs this, so the common case, two arrays of one dtype, comes first
    # and cheapest: exact types and identical (builtin, hence shared) dtype objects.
    if type(a) is _ndarray and type(b) is _ndarray and a.dtype is b.dtype:
        return result
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype:
        return result
    return np.asarray(result, dtype=result_type(kind(a), kind(b)))


# c10's names of the dtypes, as its overflow errors spell them.
_C10_NAMES = {
    np.dtype(np.uint8): "uint8_t", np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int", np.dtype(np.int64): "int64_t",
    np.dtype(np.float16): "c10::Half", np.dtype(ml_dtypes.bfloat16): "c10::BFloat16",
    np.dtype(np.float32): "float", np.dtype(np.float64): "double",
}


def checked_scalar(value, dtype: np.dtype):
    """A Python number (or a 0-d array's, as CPU reads a value tensor's ``item()``) as a 0-d
    array of ``dtype``, refused as c10's ``checked_convert`` refuses it (``fill_``,
    ``masked_fill``, ``index_fill``, ``full``, ``clamp``, ``scatter``): an integer or finite
    float out of the dtype's range, nan or inf for an integer dtype, a complex number with an
    imaginary part for a real dtype. Negative integers (not floats) wrap into unsigned dtypes
    (``-3`` is 253 in uint8) down to ``-max``, as there. A float is compared with the range's
    ends as doubles, as there (``2.0 ** 63`` fits int64, and converts to its minimum, as on
    the CPU), or, where c10 truncates a float to the dtype's maximum
    (``FLOAT_TO_INT_TRUNCATES_TO_MAX``), exactly, up to the maximum plus one (excluded)."""
    if isinstance(value, np.ndarray):
        value = value.item()
    if dtype.kind in "bc":
        return np.asarray(value).astype(dtype)
    if isinstance(value, complex):
        if value.imag != 0:
            name = "double" if dtype.itemsize == 2 else _C10_NAMES[dtype]
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        value = value.real
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        # Only integers wrap into unsigned dtypes: a float below 0 overflows (c10::overflows).
        wraps = dtype.kind == "u" and not isinstance(value, float)
        low, high = -int(info.max) if wraps else int(info.min), int(info.max)
        if not isinstance(value, float):
            fits = low <= value <= high
        elif versions.FLOAT_TO_INT_TRUNCATES_TO_MAX:
            fits = low <= value < high + 1  # Python compares a float and an int exactly
        else:
            fits = float(low) <= value <= float(high)
        if not (math.isfinite(value) and fits):
            raise RuntimeError(
                f"value cannot be converted to type {_C10_NAMES[dtype]} without overflow"
            )
        value = int(value)
        if value > info.max:
            value = int(info.min)
        return np.asarray(value % (1 << info.bits) if value < 0 and dtype.kind == "u" else value,
                          dtype)
    if math.isfinite(value) and abs(value) > float(ml_dtypes.finfo(dtype).max):
        raise RuntimeError(
            f"value cannot be converted to type {_C10_NAMES[dtype]} without overflow"
        )
    return np.asarray(value).astype(dtype)


# --- payload functions ------------------------------------------------------------------


_OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def check_no_internal_overlap(op: str, target) -> None:
    """As CPU's in-place kernels: writing to a tensor two of whose elements share memory (a
    broadcast view, stride 0) is an error; an empty tensor has no such elements."""
    if target.size and 0 in target.strides and any(
        st == 0 and n > 1 for st, n in zip(target.strides, target.shape, strict=True)
    ):
        raise RuntimeError(f"{op}: {_OVERLAP}")


def as_strided(payload, size, stride, storage_offset):
    arr = payload if type(payload) is _ndarray else np.asarray(payload)
    item = arr.itemsize
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        # A dense payload (nearly all are): the array constructor over its memory, which checks
        # the view's bounds itself, costs a tenth of stride_tricks.as_strided. Strides are never
        # negative, so element 0 is where the memory starts, in either order. An empty view
        # addresses no element, wherever its offset points.
        size = tuple(size)
        return np.ndarray(
            size,
            arr.dtype,
            buffer=arr if arr.flags.c_contiguous else arr.T,
            offset=storage_offset * item if 0 not in size else 0,
            strides=tuple(s * item for s in stride),
        )
    extent = storage_offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1
    flat = np.lib.stride_tricks.as_strided(arr, (max(extent, storage_offset),), (item,))
    return np.lib.stride_tricks.as_strided(
        flat[storage_offset:], tuple(size), tuple(s * item for s in stride)
    )


# torch and NumPy exchange bfloat16 (ml_dtypes') data as the int16 of the same bits.
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: The floating dtypes CPU computes in float32 (its opmath type) and rounds once.
LOW_FLOATS = (np.dtype(np.float16), _BFLOAT16)


def to_cpu(payload) -> torch.Tensor:
    arr = np.array(payload, order="C")
    if arr.dtype == _BFLOAT16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def from_cpu(tensor: torch.Tensor):
    np_dtype(tensor.dtype)
    tensor = tensor.resolve_conj().resolve_neg()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(_BFLOAT16).copy()
    return tensor.numpy().copy()


def host_view(payload) -> torch.Tensor | None:
    """A CPU tensor over a payload's own memory, where it has dense writeable memory
    (``torch_acc.distributed``'s ``host_view``: collectives then read and write it in place)."""
    if type(payload) is not _ndarray:
        return None
    if not (payload.flags.c_contiguous and payload.flags.writeable):
        return None
    if payload.dtype == _BFLOAT16:
        return torch.from_numpy(payload.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(payload)


def convertible(src, dtype):
    """``src``, values to convert to ``dtype``, in a dtype NumPy converts from as c10 does:
    bfloat16 to an integer dtype as float32 (c10 converts the float, as C does: 200 is -56 in
    int8, where ml_dtypes' own cast gives 0 out of the dtype's range)."""
    if getattr(src, "dtype", None) == _BFLOAT16 and np.dtype(dtype).kind in "iu":
        return np.asarray(src, np.float32)
    return src


def copy_into(dst, src):
    src = convertible(src, np.asarray(dst).dtype)
    if isinstance(dst, np.ndarray) and dst.flags.writeable:
        # A writeable payload with a zero stride is a view of an expanded tensor (a kernel's
        # read-only broadcast result is replaced below instead): CPU refuses to write to it.
        check_no_internal_overlap("copy_", dst)
        try:
            np.copyto(dst, src, casting="unsafe")
        except ValueError:
            raise _not_broadcastable(src, dst) from None
        return dst
    try:
        return np.array(np.broadcast_to(src, np.shape(dst)), dtype=np.asarray(dst).dtype)
    except ValueError:
        raise _not_broadcastable(src, dst) from None


def _not_broadcastable(src, dst) -> RuntimeError:
    return RuntimeError(
        f"copy_: the source of shape {list(np.shape(src))} does not broadcast to the "
        f"destination's shape {list(np.shape(dst))} ({DEVICE} backend)"
    )


# --- the layout of elementwise results ------------------------------------------------------


def _contiguous_strides(shape) -> tuple:
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _channels_last_strides(shape) -> tuple:
    n, c, h, w = (max(s, 1) for s in shape)
    return (h * w * c, 1, w * c, c)


def _is_channels_last(shape, strides) -> bool:
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def _is_dense(shape, strides) -> bool:
    if 0 in shape:
        return True
    step = 1
    for st, n in sorted((st, n) for st, n in zip(strides, shape, strict=True) if n != 1):
        if st != step:
            return False
        step *= n
    return True


def cpu_strides(shape: tuple, operands: list[tuple[tuple, tuple]]) -> tuple:
    """The strides (in elements) CPU's TensorIterator gives the result of shape ``shape`` of an
    elementwise operator on ``operands``, each ``(shape, strides in elements)`` (a Python
    scalar, a wrapped number, is ``((), ())``): its fast setups (all contiguous, all channels
    last, all of one dense layout) and else the order of dimensions its inputs' strides give
    (``TensorIteratorBase::reorder_dimensions``)."""
    nd = len(shape)
    if all(s == shape for s, _ in operands):
        contiguous = _contiguous_strides(shape)
        if all(all(n == 1 or a == b for n, a, b in zip(shape, st, contiguous, strict=True))
               for _, st in operands):
            return contiguous
        if nd == 4 and all(_is_channels_last(s, st) for s, st in operands):
            return _channels_last_strides(shape)
        if all(_is_dense(s, st) for s, st in operands) and len({st for _, st in operands}) == 1:
            return operands[0][1]
    broadcast = []
    for s, st in operands:
        pad = nd - len(s)
        broadcast.append([0 if i < pad or (s[i - pad] == 1 and shape[i] != 1) else st[i - pad]
                          for i in range(nd)])

    def should_swap(d0, d1):
        for st in broadcast:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(nd - 1, -1, -1))
    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    strides = [0] * nd
    step = 1
    for d in perm:
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def with_cpu_layout(r, operands, scalars: bool = True):
    """``r``, an elementwise operator's new result, laid out as CPU lays it out for these
    operands (NumPy's order "K" differs where strides tie or dimensions have size one).
    ``scalars``: Python numbers among ``operands`` are operands of CPU's TensorIterator
    (wrapped numbers), as in binary operators. ``r`` comes back unchanged when it is one of
    the operands (an in-place result)."""
    if type(r) is not _ndarray or r.ndim < 2:
        return r
    shape = r.shape
    if 1 not in shape:
        # The common case, cheaply: every array operand has the result's shape and strides
        # (so is dense, as the new result is): CPU keeps that layout too, wrapped numbers or
        # not (without dimensions of size one, no two strides of a dense layout tie).
        strides = r.strides
        for a in operands:
            if type(a) is _ndarray and (a.shape != shape or a.strides != strides):
                break
        else:
            return r
    described = []
    for a in operands:
        if isinstance(a, np.ndarray):
            if a is r:
                return r
            described.append((a.shape, tuple(st // a.itemsize for st in a.strides)))
        elif scalars and isinstance(a, int | float | complex):
            described.append(((), ()))
    strides = cpu_strides(shape, described)
    item = r.itemsize
    if r.size == 0 or all(st * item == got for st, got in zip(strides, r.strides, strict=True)):
        return r
    out = np.ndarray(
        shape, r.dtype, buffer=np.empty(r.size, r.dtype), strides=tuple(st * item for st in strides)
    )
    out[...] = r
    return out
