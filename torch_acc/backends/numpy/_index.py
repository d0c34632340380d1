"""Indexing kernels of the ``npy`` backend: advanced indexing, gather/scatter, masks, search.

Index arguments arrive as int64 (or bool) arrays; out-of-range indices raise the error the CPU
kernel raises (``IndexError`` for indexing, ``RuntimeError`` for gather/scatter), never wrap.
Accumulating writes (``index_put_(accumulate=True)``, ``scatter_add``, ``index_add``...) use
NumPy's unbuffered ``ufunc.at``, so repeated indices accumulate as on CPU.
"""

import warnings

import ml_dtypes
import numpy as np
import torch

from ._common import (
    checked_scalar,
    DEVICE,
    LOW_FLOATS,
    NUMPY_TO_TORCH,
    result_type,
    scalar_type_name,
    with_cpu_layout,
)
from ._shape import contiguous as _c

_BF16 = np.dtype(ml_dtypes.bfloat16)
_LOW = LOW_FLOATS
_EMPTY_INT64 = np.empty((0,), np.int64)


def _work(x):
    """``x`` as an array NumPy's ufuncs compute on (bfloat16 goes through float32)."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == _BF16 else x


def _dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def _check_bounds(index, size: int, dim: int, error=RuntimeError, negative=False):
    if index.size == 0:
        return
    low, high = int(index.min()), int(index.max())
    if high >= size or low < (-size if negative else 0):
        bad = high if high >= size else low
        if error is IndexError and not negative:
            raise IndexError("index out of range in self")
        raise error(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _index_dtype(index, op: str):
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, but got {index.dtype}")



# --- advanced indexing ------------------------------------------------------------------


def _key(self, indices, *, expand_masks=False):
    """The NumPy index of aten's ``Tensor?[] indices`` (None is a full slice)."""
    key, dim = [], 0
    for i, index in enumerate(indices):
        if index is None:
            key.append(slice(None))
            dim += 1
            continue
        index = np.asarray(index)
        if index.dtype in (np.bool_, np.uint8):
            index = index.astype(np.bool_, copy=False)
            shape = self.shape[dim:dim + index.ndim]
            if shape != index.shape[: len(shape)] or len(shape) < index.ndim:
                raise IndexError(
                    f"The shape of the mask {list(index.shape)} at index {i} does not match "
                    f"the shape of the indexed tensor {list(self.shape)} at index {dim}"
                )
            if expand_masks:
                key.extend(np.nonzero(index))
            else:
                key.append(index)
            dim += index.ndim
            continue
        if index.dtype.kind not in "iu":
            raise IndexError(
                "tensors used as indices must be long, int, byte or bool tensors"
            )
        if dim >= self.ndim:
            raise IndexError(
                f"too many indices for tensor of dimension {self.ndim} (got {len(indices)})"
            )
        _check_bounds(index, self.shape[dim], dim, IndexError, negative=True)
        key.append(index)
        dim += 1
    if dim > self.ndim:
        raise IndexError(
            f"too many indices for tensor of dimension {self.ndim} (got {len(indices)})"
        )
    return tuple(key)


def _index(self, indices):
    try:
        return _c(self[_key(self, indices)])
    except IndexError as e:
        raise IndexError(str(e).replace(" axis ", " dimension ")) from None


def _check_values_dtype(self, values, op: str):
    if isinstance(values, np.ndarray | np.generic) and values.dtype != self.dtype:
        raise RuntimeError(
            f"{op}: Index put requires the source and destination dtypes match, got "
            f"{NUMPY_TO_TORCH[self.dtype]} for the destination and "
            f"{NUMPY_TO_TORCH[values.dtype]} for the source."
        )


def _put_at(out, key, values, accumulate):
    """``out[key] = values`` (or ``+=`` with repeats accumulating) in place; returns ``out``."""
    if not accumulate:
        out[key] = values
        return out
    # In the tensor's own dtype, each addition rounded, as the CPU kernel adds.
    np.add.at(out, key, np.asarray(values, out.dtype))
    return out


def _index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    _check_values_dtype(self, values, "index_put_")
    try:
        key = _key(self, indices, expand_masks=accumulate)
        return _put_at(self, key, values, accumulate)
    except (IndexError, ValueError) as e:
        if isinstance(e, ValueError):
            raise RuntimeError(f"index_put_: {e}") from None
        raise IndexError(str(e).replace(" axis ", " dimension ")) from None


def _index_put_(self, indices, values, accumulate=False):
    return _index_put_impl_(self, indices, values, accumulate)


def _index_put(self, indices, values, accumulate=False):
    return _index_put_impl_(np.array(self, order="C"), indices, values, accumulate)


