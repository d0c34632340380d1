"""Creation, joining and data-movement kernels of the ``npy`` backend.

View operators (``view``, ``permute``, ``slice``...) need no kernel: the bridge computes their
metadata and shares the base's array. The kernels here make new arrays, in the layout the CPU
kernel gives its result (C-contiguous unless the CPU keeps the input's layout).
"""

import numpy as np
import torch

from torch_acc import library

from ._common import as_strided, np_dtype, NUMPY_TO_TORCH, result_type


def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = np_dtype(dtype or torch.get_default_dtype(), "aten::empty.memory_format")
    size = tuple(size)
    if memory_format == torch.channels_last and len(size) == 4:
        n, c, h, w = size
        return np.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)
    if memory_format == torch.channels_last_3d and len(size) == 5:
        n, c, d, h, w = size
        return np.empty((n, d, h, w, c), dtype).transpose(0, 4, 1, 2, 3)
    return np.empty(size, dtype)


def _contiguous_strides(size: tuple) -> tuple:
    """The strides, in elements, of a C-contiguous tensor of ``size`` (as PyTorch's; its
    ``_prims_common.make_contiguous_strides_for`` validates symbolic shapes, at 7 us a call)."""
    strides, step = [], 1
    for s in reversed(size):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = np.dtype(np_dtype(dtype or torch.get_default_dtype(), "aten::empty_strided"))
    size, stride = tuple(size), tuple(stride)
    if stride == _contiguous_strides(size):
        return np.empty(size, dtype)  # ones_like(loss), clones: a tenth of the general path
    extent = sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1
    return as_strided(np.empty((max(extent, 0),), dtype), size, stride, 0)


def _scalar(x):
    return x.item() if isinstance(x, np.ndarray | np.generic) else x


def _arange_out(start, end, step=1, *, out):
    """As the CPU kernel: integer dtypes count in int64 from truncated bounds."""
    dtype = out.dtype
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype.kind in "iub":
        xs, xe, xst = int(start), int(end), int(step)
        if dtype == np.int64:
            if xst == 0:
                raise RuntimeError("step must be nonzero")
            sgn = (xst > 0) - (xst < 0)
            num, den = xe - xs + xst - sgn, xst
            size = abs(num) // abs(den) * (1 if (num >= 0) == (den >= 0) else -1)
        else:
            size = int(np.ceil((float(end) - float(start)) / float(step)))
    else:
        xs, xst = float(start), float(step)
        size = int(np.ceil((float(end) - xs) / xst))
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    size = max(size, 0)
    if dtype.kind in "iub":
        return (xs + np.arange(size, dtype=np.int64) * xst).astype(dtype)
    return (xs + np.arange(size, dtype=np.float64) * xst).astype(dtype)


