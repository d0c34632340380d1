"""Reductions, scans, sorting and matrix products of the ``npy`` backend.

Reductions follow PyTorch's dtype rules (``sum``/``prod`` of integers and bools give int64,
``mean`` of integers is an error, indices are int64), compute float16 and bfloat16 in float32
and cast back, and return C-contiguous arrays (0-d for a full reduction).
"""

import math

import numpy as np
import torch

from torch_acc import versions

from ._common import (
    DEVICE,
    kind,
    LOW_FLOATS,
    np_dtype,
    NUMPY_TO_TORCH,
    result_type,
    scalar_type_name,
    unsupported,
    with_cpu_layout,
)
from ._pointwise import _inplace
from ._shape import contiguous

_LOW = LOW_FLOATS
_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


# --- helpers ----------------------------------------------------------------------------


def _torch_dtype(a) -> torch.dtype:
    return NUMPY_TO_TORCH[np.asarray(a).dtype]


def _wrap(op: str, d: int, ndim: int) -> int:
    """``d`` as a non-negative axis of an array of ``ndim`` dims (0-d arrays take 0 and -1)."""
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(
            f"{op}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
            f"but got {d})"
        )
    return d % n


def _axes(op: str, a, dim, empty_is_all: bool = True):
    """The NumPy ``axis`` of a reduction over ``dim`` (None: all dims)."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = [dim]
    if not dim and empty_is_all:
        return None
    axes = [_wrap(op, d, a.ndim) for d in dim]
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{op}: dim {axes[0]} appears multiple times in the list of dims")
    if a.ndim == 0:
        return ()
    return tuple(axes)


def _axis(op: str, a, dim) -> int | None:
    """One axis of ``a`` (None for a 0-d array)."""
    d = _wrap(op, dim, a.ndim)
    return None if a.ndim == 0 else d


def _up(a):
    """``a`` in a dtype NumPy computes well: float16/bfloat16 as float32."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype in _LOW else a


def _wide(dtype: np.dtype) -> np.dtype:
    """The accumulation dtype of PyTorch's CPU scans: double for floats."""
    if dtype.kind == "f":
        return np.dtype(np.float64)
    if dtype.kind == "c":
        return np.dtype(np.complex128)
    return dtype


def _out(value, dtype) -> np.ndarray:
    """``value`` as a C-contiguous, writeable array of ``dtype`` (0-d stays 0-d): a copy
    where ``value`` is a read-only broadcast. Its strides are torch's contiguous ones, size-1
    dimensions' too, as CPU makes reduction results (``keepdim``) whatever the input's
    layout; NumPy's keep strides of the input there."""
    value = np.asarray(value).astype(dtype, copy=False)
    if value.flags.writeable and value.flags.c_contiguous and value.size and 1 not in value.shape:
        return value  # The common case, cheaply: no dimension whose stride could differ.
    return contiguous(value) if value.flags.writeable else value.copy(order="C")


def _int_to_long(a, dtype):
    """The result dtype of sum/prod/cumsum: ``dtype``, else int64 for integers and bools."""
    if dtype is not None:
        return np.dtype(np_dtype(dtype))
    if a.dtype.kind in "biu":
        return _INT64
    return a.dtype


def _nonempty(op: str, a, axis) -> None:
    axes = range(a.ndim) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    for d in axes:
        if a.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    if axis is None and a.size == 0:
        raise RuntimeError(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )


def _no_complex(op: str, a) -> None:
    if a.dtype.kind == "c":
        raise RuntimeError(f"{op}(): does not support complex input ({DEVICE} backend)")


# --- sums and means -----------------------------------------------------------------------


def _sum(self, dim=None, keepdim=False, *, dtype=None):
    axis = _axes("sum", self, dim)
    out = _int_to_long(self, dtype)
    with np.errstate(all="ignore"):
        acc = np.float32 if out in _LOW else out
        src = self
        if self.dtype.kind == "c" and out.kind != "c":
            # As CPU: the input is cast to the result's dtype first (nonzero for bool, the
            # real part otherwise).
            src = self != 0 if out.kind == "b" else self.real
        # The ufunc itself: np.sum's wrapper costs as much as summing a small array.
        value = np.add.reduce(_up(src), axis=axis, keepdims=keepdim, dtype=acc)
    return _out(value, out)


def _sum_default(self, *, dtype=None):
    return _sum(self, None, False, dtype=dtype)


def _nansum(self, dim=None, keepdim=False, *, dtype=None):
    axis = _axes("nansum", self, dim)
    _no_complex("nansum", self)
    out = _int_to_long(self, dtype)
    with np.errstate(all="ignore"):
        acc = np.float32 if out in _LOW else out
        value = np.nansum(_up(self), axis=axis, keepdims=keepdim, dtype=acc)
    return _out(value, out)