def _clamped_key(self, indices):
    key, dim = [], 0
    for index in indices:
        if index is None:
            key.append(slice(None))
        else:
            n = self.shape[dim]
            index = np.asarray(index)
            key.append(np.clip(np.where(index < 0, index + n, index), 0, max(n - 1, 0)))
        dim += 1
    return tuple(key)


def _unsafe_masked_index(self, mask, indices, fill):
    values = self[_clamped_key(self, indices)]
    return _c(np.where(mask, values, np.asarray(fill, self.dtype)))


def _unsafe_masked_index_put_accumulate(self, mask, indices, values):
    out = np.array(self, order="C")
    values = np.where(mask, values, np.zeros((), self.dtype)).astype(self.dtype)
    return _put_at(out, _clamped_key(self, indices), values, True)


# --- take / put -------------------------------------------------------------------------


def _take(self, index):
    _index_dtype(index, "take")
    n = self.size
    if index.size and (index.max() >= n or index.min() < -n):
        bad = int(index.max()) if index.max() >= n else int(index.min())
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    return _c(self.reshape(-1)[index])


def _put(self, index, source, accumulate=False):
    _index_dtype(index, "put")
    out = np.array(self, order="C")
    n = out.size
    if index.size and (index.max() >= n or index.min() < -n):
        bad = int(index.max()) if index.max() >= n else int(index.min())
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    if index.size != np.size(source):
        raise RuntimeError(
            f"put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {np.size(source)}, index.numel() = {index.size}"
        )
    _put_at(out.reshape(-1), np.reshape(index, -1), np.reshape(source, -1), accumulate)
    return out


# --- gather / scatter -------------------------------------------------------------------


def _scatter_key(index, dim):
    key = list(np.indices(index.shape, sparse=True))
    key[dim] = index
    return tuple(key)


def _gather(self, dim, index, sparse_grad=False):
    _index_dtype(index, "gather")
    dim = _dim(dim, self.ndim)
    src = np.reshape(self, (1,)) if self.ndim == 0 else self
    idx = np.reshape(index, (1,)) if index.ndim == 0 else index
    if idx.size == 0:
        return np.empty(index.shape, self.dtype)
    if idx.ndim != src.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d in range(src.ndim):
        if d != dim and idx.shape[d] > src.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index.shape)} to be "
                f"no larger than self {list(self.shape)} apart from dimension {dim}"
            )
    _check_bounds(idx, src.shape[dim], dim)
    return _c(src[_scatter_key(idx, dim)].reshape(index.shape))


_REDUCE_ALIASES = {"add": "sum", "multiply": "prod"}
_UFUNCS = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum,
           "amin": np.minimum}


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f" or dtype == _BF16:
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce != "amax"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _reduce_at(out, key, src, reduce, include_self=True, *, stepwise=False,
               stepwise_count=False):
    """Reduce ``src`` into ``out[key]`` (in place, repeats reducing); returns the result.
    float16 and bfloat16 accumulate in float32, rounded once, as CPU's scatter kernels
    accumulate; ``stepwise``, in the dtype itself, rounded at each step, as its index_add
    and index_reduce kernels do (``stepwise_count``: the count of a mean too)."""
    reduce = _REDUCE_ALIASES.get(reduce, reduce)
    if reduce not in _UFUNCS:
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
        )
    work = out if out.flags.writeable else out.copy()
    src = np.asarray(src, work.dtype)
    acc = work
    if work.dtype in _LOW and not stepwise:
        acc, src = work.astype(np.float32), src.astype(np.float32)
    if not include_self:
        acc[key] = _identity(reduce, work.dtype)
    _UFUNCS[reduce].at(acc, key, src)
    if acc is not work:
        work[...] = acc
    if reduce == "mean":
        count = np.full(work.shape, 1 if include_self else 0,
                        work.dtype if stepwise_count else np.int64)
        np.add.at(count, key, 1)
        count[count == 0] = 1
        if work.dtype.kind in "fc" or work.dtype == _BF16:
            work = work / count.astype(work.dtype)
        else:
            work = np.floor_divide(work, count.astype(work.dtype))
    return np.asarray(work, out.dtype)


def _scatter_impl(self, dim, index, src, reduce=None, include_self=True, op="scatter"):
    _index_dtype(index, op)
    dim = _dim(dim, self.ndim)
    out = np.array(self, order="C")
    out1 = out.reshape(1) if out.ndim == 0 else out
    idx = np.reshape(index, (1,)) if index.ndim == 0 else index
    if idx.size == 0:
        return out
    if idx.ndim != out1.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    _check_bounds(idx, out1.shape[dim], dim)
    if not isinstance(src, np.ndarray):
        # A value is converted (checked) only where there is an index, as on the CPU.
        src = checked_scalar(src, out.dtype)
    if src.ndim:
        src = src[tuple(slice(0, s) for s in idx.shape)]
    elif index.ndim == 0:
        src = src.reshape((1,) * idx.ndim)
    key = _scatter_key(idx, dim)
    if reduce is None:
        out1[key] = src
        return out
    return _reduce_at(out1, key, src, reduce, include_self).reshape(self.shape)