def _linspace_out(start, end, steps, *, out):
    """As the CPU kernel: the first half counts up from start, the second down from end."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = out.dtype
    start, end = _scalar(start), _scalar(end)
    if dtype.kind in "iub":
        a, b = float(int(start)), float(int(end))
        compute = np.float64
    else:  # in the dtype itself, each operation rounded (float16 and bfloat16 too)
        compute = dtype
        a, b = np.asarray(start).astype(compute), np.asarray(end).astype(compute)
    if steps == 1:
        return np.full((1,), start).astype(dtype)
    idx = np.arange(steps)
    compute = np.dtype(compute)
    step = (np.asarray(b, compute) - np.asarray(a, compute)) / compute.type(steps - 1) \
        if dtype.kind not in "iub" else (b - a) / (steps - 1)
    half = steps // 2
    up = np.asarray(a, compute) + step * idx[:half].astype(compute)
    down = np.asarray(b, compute) - step * (steps - idx[half:] - 1).astype(compute)
    values = np.concatenate([up, down])
    if dtype.kind in "iu":
        values = np.trunc(values)
    return values.astype(dtype)


def _tri_indices(fn):
    def kernel(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
        if row < 0 or col < 0:
            raise RuntimeError(f"row must be non-negative, got{row}" if row < 0 else
                               f"col must be non-negative, got{col}")
        rows, cols = fn(row, offset, col)
        return np.stack([rows, cols]).astype(np_dtype(dtype or torch.int64))

    return kernel


def _cat(tensors, dim=0):
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype != dtype:
            dtype = result_type((NUMPY_TO_TORCH[dtype], False), (NUMPY_TO_TORCH[t.dtype], False))
    # The legacy rule: 1-d empty tensors are skipped, whatever the other tensors' shapes.
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return np.empty((0,), dtype)
    if kept[0].ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    ndim = kept[0].ndim
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but "
            f"got {dim})"
        )
    for i, t in enumerate(kept):
        if t.ndim != ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ndim} and {t.ndim}"
            )
        for d in range(ndim):
            if d != dim % ndim and t.shape[d] != kept[0].shape[d]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {dim}. Expected size "
                    f"{kept[0].shape[d]} but got size {t.shape[d]} for tensor number {i} in "
                    "the list."
                )
    perm = _CHANNELS_LAST.get(ndim)
    if perm and all(_is_channels_last(t, perm) for t in kept):
        # All inputs channels-last: so is the result, as on CPU.
        out = np.concatenate([t.transpose(perm) for t in kept], axis=perm.index(dim % ndim),
                             dtype=dtype, casting="unsafe")
        return out.transpose(np.argsort(perm))
    return np.concatenate(kept, axis=dim, dtype=dtype, casting="unsafe")


_CHANNELS_LAST = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


def _is_channels_last(t, perm):
    return not t.flags.c_contiguous and t.transpose(perm).flags.c_contiguous


def _flip(self, dims):
    if not (self.ndim and dims):
        # Nothing to flip, yet a new tensor all the same (not a view of ``self``).
        return preserve(self, self).copy()
    return preserve(np.flip(self, tuple(dims)), self)


def _roll(self, shifts, dims=()):
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return contiguous(np.roll(self.reshape(-1), shifts[0]).reshape(self.shape))
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    return contiguous(np.roll(self, tuple(shifts), tuple(dims)))


def _tri(fn):
    def kernel(self, diagonal=0):
        if self.ndim < 2:
            raise RuntimeError(f"{fn.__name__}: input tensor must have at least 2 dimensions")
        return contiguous(fn(self, diagonal))

    return kernel


def contiguous(x):
    """``x`` as a C-contiguous array with the strides torch gives (a copy only if needed).

    Unlike ``np.ascontiguousarray`` it keeps 0-d arrays 0-d and normalizes the strides of
    size-1 dimensions, which NumPy leaves as they were (possibly negative).
    """
    x = np.asarray(x)
    if x.flags.c_contiguous:
        stride, ok, strides = x.itemsize, True, []
        for n, st in zip(reversed(x.shape), reversed(x.strides), strict=True):
            if st != stride and n != 0:
                ok = False
            strides.append(stride)
            stride *= n
        if ok:
            return x
        if x.size:
            # Only size-1 dimensions stride otherwise: the same memory, restrided.
            return np.ndarray(x.shape, x.dtype, buffer=x, strides=tuple(reversed(strides)))
    return np.array(x, order="C")


def preserve(result, like):
    """``result`` (shape of ``like``) in ``like``'s memory layout, as TensorIterator would."""
    result = np.asarray(result)
    if like.ndim < 2 or like.flags.c_contiguous or result.shape != like.shape:
        return contiguous(result)
    order = sorted(range(like.ndim), key=lambda d: (-abs(like.strides[d]), d))
    out = np.empty(tuple(like.shape[d] for d in order), result.dtype)
    out[...] = result.transpose(order)
    return out.transpose(np.argsort(order))


# --- padding ----------------------------------------------------------------------------


def _pad_indices(n, before, after, mode):
    """For each output position along one dimension, the input position it reads."""
    i = np.arange(-before, n + after)
    if mode == "reflect":
        if before >= n or after >= n:
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({before}, {after}) at dimension of input {n}"
            )
        i = np.abs(i)
        return (n - 1) - np.abs((n - 1) - i)
    return np.clip(i, 0, n - 1)


def _pad_dims(self, padding):
    k = len(padding) // 2
    # padding lists the last dimension first: (left, right, top, bottom, ...)
    return [(self.ndim - 1 - j, padding[2 * j], padding[2 * j + 1]) for j in range(k)]