def _prod(self, dim=None, keepdim=False, *, dtype=None):
    axis = _axes("prod", self, dim)
    out = _int_to_long(self, dtype)
    with np.errstate(all="ignore"):
        if out in _LOW:
            value = _low_precision_product(self.astype(out), axis, keepdim)
        else:
            value = np.prod(self, axis=axis, keepdims=keepdim, dtype=out)
    return _out(value, out)


#: Longest reduction :func:`_low_precision_product` rounds at each step; a longer one is
#: computed in float32 and rounded once (a loop over its elements would be too slow).
_STEPWISE_PRODUCT_MAX = 4096


def _low_precision_product(a, axis, keepdim: bool):
    """The product of float16/bfloat16 ``a`` over ``axis`` as CPU computes it: in float, rounded
    to the dtype after each step (300 * 300 is inf in float16, whatever follows; NumPy's own
    reduction of float16 keeps a float accumulator)."""
    axes = tuple(range(a.ndim)) if axis is None else tuple(axis)
    axes = tuple(ax % max(a.ndim, 1) for ax in axes) if a.ndim else ()
    kept = [ax for ax in range(a.ndim) if ax not in axes]
    flat = np.transpose(a, kept + list(axes)).reshape(
        [a.shape[ax] for ax in kept] + [math.prod(a.shape[ax] for ax in axes)]
    )
    if flat.shape[-1] > _STEPWISE_PRODUCT_MAX:
        value = np.prod(flat.astype(np.float32), axis=-1)
    else:
        value = np.ones(flat.shape[:-1], a.dtype)
        for i in range(flat.shape[-1]):
            value = (value.astype(np.float32) * flat[..., i].astype(np.float32)).astype(a.dtype)
    if keepdim:
        value = np.reshape(value, [1 if ax in axes else n for ax, n in enumerate(a.shape)])
    return value


def _prod_default(self, *, dtype=None):
    return _prod(self, None, False, dtype=dtype)


def _prod_dim(self, dim, keepdim=False, *, dtype=None):
    return _prod(self, [dim], keepdim, dtype=dtype)


def _float_result(op: str, a, dtype):
    if dtype is not None:
        return np.dtype(np_dtype(dtype))
    if a.dtype.kind in "biu":
        raise RuntimeError(
            f"{op}(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {str(_torch_dtype(a)).removeprefix('torch.')}"
        )
    return a.dtype


def _mean(self, dim=None, keepdim=False, *, dtype=None):
    axis = _axes("mean", self, dim)
    out = _float_result("mean", self, dtype)
    with np.errstate(all="ignore"):
        acc = np.float32 if out in _LOW else out
        value = np.mean(_up(self).astype(acc, copy=False), axis=axis, keepdims=keepdim)
    return _out(value, out)


def _mean_default(self, *, dtype=None):
    return _mean(self, None, False, dtype=dtype)


def _real_of(dtype: np.dtype) -> np.dtype:
    return np.empty((), dtype).real.dtype if dtype.kind == "c" else dtype


def _var(self, dim=None, *, correction=None, keepdim=False):
    axis = _axes("var", self, dim)
    if self.dtype.kind in "biu":
        raise RuntimeError(
            "std and var only support floating point and complex dtypes "
            f"({DEVICE} backend, got {_torch_dtype(self)})"
        )
    ddof = 1 if correction is None else correction
    with np.errstate(all="ignore"):
        value = np.var(_up(self), axis=axis, ddof=ddof, keepdims=keepdim)
    return _out(value, _real_of(self.dtype))


def _std(self, dim=None, *, correction=None, keepdim=False):
    var = _var(self, dim, correction=correction, keepdim=keepdim)
    with np.errstate(all="ignore"):
        return _out(np.sqrt(_up(var)), var.dtype)


def _welford_mean(self, dim, keepdim):
    """The mean of ``var_mean`` and ``std_mean``, which CPU computes by Welford's update
    ``mean += (x - mean) / n`` (part by part for complex numbers): after an infinite element,
    every further element makes it nan. So it is infinite only where the one infinite element
    is the last of its reduction (the last along every reduced dimension, in any layout)."""
    if self.dtype.kind == "c":
        real, imag = _welford_mean(self.real, dim, keepdim), _welford_mean(self.imag, dim, keepdim)
        mean = np.empty(real.shape, self.dtype)
        mean.real, mean.imag = real, imag
        return mean
    mean = _mean(self, dim, keepdim)
    infinite = np.isinf(mean)
    if not infinite.any():
        return mean
    axis = _axes("var_mean", self, dim)
    reduced = range(self.ndim) if axis is None else axis
    last = self[tuple(slice(-1, None) if d in reduced else slice(None) for d in range(self.ndim))]
    alone = (np.isinf(self).sum(axis=axis, keepdims=True) == 1) & np.isinf(last)
    mean[infinite & ~alone.reshape(mean.shape)] = np.nan
    return mean