def _check_src_dtype(self, src, op):
    if isinstance(src, np.ndarray) and src.dtype != self.dtype:
        raise RuntimeError(
            f"{op}(): Expected self.dtype to be equal to src.dtype"
        )


def _scatter_src(self, dim, index, src):
    _check_src_dtype(self, src, "scatter")
    return _scatter_impl(self, dim, index, src)


def _scatter_value(self, dim, index, value):
    return _scatter_impl(self, dim, index, value)


def _scatter_reduce_src(self, dim, index, src, *, reduce):
    _check_src_dtype(self, src, "scatter")
    return _scatter_impl(self, dim, index, src, reduce)


def _scatter_value_reduce(self, dim, index, value, *, reduce):
    return _scatter_impl(self, dim, index, value, reduce)


def _scatter_add(self, dim, index, src):
    _check_src_dtype(self, src, "scatter_add")
    return _scatter_impl(self, dim, index, src, "sum", op="scatter_add")


def _scatter_reduce_two(self, dim, index, src, reduce, *, include_self=True):
    _check_src_dtype(self, src, "scatter_reduce")
    return _scatter_impl(self, dim, index, src, reduce, include_self, "scatter_reduce")


# --- index_* along one dimension --------------------------------------------------------


def _along(self, dim, index, op):
    """(self as at least 1-d, dim, the NumPy key selecting ``index`` along ``dim``)."""
    _index_dtype(index, op)
    if np.ndim(index) > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    dim = _dim(dim, self.ndim)
    self1 = self.reshape(1) if self.ndim == 0 else self
    index = np.reshape(index, -1)
    if op == "index_select" and self.ndim == 0 and index.size != 1:
        raise RuntimeError(
            f"index_select(): Index to scalar can have only 1 value, got {index.size} value(s)"
        )
    if op in ("index_select", "index_add", "index_reduce"):
        _check_bounds(index, self1.shape[dim], dim, IndexError)
    elif op in ("index_copy", "index_fill", "index_fill_"):
        try:
            # index_fill counts negative indices from the end; index_copy does not.
            _check_bounds(index, self1.shape[dim], dim, negative=op != "index_copy")
        except RuntimeError as e:
            raise IndexError(("index_copy_(): " if op == "index_copy" else "") + str(e)) from None
    else:
        _check_bounds(index, self1.shape[dim], dim)
    return self1, dim, (slice(None),) * dim + (index,)


def _type(a) -> str:
    return scalar_type_name(NUMPY_TO_TORCH[np.asarray(a).dtype])


def _sliced(shape, dim: int) -> list:
    return [n for i, n in enumerate(shape) if i != dim]


def _check_index_copy(self, dim, index, source):
    """CPU's checks for ``index_copy`` (its meta function), in its order."""
    source, n = np.asarray(source), np.size(index)
    if np.ndim(index) > 1:
        raise IndexError(
            f"index_copy_(): Index should have dimension 1 or 0 (got {np.ndim(index)})"
        )
    if source.ndim == 0 and n != 1:
        raise IndexError(
            f"index_copy_(): When source is scalar, index should have one element (got {n})"
        )
    if source.ndim != self.ndim and source.ndim and self.ndim:
        raise IndexError(
            "index_copy_(): When source and destination are not scalars, their dimensionality "
            f"must match. Source dimensionality ({source.ndim}), destination dimensionality "
            f"({self.ndim})"
        )
    if np.asarray(index).dtype != np.int64:
        raise RuntimeError(
            f"index_copy_(): Expected a long tensor for index, but got {_type(index)}"
        )
    if source.dtype != self.dtype:
        raise RuntimeError(
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{_type(self)} and (source) {_type(source)}"
        )
    dim = _dim(dim, self.ndim)
    ours, theirs = _sliced(self.shape, dim), _sliced(source.shape, dim)
    if ours != theirs:
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination "
            f"slice shape: {' '.join(map(str, ours))} at dimension {dim} and source slice "
            f"shape: {' '.join(map(str, theirs))} at dimension 0."
        )
    if source.ndim and n != source.shape[dim]:
        raise IndexError(
            f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) "
            f"({source.shape[dim]})"
        )