def _pad(mode, k):
    def kernel(self, padding):
        if self.ndim not in (k + 1, k + 2):
            raise RuntimeError(
                f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size "
                f"and other non-zero dimensions for input, but got: {list(self.shape)}"
            )
        out = self
        for dim, before, after in _pad_dims(self, padding):
            if self.shape[dim] == 0 or self.shape[dim] + before + after <= 0:
                raise RuntimeError(
                    f"input tensor size {list(self.shape)} and padding {list(padding)} give "
                    "an empty output"
                )
            out = np.take(out, _pad_indices(self.shape[dim], before, after, mode), axis=dim)
        return contiguous(out)

    return kernel


def _pad_backward(mode):
    def kernel(grad_output, self, padding):
        grad = grad_output
        for dim, before, after in reversed(_pad_dims(self, padding)):
            index = _pad_indices(self.shape[dim], before, after, mode)
            shape = list(grad.shape)
            shape[dim] = self.shape[dim]
            work = np.zeros(shape, np.float32 if grad.dtype.itemsize < 4 else grad.dtype)
            np.add.at(work, (slice(None),) * dim + (index,), grad)
            grad = work
        return contiguous(grad.astype(grad_output.dtype, copy=False))

    return kernel


# --- *_scatter: the functional forms of writing into a view -----------------------------


def _slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    out = np.array(self, order="C")
    key = [slice(None)] * out.ndim
    key[dim] = slice(start, end, step)
    out[tuple(key)] = src
    return out


def _select_scatter(self, src, dim, index):
    out = np.array(self, order="C")
    key = [slice(None)] * out.ndim
    key[dim] = index
    out[tuple(key)] = src
    return out


def _diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    out = np.array(self, order="C")
    moved = np.moveaxis(out, (dim1, dim2), (-2, -1))
    n = np.diagonal(moved, offset, -2, -1).shape[-1]
    i = np.arange(n)
    moved[..., i + max(-offset, 0), i + max(offset, 0)] = src
    return out


def _as_strided_scatter(self, src, size, stride, storage_offset=None):
    out = np.array(self, order="C")
    view = as_strided(out.reshape(-1), size, stride, storage_offset or 0)
    view[...] = src
    return out


def _stack(tensors, dim=0):
    """As the CPU: one new array (one copy, where the decomposition's ``cat`` of views
    makes a result that is a view of its payload)."""
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} "
                f"at entry 0 and {list(t.shape)} at entry {i}"
            )
    ndim = tensors[0].ndim + 1
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but "
            f"got {dim})"
        )
    return _cat([np.expand_dims(t, dim % ndim) for t in tensors], dim % ndim)


def _reinterpret(payload, dtype: torch.dtype):
    """The NumPy view of a 1-D array as ``dtype`` (half or twice its element size)."""
    return np.ascontiguousarray(payload).view(np_dtype(dtype))


def register_view_kernels() -> None:
    """Register ``view_as_real`` and ``view_as_complex``, which change the element size
    (once): :func:`torch_acc.library.impl_element_size_views` with NumPy's reinterpretation."""
    library.impl_element_size_views(_reinterpret)


KERNELS = {
    "empty.memory_format": _empty,
    "empty_strided": _empty_strided,
    "arange.start_out": _arange_out,
    "linspace.out": _linspace_out,
    "tril_indices": _tri_indices(np.tril_indices),
    "triu_indices": _tri_indices(np.triu_indices),
    "cat": _cat,
    "stack": _stack,
    "flip": _flip,
    "roll": _roll,
    "tril": _tri(np.tril),
    "triu": _tri(np.triu),
    "reflection_pad1d": _pad("reflect", 1),
    "reflection_pad2d": _pad("reflect", 2),
    "reflection_pad3d": _pad("reflect", 3),
    "replication_pad1d": _pad("edge", 1),
    "replication_pad2d": _pad("edge", 2),
    "replication_pad3d": _pad("edge", 3),
    "reflection_pad1d_backward": _pad_backward("reflect"),
    "reflection_pad2d_backward": _pad_backward("reflect"),
    "reflection_pad3d_backward": _pad_backward("reflect"),
    "replication_pad1d_backward": _pad_backward("edge"),
    "replication_pad2d_backward": _pad_backward("edge"),
    "replication_pad3d_backward": _pad_backward("edge"),
    "slice_scatter": _slice_scatter,
    "select_scatter": _select_scatter,
    "diagonal_scatter": _diagonal_scatter,
    "as_strided_scatter": _as_strided_scatter,
}