def _var_mean(self, dim=None, *, correction=None, keepdim=False):
    mean = _welford_mean(self, dim, keepdim)
    return _var(self, dim, correction=correction, keepdim=keepdim), mean


def _std_mean(self, dim=None, *, correction=None, keepdim=False):
    mean = _welford_mean(self, dim, keepdim)
    return _std(self, dim, correction=correction, keepdim=keepdim), mean


def _logsumexp(self, dim, keepdim=False):
    axis = _axes("logsumexp", self, dim)
    dtype = self.dtype
    if dtype.kind in "biu":
        dtype = np.dtype(np_dtype(torch.get_default_dtype()))
    a = _up(self).astype(np.float32 if dtype in _LOW else dtype, copy=False)
    with np.errstate(all="ignore"):
        if a.size == 0:
            value = np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdim))
        else:
            m = np.max(a.real if a.dtype.kind == "c" else a, axis=axis, keepdims=True)
            m = np.where(np.isinf(m), 0, m)
            value = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
            if not keepdim:
                value = np.squeeze(value, axis=axis)
    return _out(value, dtype)


def _count_nonzero(self, dim=None):
    axis = _axes("count_nonzero", self, dim)
    return _out(np.count_nonzero(self, axis=axis), _INT64)


def _count_nonzero_one(self, dim=None):
    return _count_nonzero(self, None if dim is None else [dim])


def _vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    axis = _axes("linalg.vector_norm", self, dim)
    if self.dtype.kind in "biu":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {str(_torch_dtype(self)).removeprefix('torch.')}"
        )
    a = self if dtype is None else self.astype(np_dtype(dtype))
    out = _real_of(a.dtype)
    x = np.abs(_up(a))
    ord = float(ord)
    with np.errstate(all="ignore"):
        if ord == np.inf or ord == -np.inf:
            if x.size == 0 or (axis is not None and any(x.shape[d] == 0 for d in axis)):
                raise IndexError(
                    f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor "
                    "because the operation does not have an identity"
                )
            f = np.max if ord > 0 else np.min
            value = f(x, axis=axis, keepdims=keepdim)
        elif ord == 0:
            value = np.sum(x != 0, axis=axis, keepdims=keepdim, dtype=x.dtype)
        elif ord == 1:
            value = np.sum(x, axis=axis, keepdims=keepdim)
        elif ord == 2:
            value = np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim))
        else:
            value = np.sum(x**ord, axis=axis, keepdims=keepdim) ** (1.0 / ord)
    return _out(value, out)


# --- max, min and friends -------------------------------------------------------------------


def _extreme(op: str, f):
    """``amax``/``amin``: as CPU, an empty result needs no kernel, complex or not."""

    def kernel(self, dim=(), keepdim=False):
        axis = _axes(op, self, dim)
        _nonempty(op, self, axis)
        if self.dtype.kind == "c" and self.size:
            raise unsupported(op, self.dtype)
        with np.errstate(all="ignore"):
            return _out(f(self, axis=axis, keepdims=keepdim), self.dtype)

    return kernel


def _full_extreme(op: str, f):
    def kernel(self):
        _nonempty(op, self, None)
        if self.dtype.kind == "c":
            raise unsupported(op, self.dtype)
        with np.errstate(all="ignore"):
            return _out(f(self), self.dtype)

    return kernel


def _arg(op: str, f):
    def kernel(self, dim=None, keepdim=False):
        if not (versions.EMPTY_RESULTS_SKIP_DTYPE_CHECKS and _arg_kernel_skipped(self, dim)):
            _no_complex(op, self)
            if self.dtype == np.bool_:
                raise RuntimeError(f"{op}(): does not support bool input")
        a = _up(self)
        if dim is None:
            if a.size == 0:
                raise RuntimeError(
                    f"{op}(): Expected reduction dim to be specified for input.numel() == 0."
                )
            value = f(a.reshape(-1))
            return _out(np.reshape(value, (1,) * self.ndim) if keepdim else value, _INT64)
        axis = _axis(op, a, dim)
        if axis is None:
            return _out(np.zeros((1,) * 0), _INT64)
        _nonempty(op, a, axis)
        return _out(f(a, axis=axis, keepdims=keepdim), _INT64)

    return kernel


def _arg_kernel_skipped(a, dim) -> bool:
    """Whether torch 2.6's CPU answers argmax/argmin over ``dim`` of ``a`` without its kernel
    (so without its dtype checks): a reduced dimension of size 1 (zeros), or a result without
    elements, the reduced dimension not being the empty one (which is an error)."""
    if dim is None or a.ndim == 0:
        return False
    axis = dim % a.ndim
    return a.shape[axis] == 1 or (
        a.shape[axis] != 0 and any(n == 0 for i, n in enumerate(a.shape) if i != axis)
    )