def _check_index_func(self, dim, index, source, op: str):
    """CPU's checks for ``index_add`` and ``index_reduce`` (their meta function), in its order."""
    source, index = np.asarray(source), np.asarray(index)
    if index.ndim > 1:
        raise IndexError(
            f"{op}_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
            f"{_type(index)} and size: [{', '.join(map(str, index.shape))}]"
        )
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{op}_(): Expected dtype int32/int64 for index but got: {_type(index)}")
    if source.dtype != self.dtype:
        raise RuntimeError(
            f"{op}_(): self ({_type(self)}) and source ({_type(source)}) must have the same "
            "scalar type"
        )
    dim = _dim(dim, self.ndim)
    if dim and dim >= source.ndim:
        raise RuntimeError(
            f"{op}_(): Indexing dim {dim} is out of bounds of the source tensor with dim "
            f"{source.ndim}"
        )
    size = source.shape[dim] if source.ndim else 1
    if index.size != size:
        if not source.ndim:
            # CPU's message reads source.size(dim) of the 0-dim source, which raises this.
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        raise RuntimeError(
            f"{op}_(): Number of indices ({index.size}) should be equal to source.size(dim): "
            f"({size}), for dim: {dim}"
        )
    both = source.ndim and self.ndim
    if (_sliced(self.shape, dim) if both else list(self.shape)) != (
        _sliced(source.shape, dim) if both else list(source.shape)
    ):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = [{', '.join(map(str, self.shape))}] source.shape = "
            f"[{', '.join(map(str, source.shape))}]"
        )


def _source(source, self1, dim, index):
    source = np.asarray(source)
    if source.ndim == 0:
        source = source.reshape((1,) * self1.ndim)
    return source


def _index_select(self, dim, index):
    self1, dim, key = _along(self, dim, index, "index_select")
    if self.ndim == 0:
        return self.copy()
    return _c(self1[key])


def _scatters(self, dim: int, index) -> bool:
    """Whether CPU's ``index_add`` (alpha 1) hands its work to ``scatter_add``, which
    accumulates float16 and bfloat16 in float32: along the first or last of two or more
    dimensions, with int64 indices; else it adds in the dtype, step by step."""
    return self.ndim > 1 and dim in (0, self.ndim - 1) and np.asarray(index).dtype == np.int64


def _index_add(self, dim, index, source, *, alpha=1):
    _check_index_func(self, dim, index, source, "index_add")
    out = np.array(self, order="C")
    out1, dim, key = _along(out, dim, index, "index_add")
    source = _source(source, out1, dim, index)
    if alpha != 1:
        source = np.asarray(source * alpha, self.dtype)
    stepwise = alpha != 1 or not _scatters(self, dim, index)
    return _reduce_at(out1, key, source, "sum", stepwise=stepwise).reshape(self.shape)


def _index_copy(self, dim, index, source):
    _check_index_copy(self, dim, index, source)
    out = np.array(self, order="C")
    out1, dim, key = _along(out, dim, index, "index_copy")
    out1[key] = _source(source, out1, dim, index)
    return out


def _index_fill_value(value, dtype):
    """The value ``index_fill`` writes: a number or a 0-d tensor's, checked as CPU checks it."""
    if np.ndim(value):
        raise RuntimeError(
            "index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{np.ndim(value)} dimension(s)."
        )
    return checked_scalar(value, dtype)


def _index_fill(self, dim, index, value):
    out = np.array(self, order="C")
    out1, dim, key = _along(out, dim, index, "index_fill")
    out1[key] = _index_fill_value(value, out.dtype)
    return out


def _index_fill_(self, dim, index, value):
    """In place, straight into ``self``: CPU writes to an expanded ``self`` too (it only
    warns), each element once, however many positions share it."""
    self1, dim, key = _along(self, dim, index, "index_fill_")
    if any(st == 0 and n > 1 for st, n in zip(self.strides, self.shape, strict=True)):
        warnings.warn(
            "Use of index_fill_ on expanded tensors is deprecated. Please clone() the tensor "
            "before performing this operation.",
            UserWarning,
            stacklevel=2,
        )
    self1[key] = _index_fill_value(value, self.dtype)
    return self


def _index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(
            f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
            f"{reduce}."
        )
    _check_index_func(self, dim, index, source, "index_reduce")
    out = np.array(self, order="C")
    out1, dim, key = _along(out, dim, index, "index_reduce")
    source = _source(source, out1, dim, index)
    # The count of a mean is CPU's index_add of ones.
    return _reduce_at(out1, key, source, reduce, include_self, stepwise=True,
                      stepwise_count=not _scatters(self, dim, index)).reshape(self.shape)


# --- masks ------------------------------------------------------------------------------


def _check_mask(mask, op):
    if np.asarray(mask).dtype != np.bool_:
        raise RuntimeError(
            f"{op} only supports boolean masks, but got mask with dtype "
            f"{NUMPY_TO_TORCH[np.asarray(mask).dtype]}"
        )


def _masked_fill(self, mask, value):
    _check_mask(mask, "masked_fill_")
    if np.ndim(value):
        raise RuntimeError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{np.ndim(value)} dimension(s)."
        )
    fill = checked_scalar(value, self.dtype)
    # CPU's masked_fill is a contiguous clone filled in place, whatever self's layout.
    return _c(np.where(mask, fill, self))


def _masked_scatter(self, mask, source):
    _check_mask(mask, "masked_scatter_")
    shape = np.broadcast_shapes(self.shape, mask.shape)
    out = np.array(np.broadcast_to(self, shape), order="C")
    m = np.broadcast_to(mask, shape)
    n = int(np.count_nonzero(m))
    if np.size(source) < n:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements "
                           "as the ones in mask")
    out[m] = np.reshape(source, -1)[:n]
    return out


def _masked_select(self, mask):
    _check_mask(mask, "masked_select")
    shape = np.broadcast_shapes(self.shape, mask.shape)
    return _c(np.broadcast_to(self, shape)[np.broadcast_to(mask, shape)])


def _nonzero(self):
    return np.argwhere(self != 0).astype(np.int64, copy=False)


def _nonzero_static(self, *, size, fill_value=-1):
    found = np.argwhere(self != 0)[:size]
    out = np.full((size, self.ndim), fill_value, np.int64)
    out[: len(found)] = found
    return out


def _where(condition, self, other):
    dtype = result_type(_kind(self), _kind(other))
    # Python numbers as arrays (NumPy refuses -3 for uint8; PyTorch's cast wraps it to 253).
    result = np.where(condition, np.asarray(self), np.asarray(other)).astype(dtype, copy=False)
    return with_cpu_layout(result, (condition, self, other))


def _kind(x):
    if isinstance(x, np.ndarray | np.generic):
        return (NUMPY_TO_TORCH[x.dtype], x.ndim == 0)
    return (type(x), True)


# --- searching, counting, unique --------------------------------------------------------


def _as_sortable(x):
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == _BF16 else x


def _searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None,
                  sorter=None):
    if side is not None and right and side == "left":
        raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got "
                           "side of left while right was True")
    side = side or ("right" if right else "left")
    seq = _as_sortable(sorted_sequence)
    values = _as_sortable(self)
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, axis=-1)
    dtype = np.int32 if out_int32 else np.int64
    if np.size(values) == 0 or seq.size == 0:
        return np.zeros(np.shape(values), dtype)
    if seq.ndim <= 1:
        return np.asarray(np.searchsorted(seq.reshape(-1), values, side=side), dtype)
    if values.shape[:-1] != seq.shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq.shape)} and input value tensor {list(values.shape)}"
        )
    rows = seq.reshape(-1, seq.shape[-1])
    vals = values.reshape(len(rows), -1)
    out = np.empty(vals.shape, dtype)
    for i in range(len(rows)):
        out[i] = np.searchsorted(rows[i], vals[i], side=side)
    return out.reshape(values.shape)


def _bucketize(self, boundaries, *, out_int32=False, right=False):
    if np.ndim(boundaries) != 1:
        raise RuntimeError(
            f"boundaries tensor must be 1 dimension, but got dim({np.ndim(boundaries)})"
        )
    return _searchsorted(boundaries, self, out_int32=out_int32, right=right)


def _histc(self, bins=100, min=0, max=0):
    if self.dtype.kind not in "f" and self.dtype != _BF16:
        raise NotImplementedError(
            f"histogram_cpu: \"histc\" not implemented for {NUMPY_TO_TORCH[self.dtype]} on the "
            f"{DEVICE} backend"
        )
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    x = self  # bfloat16 too: the CPU kernel computes the bin in the input's dtype
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        finite = _as_sortable(x)
        finite = finite[~np.isnan(finite)]
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(
            f"torch.histc: max must be larger than min, but got min {min} and max {max}"
        )
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    edges = torch.linspace(lo, hi, bins + 1, dtype=NUMPY_TO_TORCH[x.dtype])
    edges = (edges.view(torch.int16).numpy().view(_BF16) if x.dtype == _BF16 else
             edges.numpy())
    lo_e, hi_e = edges[0], edges[-1]
    v = x.reshape(-1)
    v = v[(v >= lo_e) & (v <= hi_e)]
    pos = ((v - lo_e) * x.dtype.type(bins) / (hi_e - lo_e)).astype(np.int64)
    pos[pos == bins] = bins - 1
    return np.bincount(pos, minlength=bins).astype(self.dtype)