def _with_indices(op: str, f):
    """``max.dim``/``min.dim``: values and the (first) index of each."""

    def kernel(self, dim, keepdim=False):
        _no_complex(op, self)
        axis = _axis(op, self, dim)
        if axis is None:
            return _out(self.copy(), self.dtype), np.zeros((), _INT64)
        _nonempty(op, self, axis)
        idx = f(_up(self), axis=axis, keepdims=True)
        values = np.take_along_axis(self, idx, axis)
        if not keepdim:
            idx, values = np.squeeze(idx, axis), np.squeeze(values, axis)
        return _out(values, self.dtype), _out(idx, _INT64)

    return kernel


def _aminmax(self, *, dim=None, keepdim=False):
    axis = None if dim is None else _axes("aminmax", self, [dim])
    _no_complex("aminmax", self)
    _nonempty("aminmax", self, axis)
    with np.errstate(all="ignore"):
        lo = np.min(self, axis=axis, keepdims=keepdim)
        hi = np.max(self, axis=axis, keepdims=keepdim)
    return _out(lo, self.dtype), _out(hi, self.dtype)


def _logical(op: str, f):
    def kernel(self, dim=None, keepdim=False):
        axis = _axes(op, self, dim)
        out = np.uint8 if self.dtype == np.uint8 else _BOOL
        return _out(f(self, axis=axis, keepdims=keepdim), out)

    return kernel


def _logical_dim(kernel):
    return lambda self, dim, keepdim=False: kernel(self, [dim], keepdim)


def _logical_default(kernel):
    return lambda self: kernel(self, None, False)


# --- scans ------------------------------------------------------------------------------


def _scan(op: str, f):
    def kernel(self, dim, *, dtype=None):
        axis = _axis(op, self, dim)
        out = _int_to_long(self, dtype)
        a = self.astype(np.float32 if out in _LOW else out, copy=False)
        if axis is None:
            return _out(a.copy(), out)
        with np.errstate(all="ignore"):
            # PyTorch's CPU scans accumulate in its accumulation type: float and double in
            # double, float16 and bfloat16 in float.
            acc = np.dtype(np.float32) if out in _LOW else _wide(a.dtype)
            return _out(f(a, axis=axis, dtype=acc), out)

    return kernel


def _cum_extreme(op: str, ufunc):
    def kernel(self, dim):
        _no_complex(op, self)
        axis = _axis(op, self, dim)
        if axis is None:
            return _out(self.copy(), self.dtype), np.zeros((), _INT64)
        if self.size == 0:
            return _out(self.copy(), self.dtype), np.zeros(self.shape, _INT64)
        a = _up(self)
        values = ufunc.accumulate(a, axis=axis)
        if a.dtype.kind in "fc":
            hit = (a == values) | (np.isnan(a) & np.isnan(values))
        else:
            hit = a == values
        shape = [1] * a.ndim
        shape[axis] = a.shape[axis]
        positions = np.arange(a.shape[axis], dtype=_INT64).reshape(shape)
        idx = np.maximum.accumulate(np.where(hit, positions, -1), axis=axis)
        return _out(values, self.dtype), _out(idx, _INT64)

    return kernel


def _complex_logcumsumexp(a):
    """logcumsumexp along the first axis of a complex array, without overflow."""
    # CPU's _log_add_exp_helper: a nan anywhere (real or imaginary) gives nan+nanj; two
    # infinite reals of one sign give the smaller operand (-inf) or log(exp + exp) (+inf).
    # The scan starts from -inf+0j and adds each element x as helper(x, sum).
    out = np.empty_like(a)
    acc = np.full(a.shape[1:], complex(-np.inf, 0), a.dtype)
    nan = np.asarray(complex(np.nan, np.nan), a.dtype)
    for i in range(a.shape[0]):
        x = a[i]
        first = x.real < acc.real
        lo, hi = np.where(first, x, acc), np.where(first, acc, x)
        same_inf = ~np.isfinite(lo.real) & (lo.real == hi.real)
        acc = np.where(
            np.isnan(acc) | np.isnan(x),
            nan,
            np.where(
                same_inf,
                np.where(lo.real < 0, lo, np.log(np.exp(lo) + np.exp(hi))),
                np.log1p(np.exp(lo - hi)) + hi,
            ),
        )
        out[i] = acc
    return out


def _logcumsumexp(self, dim):
    axis = _axis("logcumsumexp", self, dim)
    a = _up(self)
    if axis is None or a.size == 0:
        return _out(a.copy(), self.dtype)
    with np.errstate(all="ignore"):
        if a.dtype.kind == "c":
            value = _complex_logcumsumexp(np.moveaxis(a, axis, 0))
            value = np.moveaxis(value, 0, axis)
        else:
            # PyTorch's CPU scans accumulate floats in double.
            value = np.logaddexp.accumulate(a.astype(np.float64), axis=axis)
    return _out(value, self.dtype)


# --- sorting and selection ------------------------------------------------------------------


def _sortable(op: str, a):
    if a.dtype.kind == "c":
        raise RuntimeError(f"{op}(): does not support complex input ({DEVICE} backend)")
    return _up(a)