def _outer_edges(x, bins, range_):
    """Per dimension, the leftmost and rightmost edges (``histogramdd``'s rules)."""
    d = len(bins)
    if range_ is not None:
        if len(range_) != 2 * d:
            raise RuntimeError(f"torch.histogramdd: for a {d}-dimensional histogram range "
                               f"should have {2 * d} elements, but got {len(range_)}")
        lo, hi = np.array(range_[0::2], np.float64), np.array(range_[1::2], np.float64)
    elif x.shape[0]:
        lo, hi = x.min(axis=0).astype(np.float64), x.max(axis=0).astype(np.float64)
    else:
        lo, hi = np.zeros(d), np.ones(d)
    for i in range(d):
        if lo[i] > hi[i]:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                               f"{lo[i]} max {hi[i]} for dimension {i}")
        if not (np.isfinite(lo[i]) and np.isfinite(hi[i])):
            raise RuntimeError(f"torch.histogramdd: dimension {i}'s range [{lo[i]}, {hi[i]}] "
                               "is not finite")
    same = lo == hi
    lo[same] -= 0.5
    hi[same] += 0.5
    return lo, hi


def _hist_input(self, ndim_bins):
    if self.dtype.kind != "f" and self.dtype != _BF16:
        raise RuntimeError(
            f"torch.histogramdd: input tensor and bins tensors should have the same dtype, "
            f"and a floating one, but got {NUMPY_TO_TORCH[self.dtype]} on the {DEVICE} backend"
        )
    x = _as_sortable(self)
    return x.reshape(-1, ndim_bins) if ndim_bins else x.reshape(-1, 1)


def _bin_edges(self, bins, range_=None):
    x = _hist_input(self, len(bins))
    lo, hi = _outer_edges(x, bins, range_)
    dtype = NUMPY_TO_TORCH[self.dtype]
    return [np.asarray(torch.linspace(lo[i], hi[i], b + 1, dtype=torch.float64).to(dtype)
                       .view(torch.int16 if dtype == torch.bfloat16 else dtype).numpy())
            .view(self.dtype) for i, b in enumerate(bins)]


def _hist_from_edges(self, edges, weight, density):
    d = len(edges)
    x = _hist_input(self, d)
    counts = tuple(len(e) - 1 for e in edges)
    keep = np.ones(x.shape[0], bool)
    positions = []
    for i, e in enumerate(edges):
        e = _as_sortable(e)
        v = x[:, i]
        keep &= (v >= e[0]) & (v <= e[-1])
        pos = np.searchsorted(e, v, side="right") - 1
        pos[v == e[-1]] = counts[i] - 1
        positions.append(np.clip(pos, 0, max(counts[i] - 1, 0)))
    flat = np.ravel_multi_index(tuple(p[keep] for p in positions), counts) if keep.any() \
        else np.zeros(0, np.int64)
    work = x.dtype
    if weight is None:
        hist = np.bincount(flat, minlength=int(np.prod(counts))).astype(work)
    else:  # summed in the input's dtype, in order, as the CPU kernel does
        hist = np.zeros(int(np.prod(counts)), work)
        np.add.at(hist, flat, np.asarray(_as_sortable(weight), work).reshape(-1)[keep])
    hist = hist.reshape(counts)
    if density:  # as PyTorch: by the sum first, then by each dimension's bin lengths
        hist = hist / hist.sum(dtype=work)
        for i, e in enumerate(edges):
            widths = np.diff(np.asarray(_as_sortable(e), work))
            shape = [1] * d
            shape[i] = len(widths)
            hist = hist / widths.reshape(shape)
    return hist.astype(self.dtype)


def _histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    return _bin_edges(self, bins, range)


def _histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    return _hist_from_edges(self, _bin_edges(self, bins, range), weight, density)


def _histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    return _hist_from_edges(self, bins, weight, density)


def _histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    edges = _bin_edges(self.reshape(-1), [bins], range)
    return _hist_from_edges(self.reshape(-1), edges, weight, density), edges[0]


def _histogram_bins_tensor(self, bins, *, weight=None, density=False):
    return _hist_from_edges(self.reshape(-1), [bins], weight, density), bins.copy()


def _bincount(self, weights=None, minlength=0):
    if self.ndim != 1 or self.dtype.kind not in "iu" and self.dtype != np.bool_:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if self.size and self.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return np.bincount(self, minlength=minlength).astype(np.int64)
    if weights.shape != self.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    dtype = np.float32 if weights.dtype == np.float32 else np.float64
    return np.bincount(self, np.asarray(weights, np.float64), minlength).astype(dtype)


def _unique_flat(x, return_inverse, return_counts):
    u, inverse, counts = np.unique(_as_sortable(x).reshape(-1), return_inverse=True,
                                   return_counts=True, equal_nan=False)
    return (
        np.asarray(u, x.dtype),
        inverse.reshape(x.shape).astype(np.int64) if return_inverse else _EMPTY_INT64,
        counts.astype(np.int64) if return_counts else _EMPTY_INT64,
    )


def _unique2(self, sorted=True, return_inverse=False, return_counts=False):
    return _unique_flat(self, return_inverse, return_counts)


def _unique(self, sorted=True, return_inverse=False):
    return _unique_flat(self, return_inverse, False)[:2]


def _unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):
    dim = _dim(dim, self.ndim)
    x = np.moveaxis(_as_sortable(self), dim, 0)
    rows = x.reshape(x.shape[0], int(np.prod(x.shape[1:])))
    if rows.shape[0] == 0:
        return (self.copy(), _EMPTY_INT64.copy(), _EMPTY_INT64.copy())
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(rows.shape[0])
    srt = rows[order]
    new = np.ones(len(srt), bool)
    if rows.shape[1]:
        new[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    else:
        new[1:] = False
    group = np.cumsum(new) - 1
    inverse = np.empty(len(rows), np.int64)
    inverse[order] = group
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(srt)))
    u = np.moveaxis(_c(np.asarray(x[order[starts]], self.dtype)), 0, dim)
    return (
        u,
        inverse if return_inverse else _EMPTY_INT64.copy(),
        counts.astype(np.int64) if return_counts else _EMPTY_INT64.copy(),
    )


def _unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    if dim is None:
        flat = self.reshape(-1)
        new = np.ones(flat.size, bool)
        new[1:] = flat[1:] != flat[:-1]
        u = flat[new]
        inverse = (np.cumsum(new) - 1).reshape(self.shape)
    else:
        dim = _dim(dim, self.ndim)
        x = np.moveaxis(self, dim, 0)
        rows = x.reshape(x.shape[0], int(np.prod(x.shape[1:])))
        new = np.ones(rows.shape[0], bool)
        new[1:] = (rows[1:] != rows[:-1]).any(axis=1) if rows.shape[1] else False
        u = np.moveaxis(_c(x[new]), 0, dim)
        inverse = np.cumsum(new) - 1
    counts = np.diff(np.append(np.flatnonzero(new), new.size))
    return (
        u if dim is not None else _c(u),
        inverse.astype(np.int64) if return_inverse else _EMPTY_INT64.copy(),
        counts.astype(np.int64) if return_counts else _EMPTY_INT64.copy(),
    )


def _embedding_renorm_(self, indices, max_norm, norm_type):
    rows = np.unique(np.reshape(indices, -1))
    _check_bounds(rows, self.shape[0], 0, IndexError)
    work = _work(self[rows])
    norms = np.linalg.norm(work.reshape(len(rows), -1), ord=norm_type, axis=1)
    scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(work.dtype)
    self[rows] = (work * scale.reshape((-1,) + (1,) * (work.ndim - 1))).astype(self.dtype)
    return self


def _bags(indices, offsets, include_last_offset):
    """(number of bags, the bag of each index; -1 past the last bag)."""
    n = indices.size
    offsets = np.asarray(offsets, np.int64).reshape(-1)
    starts = offsets[:-1] if include_last_offset else offsets
    ends = offsets[1:] if include_last_offset else np.append(offsets[1:], n)
    bags = len(starts)
    offset2bag = np.full(n, -1, np.int64)
    for b in range(bags):
        offset2bag[starts[b]:min(ends[b], n)] = b
    return bags, offset2bag


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    if weight.ndim != 2:
        raise RuntimeError(f"embedding_bag: weight has to be a 2D Tensor, but got Tensor of "
                           f"dimension {weight.ndim}")
    indices = np.reshape(indices, -1)
    _check_bounds(indices, weight.shape[0], 0, IndexError)
    bags, offset2bag = _bags(indices, offsets, include_last_offset)
    valid = (offset2bag >= 0) & (indices != padding_idx if padding_idx >= 0 else True)
    rows = _work(weight)[indices]
    if per_sample_weights is not None:
        rows = rows * _work(per_sample_weights).reshape(-1, 1)
    counts = np.bincount(offset2bag[valid], minlength=bags).astype(np.int64)
    d = weight.shape[1]
    if mode == 2:
        out = np.zeros((bags, d), rows.dtype)
        max_indices = np.zeros((bags, d), np.int64)
        for b in range(bags):
            sel = np.flatnonzero(valid & (offset2bag == b))
            if sel.size:
                arg = np.argmax(rows[sel], axis=0)
                out[b] = rows[sel][arg, np.arange(d)]
                max_indices[b] = indices[sel][arg]
        bag_size = counts
    else:
        out = np.zeros((bags, d), rows.dtype)
        np.add.at(out, offset2bag[valid], rows[valid])
        if mode == 1:
            out = out / np.maximum(counts, 1).reshape(-1, 1).astype(out.dtype)
            bag_size, max_indices = counts, counts.copy()
        else:
            bag_size, max_indices = np.zeros(bags, np.int64), np.zeros(bags, np.int64)
    return (out.astype(weight.dtype), np.where(offset2bag >= 0, offset2bag, 0), bag_size,
            max_indices)