def _argsort(a, axis: int, descending: bool):
    """Stable sort indices; NaN is the largest value (first when descending)."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    flipped = np.flip(a, axis)
    idx = np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis)
    return (n - 1) - idx


def _sort(self, dim=-1, descending=False, *, stable=None):
    a = _sortable("sort", self)
    axis = _axis("sort", self, dim)
    if axis is None:
        return _out(self.copy(), self.dtype), np.zeros((), _INT64)
    idx = _argsort(a, axis, descending)
    return _out(np.take_along_axis(self, idx, axis), self.dtype), _out(idx, _INT64)


def _sort_stable(self, *, stable=None, dim=-1, descending=False):
    return _sort(self, dim, descending)


def _topk(self, k, dim=-1, largest=True, sorted=True):
    a = _sortable("topk", self)
    axis = _axis("topk", self, dim)
    n = 1 if axis is None else a.shape[axis]
    if not 0 <= k <= n:
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, dim size {n})")
    if axis is None:
        return _out(self.copy(), self.dtype), np.zeros((), _INT64)
    idx = np.take(_argsort(a, axis, largest), np.arange(k), axis=axis)
    return _out(np.take_along_axis(self, idx, axis), self.dtype), _out(idx, _INT64)


def _select_sorted(op: str, self, dim, keepdim, pick):
    """Values and indices of the element at sorted position ``pick(sorted_row)`` per row."""
    a = _sortable(op, self)
    axis = _axis(op, self, dim)
    if axis is None:
        return _out(self.copy(), self.dtype), np.zeros((), _INT64)
    _nonempty(op, self, axis)
    idx = np.argsort(a, axis=axis, kind="stable")
    sorted_a = np.take_along_axis(a, idx, axis)
    pos = pick(sorted_a, axis)
    chosen = np.take_along_axis(idx, pos, axis)
    values = np.take_along_axis(self, chosen, axis)
    if not keepdim:
        chosen, values = np.squeeze(chosen, axis), np.squeeze(values, axis)
    return _out(values, self.dtype), _out(chosen, _INT64)


def _kthvalue(self, k, dim=-1, keepdim=False):
    axis = _axis("kthvalue", self, dim)
    n = 1 if axis is None else self.shape[axis]
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {dim}")

    def pick(s, axis):
        shape = list(s.shape)
        shape[axis] = 1
        return np.full(shape, k - 1, _INT64)

    return _select_sorted("kthvalue", self, dim, keepdim, pick)


def _median_pos(ignore_nan: bool):
    def pick(s, axis):
        n = s.shape[axis]
        if s.dtype.kind == "f":
            valid = np.sum(~np.isnan(s), axis=axis, keepdims=True)
            if ignore_nan:
                return np.trunc((valid - 1) / 2).astype(_INT64)
            # A NaN is the median: its index is the first NaN's (sorted after the numbers).
            return np.where(valid < n, valid, (n - 1) // 2).astype(_INT64)
        shape = list(s.shape)
        shape[axis] = 1
        return np.full(shape, (n - 1) // 2, _INT64)

    return pick


def _median_dim(op: str, ignore_nan: bool):
    def kernel(self, dim, keepdim=False):
        return _select_sorted(op, self, dim, keepdim, _median_pos(ignore_nan))

    return kernel


def _median_all(op: str, ignore_nan: bool):
    def kernel(self):
        if self.size == 0:
            return _out(np.array(np.nan), self.dtype)
        values, _ = _select_sorted(op, self.reshape(-1), 0, False, _median_pos(ignore_nan))
        return values

    return kernel


def _mode(self, dim=-1, keepdim=False):
    _sortable("mode", self)
    axis = _axis("mode", self, dim)
    if axis is None:
        return _out(self.copy(), self.dtype), np.zeros((), _INT64)
    a = np.moveaxis(self, axis, -1)
    rows = a.reshape(-1, a.shape[-1])
    if a.shape[-1] == 0:
        raise IndexError(f"mode(): Expected reduction dim {axis} to have non-zero size.")
    values = np.empty(rows.shape[0], self.dtype)
    indices = np.empty(rows.shape[0], _INT64)
    for i, row in enumerate(rows):
        up = _up(row)
        order = np.argsort(up, kind="stable")
        s = up[order]
        same = s[1:] == s[:-1]
        if s.dtype.kind == "f":
            same |= np.isnan(s[1:]) & np.isnan(s[:-1])
        starts = np.flatnonzero(np.concatenate(([True], ~same)))
        counts = np.diff(np.append(starts, len(s)))
        best = int(np.argmax(counts))  # the smallest of the most frequent values
        last = starts[best] + counts[best] - 1
        values[i] = row[order[last]]
        indices[i] = order[last]
    shape = a.shape[:-1]
    values, indices = values.reshape(shape), indices.reshape(shape)
    if keepdim:
        values, indices = np.expand_dims(values, axis), np.expand_dims(indices, axis)
    return _out(values, self.dtype), _out(indices, _INT64)


# --- matrix products ----------------------------------------------------------------------


def _check_mm(op: str, a, b) -> np.dtype:
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"{op}: expected m1 and m2 to have the same dtype, but got: "
            f"{_torch_dtype(a)} != {_torch_dtype(b)}"
        )
    if a.dtype == _BOOL:
        raise RuntimeError(f"{op}: not implemented for 'Bool' ({DEVICE} backend)")
    return a.dtype


def _matmul(a, b):
    if a.dtype in _LOW:
        return np.matmul(a.astype(np.float32), b.astype(np.float32))
    return np.matmul(a, b)


def _mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})"
        )
    if a.dtype is _F32 and b.dtype is _F32:
        return np.matmul(a, b)
    dtype = _check_mm("mm", a, b)
    return _out(_matmul(a, b), dtype)


_F32 = np.dtype(np.float32)


def _bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(
            f"bmm: expected sizes [{a.shape[0]}, *, {a.shape[2]}] of the second batch, "
            f"got {list(b.shape)}"
        )
    shape = (a.shape[0], a.shape[1], b.shape[2])
    if 0 in shape or a.shape[2] == 0:
        # CPU makes the result in batch2's dtype, and runs no kernel for an empty result or
        # an empty sum (zeros): mixed dtypes or bool go unchecked there.
        return np.zeros(shape, b.dtype)
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"expected scalar type {scalar_type_name(_torch_dtype(a))} but found "
            f"{scalar_type_name(_torch_dtype(b))}"
        )
    if a.dtype == _BOOL:
        raise unsupported("bmm", a.dtype)
    return _out(_matmul(a, b), a.dtype)


def _check_input(op: str, self, shape) -> None:
    """CPU's check that ``self`` expands to the product's ``shape``."""
    try:
        fits = np.broadcast_shapes(np.shape(self), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(
            f"{op}: the input of shape {list(np.shape(self))} does not broadcast to the "
            f"product's shape {list(shape)}"
        )


def _scaled_add(op: str, self, product, beta, alpha, dtype):
    """``beta * self + alpha * product`` (``self`` is ignored, NaN and all, when beta is 0)."""
    _check_input(op, self, product.shape)
    if np.dtype(dtype).kind in "iu":
        # PyTorch converts the scalars to the integer type (0.2 becomes 0).
        alpha, beta = int(alpha), int(beta)
    with np.errstate(all="ignore"):
        prod = product if alpha == 1 else product * alpha
        if beta == 0:
            value = np.broadcast_to(prod, np.broadcast_shapes(np.shape(self), prod.shape))
        else:
            base = _up(np.asarray(self))
            value = prod + (base if beta == 1 else base * beta)
    return _out(value, dtype)


def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"addmm: mat1 and mat2 shapes cannot be multiplied ({list(mat1.shape)} and "
            f"{list(mat2.shape)})"
        )
    if (
        beta == 1
        and alpha == 1
        and mat1.dtype is _F32
        and mat2.dtype is _F32
        and type(self) is np.ndarray
        and self.dtype is _F32
        and self.ndim <= 2
    ):
        # The fast path of nn.Linear: one product, the bias added in place.
        out = np.matmul(mat1, mat2)
        try:
            np.add(out, self, out=out)
        except ValueError:
            raise RuntimeError(
                f"addmm: the input of shape {list(self.shape)} does not broadcast to "
                f"{list(out.shape)}"
            ) from None
        return out
    dtype = _check_mm("addmm", mat1, mat2)
    return _scaled_add("addmm", self, _matmul(mat1, mat2), beta, alpha, dtype)


def _baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(
            f"baddbmm: expected 3-D batch1 and batch2, but got {batch1.ndim}-D and "
            f"{batch2.ndim}-D"
        )
    dtype = _check_mm("baddbmm", batch1, batch2)
    return _scaled_add("baddbmm", self, _matmul(batch1, batch2), beta, alpha, dtype)


def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    dtype = _check_mm("addbmm", batch1, batch2)
    product = np.sum(_matmul(batch1, batch2), axis=0)
    return _scaled_add("addbmm", self, product, beta, alpha, dtype)


def _addmv(self, mat, vec, *, beta=1, alpha=1):
    dtype = _check_mm("addmv", mat, vec)
    return _scaled_add("addmv", self, _matmul(mat, vec), beta, alpha, dtype)


def _check_vectors(vec1, vec2) -> None:
    for name, vec in (("vec1", vec1), ("vec2", vec2)):
        if vec.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {vec.ndim}-D")


def _addr(self, vec1, vec2, *, beta=1, alpha=1):
    """CPU's ``addr``: ``self`` broadcast to the product's shape, the result laid out as its
    TensorIterator lays it out for ``self`` and the vectors as a column and a row."""
    _check_vectors(vec1, vec2)
    dtype = result_type(kind(vec1), kind(vec2))
    if dtype == _BOOL:
        prod = np.logical_and.outer(vec1, vec2)
        _check_input("addr", self, prod.shape)
        if beta == 0:
            value = np.broadcast_to(prod, prod.shape) & bool(alpha)
        else:
            value = (np.asarray(self) & bool(beta)) | (prod & bool(alpha))
        value = _out(value, _BOOL)
    else:
        value = _scaled_add("addr", self, np.outer(_up(vec1), _up(vec2)), beta, alpha, dtype)
    return with_cpu_layout(value, (self, vec1[:, None], vec2))


def _addr_(self, vec1, vec2, *, beta=1, alpha=1):
    """CPU's ``addr_``: ``self`` has the product's shape itself (it is not broadcast)."""
    _check_vectors(vec1, vec2)
    if self.ndim != 2:
        raise RuntimeError(f"addr_: 2D tensor expected, got {self.ndim}D tensor for input")
    if self.shape != (vec1.shape[0], vec2.shape[0]):
        raise RuntimeError(
            f"addr_: size mismatch, input: {list(self.shape)}, v1: {list(vec1.shape)}, "
            f"v2: {list(vec2.shape)}"
        )
    return _addr_in_place(self, vec1, vec2, beta=beta, alpha=alpha)


_addr_in_place = _inplace(_addr, "addr_")


def _dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape != b.shape:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
            f"[{b.shape[0]}] to have the same number of elements, but got {a.shape[0]} "
            f"and {b.shape[0]} elements respectively"
        )
    dtype = _check_mm("dot", a, b)
    return _out(np.dot(_up(a), _up(b)), dtype)


def _vdot(a, b):
    return _dot(np.conj(a), b)


def _mv(a, b):
    if a.ndim != 2 or b.ndim != 1 or a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({a.shape[0] if a.ndim else 0}), mat "
            f"({'x'.join(map(str, a.shape))}), vec ({'x'.join(map(str, b.shape))})"
        )
    if versions.EMPTY_RESULTS_SKIP_DTYPE_CHECKS and 0 in a.shape:
        return np.zeros(a.shape[0], b.dtype)
    dtype = _check_mm("mv", a, b)
    return _out(_matmul(a, b), dtype)


def _trace(self):
    if self.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
    return _out(np.trace(_up(self)), _int_to_long(self, None))


def _cdist_forward(x1, x2, p, compute_mode=None):
    if x1.dtype.kind not in "f" or x2.dtype.kind not in "f":
        raise RuntimeError(
            f"cdist only supports floating-point dtypes, X1 got: {_torch_dtype(x1)} "
            f"({DEVICE} backend)"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
            f"X2: {x2.shape[-1]}"
        )
    dtype = x1.dtype
    a, b = _up(x1), _up(x2)
    P, R = a.shape[-2], b.shape[-2]
    use_mm = p == 2 and (compute_mode == 1 or (not compute_mode and (P > 25 or R > 25)))
    with np.errstate(all="ignore"):
        if use_mm:
            # As PyTorch's _euclidean_dist: one matrix product of padded operands.
            an = np.sum(a * a, axis=-1, keepdims=True)
            bn = np.sum(b * b, axis=-1, keepdims=True)
            a_ = np.concatenate([-2 * a, an, np.ones_like(an)], axis=-1)
            b_ = np.concatenate([b, np.ones_like(bn), bn], axis=-1)
            value = np.sqrt(np.maximum(a_ @ np.swapaxes(b_, -1, -2), 0))
        else:
            diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
            if p == 0:
                value = np.sum(diff != 0, axis=-1).astype(a.dtype)
            elif p == np.inf:
                value = np.max(diff, axis=-1, initial=0)
            elif p == 1:
                value = np.sum(diff, axis=-1)
            elif p == 2:
                value = np.sqrt(np.sum(diff * diff, axis=-1))
            else:
                value = np.sum(diff**p, axis=-1) ** (1.0 / p)
    return _out(value, dtype)


def _p_norm(diff, p):
    """The p-norm of the last axis (p=0: the count of non-zeros), as cdist/pdist."""
    d = np.abs(diff)
    if p == 0:
        return np.sum(d != 0, axis=-1).astype(d.dtype)
    if p == np.inf:
        return np.max(d, axis=-1, initial=0)
    if p == 1:
        return np.sum(d, axis=-1)
    if p == 2:
        return np.sqrt(np.sum(d * d, axis=-1))
    return np.sum(d**p, axis=-1) ** (1.0 / p)


def _p_norm_grad(diff, dist, p):
    """d dist / d diff for each pair (zero where the distance is zero)."""
    d = dist[..., None]
    if p == 0:
        return np.zeros_like(diff)
    if p == 1:
        return np.sign(diff)
    if p == 2:
        return np.where(d == 0, 0, diff / d)
    if p == np.inf:
        return np.sign(diff) * (np.abs(diff) == d)
    term = np.where(d == 0, 0, diff * np.abs(diff) ** (p - 2) / d ** (p - 1))
    return np.where(diff == 0, 0, term) if p < 1 else term


def _pdist_forward(self, p=2):
    if self.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {self.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    a = _up(self)
    i, j = np.triu_indices(a.shape[0], 1)
    with np.errstate(all="ignore"):
        value = _p_norm(a[i] - a[j], p)
    return _out(value, self.dtype)


def _pdist_backward(grad, self, p, pdist):
    a, g, dist = _up(self), _up(grad), _up(pdist)
    i, j = np.triu_indices(a.shape[0], 1)
    with np.errstate(all="ignore"):
        term = g[:, None] * _p_norm_grad(a[i] - a[j], dist, p)
    out = np.zeros_like(a)
    np.add.at(out, i, term)
    np.subtract.at(out, j, term)
    return _out(out, self.dtype)


def _cdist_backward(grad, x1, x2, p, cdist):
    a, b, g, dist = _up(x1), _up(x2), _up(grad), _up(cdist)
    diff = a[..., :, None, :] - b[..., None, :, :]
    d = dist[..., None]
    with np.errstate(all="ignore"):
        if p == 0:
            term = np.zeros_like(diff)
        elif p == 1:
            term = np.sign(diff)
        elif p == 2:
            term = np.where(d == 0, 0, diff / d)
        elif p == np.inf:
            term = np.sign(diff) * (np.abs(diff) == d)
        else:
            term = diff * np.abs(diff) ** (p - 2) / d ** (p - 1)
            term = np.where(d == 0, 0, term)
            if p < 1:
                term = np.where(diff == 0, 0, term)
    value = np.sum(g[..., None] * term, axis=-2)
    extra = value.ndim - x1.ndim
    if extra > 0:
        value = np.sum(value, axis=tuple(range(extra)))
    keep = tuple(i for i, n in enumerate(x1.shape) if n == 1 and value.shape[i] != 1)
    if keep:
        value = np.sum(value, axis=keep, keepdims=True)
    return _out(value, x1.dtype)


def _equal(self, other):
    """``torch.equal``: same shape and the same values (a Python bool)."""
    return bool(self.shape == other.shape and np.array_equal(self, other))


KERNELS = {
    "sum": _sum_default,
    "sum.dim_IntList": _sum,
    "nansum": _nansum,
    "prod": _prod_default,
    "prod.dim_int": _prod_dim,
    "mean": _mean_default,
    "mean.dim": _mean,
    "var.correction": _var,
    "std.correction": _std,
    "var_mean.correction": _var_mean,
    "std_mean.correction": _std_mean,
    "logsumexp": _logsumexp,
    "count_nonzero.dim_IntList": _count_nonzero,
    "count_nonzero": _count_nonzero_one,
    "linalg_vector_norm": _vector_norm,
    "amax": _extreme("amax", np.max),
    "amin": _extreme("amin", np.min),
    "max": _full_extreme("max", np.max),
    "min": _full_extreme("min", np.min),
    "max.dim": _with_indices("max", np.argmax),
    "min.dim": _with_indices("min", np.argmin),
    "argmax": _arg("argmax", np.argmax),
    "argmin": _arg("argmin", np.argmin),
    "aminmax": _aminmax,
    "cumsum": _scan("cumsum", np.cumsum),
    "cumprod": _scan("cumprod", np.cumprod),
    "cummax": _cum_extreme("cummax", np.maximum),
    "cummin": _cum_extreme("cummin", np.minimum),
    "_logcumsumexp": _logcumsumexp,
    "sort": _sort,
    "sort.stable": _sort_stable,
    "topk": _topk,
    "kthvalue": _kthvalue,
    "median": _median_all("median", False),
    "median.dim": _median_dim("median", False),
    "nanmedian": _median_all("nanmedian", True),
    "nanmedian.dim": _median_dim("nanmedian", True),
    "mode": _mode,
    "mm": _mm,
    "bmm": _bmm,
    "addmm": _addmm,
    "baddbmm": _baddbmm,
    "addbmm": _addbmm,
    "addmv": _addmv,
    "addr": _addr,
    "addr_": _addr_,
    "dot": _dot,
    "vdot": _vdot,
    "mv": _mv,
    "trace": _trace,
    "_cdist_forward": _cdist_forward,
    "_cdist_backward": _cdist_backward,
    "_pdist_forward": _pdist_forward,
    "_pdist_backward": _pdist_backward,
    "equal": _equal,
}

_any = _logical("any", np.any)
_all = _logical("all", np.all)
KERNELS.update(
    {
        "any.dims": _any,
        "any.dim": _logical_dim(_any),
        "any": _logical_default(_any),
        "all.dims": _all,
        "all.dim": _logical_dim(_all),
        "all": _logical_default(_all),
    }
)