def _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                  num_weights, scale_grad_by_freq, mode,
                                  per_sample_weights=None, padding_idx=-1):
    work = _work(grad)
    out = np.zeros((num_weights, grad.shape[1]), work.dtype)
    indices = np.reshape(indices, -1)
    if mode == 2:
        used = bag_size > 0
        cols = np.broadcast_to(np.arange(grad.shape[1]), maximum_indices.shape)
        np.add.at(out, (maximum_indices[used], cols[used]), work[used])
        return out.astype(grad.dtype)
    valid = indices != padding_idx if padding_idx >= 0 else np.ones(indices.size, bool)
    g = work[offset2bag]
    if mode == 1:
        g = g / np.maximum(bag_size[offset2bag], 1).reshape(-1, 1).astype(g.dtype)
    if per_sample_weights is not None:
        g = g * _work(per_sample_weights).reshape(-1, 1)
    if scale_grad_by_freq:
        freq = np.bincount(indices, minlength=num_weights)
        g = g / freq[indices].reshape(-1, 1).astype(g.dtype)
    np.add.at(out, indices[valid], g[valid])
    return out.astype(grad.dtype)


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                            num_weights, scale_grad_by_freq, mode, sparse,
                            per_sample_weights=None, padding_idx=-1):
    if sparse:
        raise NotImplementedError(f"embedding_bag: sparse gradients are not supported on the "
                                  f"{DEVICE} backend")
    return _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                         num_weights, scale_grad_by_freq, mode,
                                         per_sample_weights, padding_idx)


def _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
                                               padding_idx=-1):
    if mode != 0:
        raise NotImplementedError("embedding_bag_backward: per_sample_weights only supported "
                                  "for mode='sum'")
    indices = np.reshape(indices, -1)
    result = (_work(grad)[offset2bag] * _work(weight)[indices]).sum(axis=1)
    if padding_idx >= 0:
        result[indices == padding_idx] = 0
    return result.astype(grad.dtype)


def _repeat_interleave(repeats, *, output_size=None):
    if repeats.ndim != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.size and repeats.min() < 0:
        raise RuntimeError("repeats can not be negative")
    return np.repeat(np.arange(repeats.size, dtype=repeats.dtype), repeats)


KERNELS = {
    "index.Tensor": _index,
    "index_put": _index_put,
    "index_put_": _index_put_,
    "_index_put_impl_": _index_put_impl_,
    "_unsafe_masked_index": _unsafe_masked_index,
    "_unsafe_masked_index_put_accumulate": _unsafe_masked_index_put_accumulate,
    "take": _take,
    "put": _put,
    "gather": _gather,
    "scatter.src": _scatter_src,
    "scatter.value": _scatter_value,
    "scatter.reduce": _scatter_reduce_src,
    "scatter.value_reduce": _scatter_value_reduce,
    "scatter_add": _scatter_add,
    "scatter_reduce.two": _scatter_reduce_two,
    "index_select": _index_select,
    "index_add": _index_add,
    "index_copy": _index_copy,
    "index_fill.int_Scalar": _index_fill,
    "index_fill.int_Tensor": _index_fill,
    "index_fill_.int_Scalar": _index_fill_,
    "index_fill_.int_Tensor": _index_fill_,
    "index_reduce": _index_reduce,
    "masked_fill.Scalar": _masked_fill,
    "masked_fill.Tensor": _masked_fill,
    "masked_scatter": _masked_scatter,
    "masked_select": _masked_select,
    "nonzero": _nonzero,
    "nonzero_static": _nonzero_static,
    "where.self": _where,
    "searchsorted.Tensor": _searchsorted,
    "searchsorted.Scalar": _searchsorted,
    "bucketize.Tensor": _bucketize,
    "bucketize.Scalar": _bucketize,
    "histc": _histc,
    "bincount": _bincount,
    "histogram.bin_ct": _histogram_bin_ct,
    "histogram.bins_tensor": _histogram_bins_tensor,
    "_histogramdd_bin_edges": _histogramdd_bin_edges,
    "_histogramdd_from_bin_cts": _histogramdd_from_bin_cts,
    "_histogramdd_from_bin_tensors": _histogramdd_from_bin_tensors,
    "_unique2": _unique2,
    "_unique": _unique,
    "unique_dim": _unique_dim,
    "unique_consecutive": _unique_consecutive,
    "repeat_interleave.Tensor": _repeat_interleave,
    "embedding_renorm_": _embedding_renorm_,
    "_embedding_bag": _embedding_bag,
    "_embedding_bag_forward_only": _embedding_bag,
    "_embedding_bag_dense_backward": _embedding_bag_dense_backward,
    "_embedding_bag_backward": _embedding_bag_backward,
    "_embedding_bag_per_sample_weights_backward": _embedding_bag_per_sample_weights_backward,
}
