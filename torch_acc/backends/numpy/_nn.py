"""Neural-network kernels of the ``npy`` backend: convolution, pooling, normalization,
softmax, losses, activations, and their gradients.

Floating-point inputs only (float16 and bfloat16 are computed in float32 and cast back),
but for ``relu``, ``hardtanh`` and ``threshold``, which take integers too, as on CPU; other
dtypes raise a ``NotImplementedError`` (CPU's error for a dtype a kernel lacks) naming the
operator and the backend. Convolutions are im2col (``sliding_window_view``) and a
``tensordot``, which NumPy hands to BLAS.
"""

import itertools
import math

import ml_dtypes
import numpy as np
import torch

from ._common import checked_scalar, DEVICE, unsupported, with_cpu_layout

_as_strided = np.lib.stride_tricks.as_strided
_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))


def _compute_dtype(op: str, *arrays) -> tuple[np.dtype, np.dtype]:
    """(the dtype of the result, the dtype to compute in) for floating-point ``arrays``."""
    dtype = arrays[0].dtype
    if dtype.kind != "f" and dtype not in _HALF:
        raise NotImplementedError(f"{op}: the {DEVICE} backend supports floating-point inputs "
                                  f"only, got {dtype}")
    return dtype, (np.dtype(np.float32) if dtype in _HALF else dtype)


def _f(x, dtype):
    return x if x is None or x.dtype == dtype else x.astype(dtype)


def _out(x, dtype):
    return np.asarray(x, dtype=dtype, order="C")


def _like(y, x):
    """``y`` (C-contiguous) laid out as ``x`` is: channels-last when ``x`` is."""
    return _in_format(y, _channels_last(x))


def _elementwise(y, x, dtype):
    """``y``, an elementwise result of ``x`` (an array, or a tuple of the operands), as an
    array of ``dtype`` laid out as CPU's TensorIterator lays out its result
    (:func:`with_cpu_layout`)."""
    return with_cpu_layout(np.asarray(y, dtype), x if isinstance(x, tuple) else (x,),
                           scalars=False)


def _ntuple(value, n: int) -> tuple[int, ...]:
    value = tuple(value) if isinstance(value, list | tuple) else (value,)
    return value * n if len(value) == 1 else value


# --- convolution --------------------------------------------------------------------------


def _pad(x, before, after=None, fill=0):
    """``x`` padded with ``fill`` by ``before``/``after`` along its last dimensions (faster
    than ``np.pad`` at these sizes)."""
    after = before if after is None else after
    if not any(before) and not any(after):
        return x
    lead = x.ndim - len(before)
    size = x.shape[lead:]
    shape = x.shape[:lead] + tuple(i + p + q for i, p, q in zip(size, before, after,
                                                                 strict=True))
    xp = np.full(shape, fill, x.dtype) if fill else np.zeros(shape, x.dtype)
    xp[(Ellipsis, *(slice(p, p + i) for p, i in zip(before, size, strict=True)))] = x
    return xp


def _windows(x, kernel, stride, dilation, out):
    """The windows of ``x`` along its last ``len(kernel)`` dimensions: a read-only view
    shaped (*lead, *out, *kernel)."""
    d = len(kernel)
    strides = x.strides[-d:]
    return _as_strided(
        x, x.shape[:-d] + tuple(out) + tuple(kernel),
        x.strides[:-d] + tuple(st * s for st, s in zip(strides, stride, strict=True))
        + tuple(st * dl for st, dl in zip(strides, dilation, strict=True)),
        writeable=False)


def _offsets(kernel):
    return itertools.product(*(range(k) for k in kernel))


def _tap(offset, dilation, stride, out):
    """The slices of a padded input that kernel position ``offset`` reads for every output."""
    return tuple(slice(j * dl, j * dl + (o - 1) * s + 1, s)
                 for j, dl, o, s in zip(offset, dilation, out, stride, strict=True))


def _out_size(size, kernel, stride, dilation):
    return [(i - (k - 1) * dl - 1) // s + 1
            for i, k, s, dl in zip(size, kernel, stride, dilation, strict=True)]


def _im2col(x, kernel, stride, padding, dilation, out=None):
    """(N, C * prod(kernel), prod(out)) columns of x (N, C, *spatial), and ``out``.

    Built one kernel position at a time: each copy then runs along a whole output row,
    where copying a window view (innermost dimension: the kernel's) is many times slower."""
    x = _pad(x, padding)
    if out is None:
        out = _out_size(x.shape[2:], kernel, stride, dilation)
    n, c = x.shape[:2]
    cols = np.empty((n, c, math.prod(kernel), *out), x.dtype)
    for k, offset in enumerate(_offsets(kernel)):
        cols[:, :, k] = x[(slice(None), slice(None), *_tap(offset, dilation, stride, out))]
    return cols.reshape(n, c * math.prod(kernel), math.prod(out)), out


def _conv(x, w, stride, padding, dilation, groups, out_size=None):
    """A regular convolution: x (N, C, *I), w (O, C/groups, *K) -> (N, O, *out), the first
    ``out_size`` outputs along each dimension if given."""
    cols, out = _im2col(x, w.shape[2:], stride, padding, dilation, out_size)
    n, o = x.shape[0], w.shape[0]
    w2 = w.reshape(o, -1)
    if groups == 1:
        return np.matmul(w2, cols).reshape(n, o, *out)
    cg, og = cols.shape[1] // groups, o // groups
    y = np.empty((n, o, math.prod(out)), np.result_type(x, w))
    for g in range(groups):
        np.matmul(w2[g * og:(g + 1) * og], cols[:, g * cg:(g + 1) * cg],
                  out=y[:, g * og:(g + 1) * og])
    return y.reshape(n, o, *out)


def _conv_input_grad(gy, w, in_size, stride, padding, dilation, groups):
    """The gradient of a regular convolution with respect to its input (N, C, *in_size):
    col2im of ``w`` (O, C/groups, *K) times ``gy`` (N, O, *out)."""
    kernel, out = w.shape[2:], gy.shape[2:]
    n, o, cg = gy.shape[0], w.shape[0], w.shape[1]
    og = o // groups
    # The padded input, large enough for every window even when the last ones run over.
    size = [max(i + 2 * p, (q - 1) * s + (k - 1) * dl + 1)
            for i, p, q, s, k, dl in zip(in_size, padding, out, stride, kernel, dilation,
                                         strict=True)]
    gx = np.zeros((n, cg * groups, *size), np.result_type(gy, w))
    g3 = gy.reshape(n, o, -1)
    w2 = w.reshape(o, -1)
    kk = math.prod(kernel)
    for g in range(groups):
        cols = np.matmul(w2[g * og:(g + 1) * og].T, g3[:, g * og:(g + 1) * og])
        cols = cols.reshape(n, cg, kk, *out)
        target = gx[:, g * cg:(g + 1) * cg]
        for k, offset in enumerate(_offsets(kernel)):
            target[(slice(None), slice(None), *_tap(offset, dilation, stride, out))] += \
                cols[:, :, k]
    crop = (slice(None), slice(None)) + tuple(
        slice(p, p + i) for p, i in zip(padding, in_size, strict=True))
    return gx[crop]


def _conv_weight_grad(gy, x, kernel, stride, padding, dilation, groups):
    """The gradient of a regular convolution with respect to its weight (O, C/groups, *K)."""
    cols, _ = _im2col(x, kernel, stride, padding, dilation, gy.shape[2:])
    n, o = gy.shape[:2]
    g3 = gy.reshape(n, o, -1)
    cg, og = cols.shape[1] // groups, o // groups
    # A batch of matrix products summed: BLAS reads the transposed columns in place.
    parts = [np.matmul(g3[:, g * og:(g + 1) * og],
                       cols[:, g * cg:(g + 1) * cg].transpose(0, 2, 1)).sum(0)
             for g in range(groups)]
    gw = parts[0] if groups == 1 else np.concatenate(parts)
    return gw.reshape(o, x.shape[1] // groups, *kernel)


def _conv_args(x, w, stride, padding, dilation, output_padding=None):
    d = w.ndim - 2
    if x.ndim != d + 2:
        raise RuntimeError(f"convolution: expected a {d + 2}-d input (batched) for a "
                           f"{w.ndim}-d weight, but got an input of shape {list(x.shape)}")
    result = [_ntuple(stride, d), _ntuple(padding, d), _ntuple(dilation, d)]
    if output_padding is not None:
        result.append(_ntuple(output_padding, d))
    return result


def _transposed_size(x, w, stride, padding, dilation, output_padding):
    return [(i - 1) * s - 2 * p + dl * (k - 1) + op + 1
            for i, s, p, dl, k, op in zip(x.shape[2:], stride, padding, dilation, w.shape[2:],
                                          output_padding, strict=True)]


def _channels_last(a) -> bool:
    """Whether PyTorch suggests a channels-last memory format for a tensor of ``a``'s strides
    (a 4-d or 5-d one whose channels are innermost)."""
    if a.ndim not in (4, 5) or a.flags.c_contiguous:
        return False
    t = torch.empty_strided(a.shape, [st // a.itemsize for st in a.strides], device="meta")
    return torch._prims_common.suggest_memory_format(t) != torch.contiguous_format


def _in_format(y, channels_last: bool):
    """``y`` (C-contiguous) laid out channels-last where ``channels_last``, as CPU's kernels
    give their outputs the memory format of their inputs, with torch's strides for it (NumPy
    leaves those of size-1 dimensions unspecified: a (2, 3, 1, 1) result must stride
    (3, 1, 3, 3))."""
    if not channels_last or y.ndim not in (4, 5):
        return y
    z = np.ascontiguousarray(np.moveaxis(y, 1, -1))
    strides, step = [0] * y.ndim, 1
    for d in (1, *range(y.ndim - 1, 1, -1), 0):
        strides[d] = step * y.itemsize
        step *= max(y.shape[d], 1)
    return _as_strided(z, y.shape, strides)


def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    dtype, cdt = _compute_dtype("convolution", x)
    unbatched = x.ndim == w.ndim - 1
    if unbatched:
        x = x[None]
    xc, wc = _f(x, cdt), _f(w, cdt)
    stride, padding, dilation, output_padding = _conv_args(
        xc, wc, stride, padding, dilation, output_padding)
    if x.shape[1] == 0 or x.shape[0] == 0 or not transposed and any(
            i + 2 * p < dl * (k - 1) + 1
            for i, p, dl, k in zip(x.shape[2:], padding, dilation, w.shape[2:], strict=True)):
        if x.shape[0] != 0 and x.shape[1] != 0:
            raise RuntimeError(
                f"convolution: calculated input size per channel {list(x.shape[2:])} with "
                f"padding {list(padding)} is smaller than the kernel size {list(w.shape[2:])}")
    if transposed:
        size = _transposed_size(xc, wc, stride, padding, dilation, output_padding)
        y = _conv_input_grad(xc, wc, size, stride, padding, dilation, groups)
    else:
        y = _conv(xc, wc, stride, padding, dilation, groups)
    if bias is not None:
        y = y + _f(bias, cdt).reshape((-1,) + (1,) * (y.ndim - 2))
    if unbatched:
        y = y[0]
    return _in_format(_out(y, dtype), _channels_last(x) or _channels_last(w))


def _convolution_backward(gy, x, w, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    dtype, cdt = _compute_dtype("convolution_backward", x)
    unbatched = x.ndim == w.ndim - 1
    if unbatched:
        x, gy = x[None], gy[None]
    gyc, xc, wc = _f(gy, cdt), _f(x, cdt), _f(w, cdt)
    stride, padding, dilation, output_padding = _conv_args(
        xc, wc, stride, padding, dilation, output_padding)
    # Outputs the caller did not ask for (output_mask) are undefined tensors.
    gx = gw = gb = None
    channels_last = _channels_last(x) or _channels_last(w)
    if output_mask[0]:
        if transposed:
            gx = _conv(gyc, wc, stride, padding, dilation, groups, x.shape[2:])
        else:
            gx = _conv_input_grad(gyc, wc, x.shape[2:], stride, padding, dilation, groups)
        gx = _in_format(_out(gx[0] if unbatched else gx, dtype), channels_last)
    if output_mask[1]:
        if transposed:
            gw = _conv_weight_grad(xc, gyc, w.shape[2:], stride, padding, dilation, groups)
        else:
            gw = _conv_weight_grad(gyc, xc, w.shape[2:], stride, padding, dilation, groups)
        gw = _in_format(_out(gw, dtype), _channels_last(w))
    if output_mask[2]:
        gb = _out(gyc.sum(axis=(0, *range(2, gy.ndim))), dtype)
    return gx, gw, gb


# --- pooling ------------------------------------------------------------------------------


def _pool_out_size(i, k, s, p, dl, ceil_mode):
    o = (i + 2 * p - dl * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= i + p:
        o -= 1
    return o


def _pool_args(op, x, d, kernel_size, stride, padding, dilation=1):
    kernel = _ntuple(kernel_size, d)
    stride = _ntuple(stride, d) if stride else kernel
    padding, dilation = _ntuple(padding, d), _ntuple(dilation, d)
    if x.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"{op}: expected a {d + 1}-d or {d + 2}-d input, but got an input "
                           f"of shape {list(x.shape)}")
    if any(p * 2 > k for p, k in zip(padding, kernel, strict=True)):
        raise RuntimeError(f"{op}: pad should be at most half of effective kernel size, but "
                           f"got pad={list(padding)} and kernel_size={list(kernel)}")
    return kernel, stride, padding, dilation


def _pool_windows(x, kernel, stride, padding, dilation, ceil_mode, fill):
    """(windows (B, *out, *kernel) of x (B, *spatial) padded with ``fill``, out sizes)."""
    size = x.shape[1:]
    out = [_pool_out_size(i, k, s, p, dl, ceil_mode)
           for i, k, s, p, dl in zip(size, kernel, stride, padding, dilation, strict=True)]
    if any(o <= 0 for o in out):
        raise RuntimeError(f"pooling: the output size {out} is too small (input {list(size)}, "
                           f"kernel {list(kernel)})")
    need = [(o - 1) * s + (k - 1) * dl + 1
            for o, s, k, dl in zip(out, stride, kernel, dilation, strict=True)]
    after = [max(0, n - i - p) for p, n, i in zip(padding, need, size, strict=True)]
    xp = _pad(x, padding, after, fill)
    return _windows(xp, kernel, stride, dilation, out), out


def _max_pool(d):
    name = f"max_pool{d}d_with_indices"

    def kernel(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        dtype, cdt = _compute_dtype(name, x)
        kernel, stride, padding, dilation = _pool_args(name, x, d, kernel_size, stride,
                                                       padding, dilation)
        lead, size = x.shape[:-d], x.shape[-d:]
        xb = _f(x, cdt).reshape((-1, *size))
        wins, out = _pool_windows(xb, kernel, stride, padding, dilation, ceil_mode, -np.inf)
        # One kernel position at a time over every output (NumPy is slow along the short
        # kernel axes): the first maximum wins, and NaN wins over anything (as on CPU).
        values = choice = None
        for k, offset in enumerate(_offsets(kernel)):
            v = wins[(Ellipsis, *offset)]
            if values is None:
                values, choice = v.copy(), np.zeros(v.shape, np.int64)
                continue
            better = v > values
            better |= v != v
            np.maximum(values, v, out=values)  # NaN-propagating, like the choice above
            np.copyto(choice, k, where=better)
        # The index of each maximum in the (unpadded) input plane, row-major: the index of
        # its window's first element plus that of the kernel position within the plane.
        base = np.zeros((), np.int64)
        delta = np.zeros((), np.int64)
        for a, (o, k, s, p, dl, n) in enumerate(zip(out, kernel, stride, padding, dilation,
                                                    size, strict=True)):
            shape = (-1,) + (1,) * (d - 1 - a)
            base = base * n + (np.arange(o) * s - p).reshape(shape)
            delta = delta * n + (np.arange(k) * dl).reshape(shape)
        index = base + delta.ravel()[choice]
        return (_like(_out(values.reshape(*lead, *out), dtype), x),
                _like(_out(index.reshape(*lead, *out), np.int64), x))

    return kernel


def _max_pool_backward(d):
    name = f"max_pool{d}d_with_indices_backward"

    def kernel(gy, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
        dtype, cdt = _compute_dtype(name, x)
        size = x.shape[-d:]
        plane = math.prod(size)
        b = math.prod(x.shape[:-d])
        gyb = _f(gy, cdt).reshape(b, -1)
        idx = indices.reshape(b, -1) + (np.arange(b) * plane)[:, None]
        gx = np.bincount(idx.ravel(), weights=gyb.ravel(), minlength=b * plane)
        return _like(_out(gx.reshape(x.shape), dtype), x)

    return kernel


def _avg_divisor(size, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                 dtype):
    """The divisor of every output of an average pool, shaped (*out)."""
    if divisor_override:
        return np.asarray(divisor_override, dtype)
    ones = np.ones((1, *size), dtype)
    if count_include_pad:
        # Padding counts, the overflow of ceil_mode does not.
        ones = np.pad(ones, [(0, 0)] + [(p, p) for p in padding], constant_values=1)
        wins, _ = _pool_windows(ones, kernel, stride, [0] * len(kernel), [1] * len(kernel),
                                ceil_mode, 0)
        # The windows are positioned in the padded frame; crop what the unpadded frame gives.
        count = wins.sum(axis=tuple(range(-len(kernel), 0)))[0]
        out = [_pool_out_size(i, k, s, p, 1, ceil_mode)
               for i, k, s, p in zip(size, kernel, stride, padding, strict=True)]
        return count[tuple(slice(None, o) for o in out)]
    wins, _ = _pool_windows(ones, kernel, stride, padding, [1] * len(kernel), ceil_mode, 0)
    return wins.sum(axis=tuple(range(-len(kernel), 0)))[0]


def _avg_pool(d):
    name = f"avg_pool{d}d"

    def kernel(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
        dtype, cdt = _compute_dtype(name, x)
        kernel, stride, padding, _ = _pool_args(name, x, d, kernel_size, stride, padding)
        lead, size = x.shape[:-d], x.shape[-d:]
        xb = _f(x, cdt).reshape((-1, *size))
        wins, out = _pool_windows(xb, kernel, stride, padding, [1] * d, ceil_mode, 0)
        total = wins.sum(axis=tuple(range(-d, 0)))
        div = _avg_divisor(size, kernel, stride, padding, ceil_mode, count_include_pad,
                           divisor_override, cdt)
        y = _out((total / div).reshape(*lead, *out), dtype)
        # CPU's 2-d kernel keeps a channels-last input's format; its 3-d one does not.
        return _like(y, x) if d == 2 else y

    return kernel


def _avg_pool_backward(d):
    name = f"avg_pool{d}d_backward"

    def kernel(gy, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override):
        dtype, cdt = _compute_dtype(name, x)
        kernel, stride, padding, _ = _pool_args(name, x, d, kernel_size, stride, padding)
        size = x.shape[-d:]
        out = gy.shape[-d:]
        div = _avg_divisor(size, kernel, stride, padding, ceil_mode, count_include_pad,
                           divisor_override, cdt)
        g = (_f(gy, cdt) / div).reshape((-1, *out))
        full = [max(i + 2 * p, (o - 1) * s + k)
                for i, p, o, s, k in zip(size, padding, out, stride, kernel, strict=True)]
        gx = np.zeros((g.shape[0], *full), cdt)
        for offset in itertools.product(*(range(k) for k in kernel)):
            index = (slice(None),) + tuple(slice(j, j + (o - 1) * s + 1, s)
                                           for j, o, s in zip(offset, out, stride, strict=True))
            gx[index] += g
        crop = (slice(None),) + tuple(slice(p, p + i) for p, i in zip(padding, size,
                                                                        strict=True))
        gx = _out(gx[crop].reshape(x.shape), dtype)
        return _like(gx, x) if d == 2 else gx

    return kernel


def _max_unpool(d):
    name = f"max_unpool{d}d"

    def kernel(x, indices, output_size, stride=None, padding=None):
        dtype, cdt = _compute_dtype(name, x)
        out = tuple(output_size)
        if x.shape != indices.shape or x.ndim not in (d + 1, d + 2):
            raise RuntimeError(f"{name}: expected input and indices of one shape, {d + 1}-d "
                               f"or {d + 2}-d, but got {list(x.shape)} and "
                               f"{list(indices.shape)}")
        plane = math.prod(out)
        b = math.prod(x.shape[:-d])
        idx = indices.reshape(b, -1)
        if idx.size and (idx.min() < 0 or idx.max() >= plane):
            bad = idx[(idx < 0) | (idx >= plane)].flat[0]
            raise RuntimeError(f"{name}: Found an invalid max index: {bad} (output volumes "
                               f"are of size {'x'.join(map(str, out))})")
        y = np.zeros((b, plane), x.dtype)
        np.put_along_axis(y, idx, x.reshape(b, -1), axis=1)
        return _like(_out(y.reshape(*x.shape[:-d], *out), dtype), x)

    return kernel


def _adaptive_bounds(i, o):
    return [((j * i) // o, -((-(j + 1) * i) // o)) for j in range(o)]


def _adaptive_avg_pool(d):
    name = f"_adaptive_avg_pool{d}d"

    def kernel(x, output_size):
        dtype, cdt = _compute_dtype(name, x)
        out = _ntuple(output_size, d)
        size = x.shape[-d:]
        xc = _f(x, cdt)
        y = np.empty((*x.shape[:-d], *out), cdt)
        for pos in itertools.product(*(range(o) for o in out)):
            box = tuple(slice(*_adaptive_bounds(i, o)[j])
                        for i, o, j in zip(size, out, pos, strict=True))
            y[(Ellipsis, *pos)] = xc[(Ellipsis, *box)].mean(axis=tuple(range(-d, 0)))
        # As avg_pool: CPU's 2-d kernel keeps a channels-last input's format.
        return _like(_out(y, dtype), x) if d == 2 else _out(y, dtype)

    return kernel


def _adaptive_max_pool(d):
    name = f"adaptive_max_pool{d}d"

    def kernel(x, output_size):
        dtype, cdt = _compute_dtype(name, x)
        out = _ntuple(output_size, d)
        size = x.shape[-d:]
        if x.ndim not in (d + 1, d + 2) or 0 in x.shape[-d:]:
            raise RuntimeError(f"{name}: expected a non-empty {d + 1}-d or {d + 2}-d input, "
                               f"but got an input of shape {list(x.shape)}")
        xc = _f(x, cdt)
        y = np.empty((*x.shape[:-d], *out), cdt)
        index = np.empty(y.shape, np.int64)
        for pos in itertools.product(*(range(o) for o in out)):
            bounds = [_adaptive_bounds(i, o)[j] for i, o, j in zip(size, out, pos, strict=True)]
            box = xc[(Ellipsis, *(slice(a, b) for a, b in bounds))]
            flat = box.reshape(*box.shape[:-d], -1)
            # The first NaN, else the first maximum (as on CPU).
            nan = np.isnan(flat)
            arg = np.where(nan.any(-1), nan.argmax(-1), flat.argmax(-1))
            y[(Ellipsis, *pos)] = np.take_along_axis(flat, arg[..., None], -1)[..., 0]
            offsets = np.unravel_index(arg, box.shape[-d:])
            flat_index = np.zeros(arg.shape, np.int64)
            for (a, _), off, n in zip(bounds, offsets, size, strict=True):
                flat_index = flat_index * n + a + off
            index[(Ellipsis, *pos)] = flat_index
        return _like(_out(y, dtype), x), _like(_out(index, np.int64), x)

    return kernel


def _adaptive_max_pool_backward(d):
    name = f"adaptive_max_pool{d}d_backward"

    def kernel(gy, x, indices):
        dtype, cdt = _compute_dtype(name, x)
        plane = math.prod(x.shape[-d:])
        b = math.prod(x.shape[:-d])
        idx = indices.reshape(b, -1) + (np.arange(b) * plane)[:, None]
        gx = np.bincount(idx.ravel(), weights=_f(gy, cdt).reshape(b, -1).ravel(),
                         minlength=b * plane)
        return _like(_out(gx.reshape(x.shape), dtype), x)

    return kernel


def _adaptive_avg_pool_backward(d):
    name = f"_adaptive_avg_pool{d}d_backward"

    def kernel(gy, x):
        dtype, cdt = _compute_dtype(name, x)
        out, size = gy.shape[-d:], x.shape[-d:]
        g = _f(gy, cdt)
        gx = np.zeros(x.shape, cdt)
        for pos in itertools.product(*(range(o) for o in out)):
            bounds = [_adaptive_bounds(i, o)[j] for i, o, j in zip(size, out, pos, strict=True)]
            count = math.prod(b - a for a, b in bounds)
            box = tuple(slice(a, b) for a, b in bounds)
            gx[(Ellipsis, *box)] += (g[(Ellipsis, *pos)] / count)[(Ellipsis,) + (None,) * d]
        return _like(_out(gx, dtype), x) if d == 2 else _out(gx, dtype)

    return kernel


# --- upsampling gradients ----------------------------------------------------------------


def _interpolation(mode, n_in, n_out, align_corners, scale, dt):
    """The (n_out, n_in) matrix of a 1-d interpolation as PyTorch's CPU kernels compute it
    (source coordinates in the kernels' arithmetic, ``dt``); upsampling is separable, so
    its gradient applies the transposes along each dimension."""
    a = np.zeros((n_out, n_in), dt)
    dst = np.arange(n_out)
    if n_out == 0 or n_in == 0:
        return a
    real = dst.astype(dt)
    if mode in ("nearest", "nearest-exact"):
        if n_out == n_in:
            index = dst
        elif mode == "nearest" and n_out == 2 * n_in:
            index = dst >> 1
        else:
            s = dt.type(1.0 / scale) if scale else dt.type(n_in) / dt.type(n_out)
            shift = dt.type(0.5 if mode == "nearest-exact" else 0.0)
            index = np.minimum(np.floor((real + shift) * s).astype(np.int64), n_in - 1)
        a[dst, index] = 1
        return a
    if align_corners:
        s = dt.type(n_in - 1) / dt.type(n_out - 1) if n_out > 1 else dt.type(0)
        src = s * real
    else:
        s = dt.type(1.0 / scale) if scale else dt.type(n_in) / dt.type(n_out)
        src = s * (real + dt.type(0.5)) - dt.type(0.5)
    if mode == "linear":
        if not align_corners:
            src = np.maximum(src, dt.type(0))
        i0 = np.floor(src).astype(np.int64)
        i1 = i0 + (i0 < n_in - 1)
        l1 = src - i0.astype(dt)
        np.add.at(a, (dst, i0), 1 - l1)
        np.add.at(a, (dst, i1), l1)
        return a
    # cubic, A = -0.75
    i = np.floor(src).astype(np.int64)
    t = src - i.astype(dt)
    c = dt.type(-0.75)

    def near(x):
        return ((c + 2) * x - (c + 3)) * x * x + 1

    def far(x):
        return ((c * x - 5 * c) * x + 8 * c) * x - 4 * c

    for k, w in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
        np.add.at(a, (dst, np.clip(i - 1 + k, 0, n_in - 1)), w)
    return a


def _upsample_backward(mode, d, align=True):
    name = f"upsample_{mode}{d}d_backward"

    def kernel(gy, output_size, input_size, *rest, **kw):
        dtype, cdt = _compute_dtype(name, gy)
        align_corners = rest[0] if align else False
        scales = list(rest[1:] if align else rest)
        scales += [kw.get(k) for k in ("scales_d", "scales_h", "scales_w", "scales") if k in kw]
        scales = (scales + [None] * d)[:d]
        g = _f(gy, cdt)
        for axis, (n_in, n_out, scale) in enumerate(zip(input_size[-d:], output_size, scales,
                                                        strict=True)):
            a = _interpolation(mode, n_in, n_out, align_corners, scale, np.dtype(cdt))
            axis += g.ndim - d
            g = np.moveaxis(np.tensordot(g, a, axes=([axis], [0])), -1, axis)
        return _out(g.reshape(input_size), dtype)

    return kernel


def _aa_filter(mode, x):
    """PIL's filters, as PyTorch's anti-aliased CPU kernels use them: the triangle for
    bilinear, Keys' cubic with a = -0.5 for bicubic."""
    x = np.abs(x)
    if mode == "bilinear":
        return np.where(x < 1, 1 - x, 0).astype(x.dtype)
    a = x.dtype.type(-0.5)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(x.dtype)


def _aa_interpolation(mode, n_in, n_out, align_corners, scale, dt):
    """The (n_out, n_in) matrix of a 1-d anti-aliased interpolation, with the bounds and
    normalized weights of PyTorch's CPU kernel (``_compute_indices_min_size_weights_aa``),
    computed in ``dt``."""
    a = np.zeros((n_out, n_in), dt)
    if n_out == 0 or n_in == 0:
        return a
    if align_corners:
        s = dt.type(n_in - 1) / dt.type(n_out - 1) if n_out > 1 else dt.type(0)
    else:
        s = dt.type(1.0 / scale) if scale else dt.type(n_in) / dt.type(n_out)
    interp_size = 2 if mode == "bilinear" else 4
    support = dt.type(interp_size * 0.5) * (s if s >= 1 else dt.type(1))
    max_size = int(math.ceil(support)) * 2 + 1
    invscale = dt.type(1) / s if s >= 1 else dt.type(1)
    for i in range(n_out):
        center = s * dt.type(i + 0.5)
        xmin = max(int(center - support + dt.type(0.5)), 0)
        xsize = min(max(min(int(center + support + dt.type(0.5)), n_in) - xmin, 0), max_size)
        j = np.arange(xsize)
        w = _aa_filter(mode, ((j + xmin).astype(dt) - center + dt.type(0.5)) * invscale)
        total = w.sum(dtype=dt)
        if total != 0:
            w = w / total
        a[i, xmin:xmin + xsize] = w
    return a


def _upsample_aa(mode):
    name = f"_upsample_{mode}2d_aa"

    def kernel(x, output_size, align_corners, scales_h=None, scales_w=None):
        dtype, cdt = _compute_dtype(name, x)
        if x.ndim != 4:
            raise RuntimeError(f"{name}: expected a 4-d input (N, C, H, W), got {x.ndim}-d")
        y = _f(x, cdt)
        # Width first, then height, as the CPU kernel does; a size that does not change is
        # not resampled.
        for axis, scale in ((3, scales_w), (2, scales_h)):
            n_in, n_out = x.shape[axis], output_size[axis - 2]
            if n_in != n_out:
                a = _aa_interpolation(mode, n_in, n_out, align_corners, scale, np.dtype(cdt))
                y = np.moveaxis(np.tensordot(y, a, axes=([axis], [1])), -1, axis)
        return _like(_out(y, dtype), x)

    return kernel


def _upsample_aa_backward(mode):
    name = f"_upsample_{mode}2d_aa_backward"

    def kernel(gy, output_size, input_size, align_corners, scales_h=None, scales_w=None):
        dtype, cdt = _compute_dtype(name, gy)
        g = _f(gy, cdt)
        for axis, scale in ((2, scales_h), (3, scales_w)):
            n_in, n_out = input_size[axis], output_size[axis - 2]
            if n_in != n_out:
                a = _aa_interpolation(mode, n_in, n_out, align_corners, scale, np.dtype(cdt))
                g = np.moveaxis(np.tensordot(g, a, axes=([axis], [0])), -1, axis)
        return _out(g.reshape(input_size), dtype)

    return kernel


# --- normalization ------------------------------------------------------------------------


def _bn_shape(x):
    return (1, -1) + (1,) * (x.ndim - 2)


def _batch_norm(op):
    def kernel(x, weight, bias, running_mean, running_var, training, momentum, eps):
        dtype, cdt = _compute_dtype(op, x)
        xc = _f(x, cdt)
        axes = (0, *range(2, x.ndim))
        shape = _bn_shape(x)
        if training:
            n = x.size // x.shape[1]
            mean = xc.mean(axis=axes)
            var = np.square(xc - mean.reshape(shape)).mean(axis=axes)
            invstd = 1 / np.sqrt(var + eps)
            if running_mean is not None:
                running_mean *= 1 - momentum
                running_mean += (momentum * mean).astype(running_mean.dtype)
            if running_var is not None:
                unbiased = var * (n / (n - 1)) if n > 1 else np.full_like(var, np.nan)
                running_var *= 1 - momentum
                running_var += (momentum * unbiased).astype(running_var.dtype)
            save_mean, save_invstd = mean, invstd
        else:
            mean = _f(running_mean, cdt)
            invstd = 1 / np.sqrt(_f(running_var, cdt) + eps)
            save_mean = save_invstd = np.empty((0,), cdt)
        scale = invstd if weight is None else invstd * _f(weight, cdt)
        y = (xc - mean.reshape(shape)) * scale.reshape(shape)
        if bias is not None:
            y += _f(bias, cdt).reshape(shape)
        stat = cdt if dtype not in _HALF else np.dtype(np.float32)
        y = _in_format(_out(y, dtype), _channels_last(x))
        return y, _out(save_mean, stat), _out(save_invstd, stat)

    return kernel


def _native_batch_norm_legit_no_stats(x, weight, bias, training, momentum, eps):
    return _batch_norm("_native_batch_norm_legit")(x, weight, bias, None, None, training,
                                                   momentum, eps)


def _native_batch_norm_legit_no_training(x, weight, bias, running_mean, running_var, momentum,
                                         eps):
    return _batch_norm("_native_batch_norm_legit_no_training")(
        x, weight, bias, running_mean, running_var, False, momentum, eps)


def _native_batch_norm_backward(gy, x, weight, running_mean, running_var, save_mean,
                                save_invstd, train, eps, output_mask):
    dtype, cdt = _compute_dtype("native_batch_norm_backward", x)
    xc, g = _f(x, cdt), _f(gy, cdt)
    axes = (0, *range(2, x.ndim))
    shape = _bn_shape(x)
    if train:
        mean, invstd = _f(save_mean, cdt), _f(save_invstd, cdt)
    else:
        mean, invstd = _f(running_mean, cdt), 1 / np.sqrt(_f(running_var, cdt) + eps)
    w = np.ones(x.shape[1], cdt) if weight is None else _f(weight, cdt)
    xhat = (xc - mean.reshape(shape)) * invstd.reshape(shape)
    sum_g = g.sum(axis=axes)
    sum_gx = (g * xhat).sum(axis=axes)
    wdt = dtype if weight is None else weight.dtype
    gx = gw = gb = None
    if output_mask[0]:
        scale = (w * invstd).reshape(shape)
        if train:
            n = x.size // x.shape[1]
            gx = (g - (sum_g / n).reshape(shape) - xhat * (sum_gx / n).reshape(shape)) * scale
        else:
            gx = g * scale
        gx = _in_format(_out(gx, dtype), _channels_last(x))
    if output_mask[1]:
        gw = _out(sum_gx, wdt)
    if output_mask[2]:
        gb = _out(sum_g, wdt)
    return gx, gw, gb


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    dtype, cdt = _compute_dtype("native_layer_norm", x)
    k = len(normalized_shape)
    axis = x.ndim - k
    if tuple(x.shape[axis:]) != tuple(normalized_shape):
        raise RuntimeError(f"native_layer_norm: expected an input with shape [*, "
                           f"{', '.join(map(str, normalized_shape))}], but got an input of "
                           f"size {list(x.shape)}")
    xc = _f(x, cdt)
    axes = tuple(range(axis, x.ndim))
    mean = xc.mean(axis=axes, keepdims=True)
    centered = xc - mean
    var = np.square(centered).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    y = centered * rstd
    if weight is not None:
        y *= _f(weight, cdt)
    if bias is not None:
        y += _f(bias, cdt)
    stat = np.dtype(np.float32) if dtype in _HALF else dtype
    return _out(y, dtype), _out(mean, stat), _out(rstd, stat)


def _native_layer_norm_backward(gy, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    dtype, cdt = _compute_dtype("native_layer_norm_backward", x)
    axis = x.ndim - len(normalized_shape)
    axes = tuple(range(axis, x.ndim))
    lead = tuple(range(axis))
    xc, g = _f(x, cdt), _f(gy, cdt)
    xhat = (xc - _f(mean, cdt)) * _f(rstd, cdt)
    gx = gw = gb = None
    if output_mask[0]:
        gxhat = g if weight is None else g * _f(weight, cdt)
        n = math.prod(normalized_shape)
        if n == 0:
            gx = np.zeros(x.shape, cdt)
        else:
            # CPU's algebra and order (layer_norm_kernel.cpp), so that rounding matches too.
            a, m = _f(rstd, cdt), _f(mean, cdt)
            scale = np.asarray(1, cdt) / np.asarray(n, cdt)
            ds = (gxhat * xc).sum(axis=axes, keepdims=True)
            db = gxhat.sum(axis=axes, keepdims=True)
            b = (db * m - ds) * a * a * a * scale
            c = -b * m - db * a * scale
            gx = a * g if weight is None else a * g * _f(weight, cdt)
            gx = gx + b * xc + c
        gx = _out(gx, dtype)
    if output_mask[1] and weight is not None:
        gw = _out((g * xhat).sum(axis=lead), weight.dtype)
    if output_mask[2] and bias is not None:
        gb = _out(g.sum(axis=lead), bias.dtype)
    return gx, gw, gb


def _native_group_norm(x, weight, bias, n, c, hxw, group, eps):
    dtype, cdt = _compute_dtype("native_group_norm", x)
    xg = _f(x, cdt).reshape(n, group, c // group * hxw)
    mean = xg.mean(axis=2, keepdims=True)
    var = np.square(xg - mean).mean(axis=2, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    y = ((xg - mean) * rstd).reshape(n, c, hxw)
    if weight is not None:
        y = y * _f(weight, cdt)[:, None]
    if bias is not None:
        y = y + _f(bias, cdt)[:, None]
    stat = np.dtype(np.float32) if dtype in _HALF else dtype
    return (_like(_out(y.reshape(x.shape), dtype), x), _out(mean.reshape(n, group), stat),
            _out(rstd.reshape(n, group), stat))


def _native_group_norm_backward(gy, x, mean, rstd, weight, n, c, hxw, group, output_mask):
    dtype, cdt = _compute_dtype("native_group_norm_backward", x)
    g = _f(gy, cdt).reshape(n, c, hxw)
    xc = _f(x, cdt).reshape(n, group, c // group * hxw)
    m, r = _f(mean, cdt).reshape(n, group, 1), _f(rstd, cdt).reshape(n, group, 1)
    xhat = ((xc - m) * r).reshape(n, c, hxw)
    gx = gw = gb = None
    if output_mask[0]:
        gxhat = g if weight is None else g * _f(weight, cdt)[:, None]
        gxhat = gxhat.reshape(n, group, c // group * hxw)
        xh = xhat.reshape(n, group, c // group * hxw)
        if gxhat.shape[2] == 0:
            gx = np.zeros(x.shape, cdt)
        else:
            gx = (gxhat - gxhat.mean(axis=2, keepdims=True)
                  - xh * (gxhat * xh).mean(axis=2, keepdims=True)) * r
        gx = _like(_out(gx.reshape(x.shape), dtype), x)
    if output_mask[1]:
        gw = _out((g * xhat).sum(axis=(0, 2)), dtype)
    if output_mask[2]:
        gb = _out(g.sum(axis=(0, 2)), dtype)
    return gx, gw, gb


# --- softmax and losses -------------------------------------------------------------------


def _softmax_dtype(op, x, half_to_float):
    dtype, cdt = _compute_dtype(op, x)
    if half_to_float:
        if dtype not in _HALF:
            raise RuntimeError(f"{op}: conversion from {dtype} to float32 is not supported "
                               "(half_to_float needs a float16 or bfloat16 input)")
        dtype = np.dtype(np.float32)
    return dtype, cdt


def _log_softmax(x, dim, half_to_float=False):
    if x.dtype in _FLOAT and x.ndim and x.size and x.flags.c_contiguous and not half_to_float:
        # The common case, with fewer passes: float32/64, in place on fresh arrays.
        # No guard for a row whose maximum is inf or -inf: CPU gives nan for all of it, as
        # x - m does (inf - inf, -inf + inf).
        shifted = x - x.max(axis=dim, keepdims=True)
        e = np.exp(shifted)
        lse = np.log(e.sum(axis=dim, keepdims=True))
        shifted -= lse
        return shifted
    dtype, cdt = _softmax_dtype("_log_softmax", x, half_to_float)
    xc = _f(x, cdt)
    if xc.ndim == 0:
        return _out(xc - xc, dtype)
    if xc.size == 0:
        return np.array(xc, dtype=dtype)
    shifted = xc - xc.max(axis=dim, keepdims=True)
    return _out(shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True)), dtype)


def _softmax(x, dim, half_to_float=False):
    dtype, cdt = _softmax_dtype("_softmax", x, half_to_float)
    xc = _f(x, cdt)
    if xc.ndim == 0:
        return _out(np.exp(xc - xc), dtype)
    if xc.size == 0:
        return np.array(xc, dtype=dtype)
    e = np.exp(xc - xc.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return _out(e, dtype)


def _log_softmax_backward_data(gy, y, dim, input_dtype):
    if gy.dtype in _FLOAT and y.dtype is gy.dtype and gy.ndim and gy.flags.c_contiguous:
        e = np.exp(y)
        e *= gy.sum(axis=dim, keepdims=True)
        return np.subtract(gy, e, out=e)
    _, cdt = _compute_dtype("_log_softmax_backward_data", y)
    g, yc = _f(gy, cdt), _f(y, cdt)
    if g.ndim == 0:
        return _out(g - np.exp(yc) * g, gy.dtype)
    return _out(g - np.exp(yc) * g.sum(axis=dim, keepdims=True), gy.dtype)


def _softmax_backward_data(gy, y, dim, input_dtype):
    _, cdt = _compute_dtype("_softmax_backward_data", y)
    g, yc = _f(gy, cdt), _f(y, cdt)
    gyy = g * yc
    if g.ndim == 0:
        return _out(gyy - yc * gyy, gy.dtype)
    return _out(gyy - yc * gyy.sum(axis=dim, keepdims=True), gy.dtype)


def _nll_target(op, x, target, ignore_index):
    """(classes along axis 1 of x as (N, C, *), target (N, *), mask of counted targets)."""
    if x.ndim == 1:
        x, target = x[None], np.asarray(target)[None]
    if target.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: expected a target of an integer dtype (Long), but got "
                           f"{target.dtype}")
    counted = target != ignore_index
    safe = np.where(counted, target, 0)
    c = x.shape[1]
    bad = (safe < 0) | (safe >= c)
    if bad.any():
        raise IndexError(f"{op}: Target {int(safe[bad].flat[0])} is out of bounds.")
    return x, safe, counted


def _nll_simple(x, target, weight, reduction, ignore_index):
    """Whether the common case applies: (N, C) float32/64 scores, no weights, a reduction,
    every target a class (so none is ``ignore_index``)."""
    if x.ndim != 2 or weight is not None or reduction == 0 or x.dtype not in _FLOAT \
            or target.ndim != 1 or target.dtype.kind not in "iu" or target.size == 0:
        return False
    lo, hi = target.min(), target.max()
    return 0 <= lo and hi < x.shape[1] and not lo <= ignore_index <= hi


def _nll_loss_forward(op):
    def kernel(x, target, weight, reduction, ignore_index):
        if _nll_simple(x, target, weight, reduction, ignore_index):
            n = x.shape[0]
            total = x[np.arange(n), target].sum()
            dtype = x.dtype.type
            if reduction == 1:
                return np.asarray(-total / dtype(n)), np.asarray(n, x.dtype)
            return np.asarray(-total), np.asarray(n, x.dtype)
        dtype, cdt = _compute_dtype(op, x)
        squeeze = x.ndim == 1
        xc, t, counted = _nll_target(op, _f(x, cdt), target, ignore_index)
        w = np.ones(xc.shape[1], cdt) if weight is None else _f(weight, cdt)
        wt = np.where(counted, w[t], 0).astype(cdt)
        picked = np.take_along_axis(xc, t[:, None], axis=1)[:, 0]
        losses = -picked * wt
        if reduction == 0:
            return _out(losses[0] if squeeze else losses, dtype), np.zeros((), dtype)
        total = wt.sum(dtype=cdt)
        out = losses.sum(dtype=cdt)
        if reduction == 1:
            out = out / total if total != 0 or out != 0 else np.asarray(np.nan, cdt)
        return np.asarray(out, dtype), np.asarray(total, dtype)

    return kernel


def _nll_loss_backward(op):
    def kernel(gy, x, target, weight, reduction, ignore_index, total_weight):
        if _nll_simple(x, target, weight, reduction, ignore_index):
            n = x.shape[0]
            gx = np.zeros(x.shape, x.dtype)
            g = -np.asarray(gy, x.dtype)
            gx[np.arange(n), target] = g / x.dtype.type(n) if reduction == 1 else g
            return gx
        dtype, cdt = _compute_dtype(op, x)
        squeeze = x.ndim == 1
        xc, t, counted = _nll_target(op, x, target, ignore_index)
        w = np.ones(xc.shape[1], cdt) if weight is None else _f(weight, cdt)
        wt = np.where(counted, w[t], 0).astype(cdt)
        g = _f(np.asarray(gy), cdt)
        if reduction == 0:
            g = g[None] if squeeze else g
            coef = -wt * g
        else:
            coef = -wt * g
            if reduction == 1:
                coef = coef / _f(np.asarray(total_weight), cdt)
        gx = np.zeros(xc.shape, cdt)
        np.put_along_axis(gx, t[:, None], coef[:, None], axis=1)
        return _out(gx[0] if squeeze else gx, dtype)

    return kernel


def _per_sample_grad(gy, reduction, n, cdt):
    """The gradient of each sample's loss, shaped (n, 1), from the reduced one's."""
    g = _f(np.asarray(gy), cdt)
    if reduction == 0:
        return g.reshape(n, 1)
    return np.full((n, 1), g / n if reduction == 1 else g, cdt)


def _multi_margin_loss_backward(gy, x, target, p, margin, weight=None, reduction=1):
    dtype, cdt = _compute_dtype("multi_margin_loss_backward", x)
    xc = _f(x, cdt).reshape(-1, x.shape[-1]) if x.ndim else _f(x, cdt).reshape(1, 1)
    n, c = xc.shape
    t = np.asarray(target).reshape(n)
    rows = np.arange(n)
    z = margin - xc[rows, t][:, None] + xc
    z[rows, t] = 0
    active = z > 0
    d = (active if p == 1 else 2 * z * active).astype(cdt) / c
    if weight is not None:
        d *= _f(weight, cdt)[t][:, None]
    d *= _per_sample_grad(gy, reduction, n, cdt)
    gx = d
    gx[rows, t] = -d.sum(axis=1)
    return _out(gx.reshape(x.shape), dtype)


def _multilabel_margin_loss_backward(gy, x, target, reduction, is_target):
    dtype, cdt = _compute_dtype("multilabel_margin_loss_backward", x)
    xc = _f(x, cdt).reshape(-1, x.shape[-1]) if x.ndim else _f(x, cdt).reshape(1, 1)
    n, c = xc.shape
    t = np.asarray(target).reshape(n, c)
    is_t = np.asarray(is_target).reshape(n, c) != 0
    g = _per_sample_grad(gy, reduction, n, cdt)
    gx = np.zeros((n, c), cdt)
    for row in range(n):
        labels = t[row]
        stop = np.flatnonzero(labels < 0)
        labels = labels[:stop[0] if stop.size else c]
        others = ~is_t[row]
        for y in labels:
            active = ((1 - xc[row, y] + xc[row]) > 0) & others
            gx[row] += active * (g[row, 0] / c)
            gx[row, y] -= active.sum() * (g[row, 0] / c)
    return _out(gx.reshape(x.shape), dtype)


def _mse_loss(x, target, reduction=1):
    dtype, cdt = _compute_dtype("mse_loss", x)
    loss = np.square(_f(x, cdt) - _f(target, cdt))
    if reduction == 1:
        loss = loss.mean()
    elif reduction == 2:
        loss = loss.sum()
    return _out(loss, dtype)


def _mse_loss_backward(gy, x, target, reduction):
    dtype, cdt = _compute_dtype("mse_loss_backward", x)
    g = 2 * (_f(x, cdt) - _f(target, cdt)) * _f(np.asarray(gy), cdt)
    if reduction == 1:
        g /= max(x.size, 1)
    return _out(np.broadcast_to(g, np.broadcast_shapes(x.shape, target.shape)), dtype)


# --- activations --------------------------------------------------------------------------


def _activation(op, fn, complex_too=False):
    """A kernel for ``fn`` over floating-point inputs (complex ones too with
    ``complex_too``, as CPU's kernel for ``op`` takes them), half types computed in float32."""
    def kernel(x, *args, **kwargs):
        if complex_too and x.dtype.kind == "c":
            return _elementwise(fn(x, *args, **kwargs), x, x.dtype)
        dtype, cdt = _compute_dtype(op, x)
        return _elementwise(fn(_f(x, cdt), *args, **kwargs), x, dtype)

    return kernel


def _activation_backward(op, fn, complex_too=False, input_first=False):
    """A kernel for the gradient ``fn`` of an activation, laid out as CPU's TensorIterator
    lays it out for the gradient and the input, in its order (``input_first``: the input's
    layout comes first, as in ``leaky_relu_backward``)."""
    def kernel(gy, x, *args, **kwargs):
        operands = (x, gy) if input_first else (gy, x)
        if complex_too and x.dtype.kind == "c":
            return _elementwise(fn(gy, x, *args, **kwargs), operands, x.dtype)
        dtype, cdt = _compute_dtype(op, x)
        return _elementwise(fn(_f(gy, cdt), _f(x, cdt), *args, **kwargs), operands, dtype)

    return kernel


def _erf(x):
    import scipy.special

    return scipy.special.erf(x)


def _gelu(x, *, approximate="none"):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + np.tanh(inner))
    return 0.5 * x * (1 + _erf(x * np.asarray(math.sqrt(0.5), x.dtype)))


def _gelu_backward(g, x, *, approximate="none"):
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        inner = k * (x + 0.044715 * x * x * x)
        t = np.tanh(inner)
        left = 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
        return g * (0.5 * (1 + t) + left)
    cdf = 0.5 * (1 + _erf(x * np.asarray(math.sqrt(0.5), x.dtype)))
    pdf = np.exp(-0.5 * x * x) * np.asarray(1 / math.sqrt(2 * math.pi), x.dtype)
    return g * (cdf + x * pdf)


def _hardtanh(x, min_val=-1, max_val=1):
    """CPU's ``hardtanh``: a clamp, of integers too (with the limits truncated to integers,
    non-negative for uint8), not of bool or complex."""
    dtype = x.dtype
    if dtype.kind == "b":
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if dtype.kind == "c":
        raise NotImplementedError("clamp is not supported for complex types")
    if dtype.kind in "iu":
        lo, hi = int(min_val), int(max_val)
        if dtype.kind == "u" and (lo < 0 or hi < 0):
            raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
        lo, hi = checked_scalar(lo, dtype), checked_scalar(hi, dtype)
    else:
        _, cdt = _compute_dtype("hardtanh", x)
        x, lo, hi = _f(x, cdt), np.asarray(min_val, cdt), np.asarray(max_val, cdt)
    return _elementwise(np.minimum(np.maximum(x, lo), hi), x, dtype)


def _hardtanh_backward(g, x, min_val, max_val):
    return np.where((x <= min_val) | (x >= max_val), np.zeros((), g.dtype), g)


def _leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, x * checked_scalar(negative_slope, x.dtype))


def _threshold(x, threshold, value):
    """CPU's ``threshold``: ``value`` where ``x <= threshold``, for every dtype but bool and
    complex; the scalars converted (checked) to the dtype, the threshold of float16 and
    bfloat16 to float, which they are compared in."""
    dtype = x.dtype
    if dtype.kind in "bc":
        raise unsupported("threshold", dtype)
    cdt = np.dtype(np.float32) if dtype in _HALF else dtype
    value = checked_scalar(value, dtype)
    return _elementwise(np.where(_f(x, cdt) <= checked_scalar(threshold, cdt), value, x), x, dtype)


def _hardsigmoid(x):
    return np.minimum(np.maximum(x + 3, 0), 6) / np.asarray(6, x.dtype)


def _hardswish(x):
    return x * np.minimum(np.maximum(x + 3, 0), 6) / np.asarray(6, x.dtype)


def _hardshrink(x, lambd=0.5):
    lambd = checked_scalar(lambd, x.dtype)
    return np.where((x >= -lambd) & (x <= lambd), np.zeros((), x.dtype), x)


def _leaky_relu_backward(g, x, negative_slope, self_is_result):
    return np.where(x > 0, g, g * np.asarray(negative_slope, g.dtype))


def _elu(x, alpha=1, scale=1, input_scale=1):
    neg = np.expm1(x * np.asarray(input_scale, x.dtype)) * np.asarray(alpha, x.dtype)
    return np.where(x > 0, x, neg) * np.asarray(scale, x.dtype)


def _elu_backward(gy, alpha, scale, input_scale, is_result, self_or_result):
    dtype, cdt = _compute_dtype("elu_backward", self_or_result)
    g, y = _f(gy, cdt), _f(self_or_result, cdt)
    if is_result:
        neg = g * input_scale * (y + alpha * scale)
    else:
        neg = g * input_scale * alpha * scale * np.exp(y * input_scale)
    return _elementwise(np.where(y > 0, g * scale, neg), (gy, self_or_result), dtype)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


def _silu_backward(g, x):
    s = _sigmoid(x)
    return g * s * (1 + x * (1 - s))


def _log_sigmoid_forward(x):
    """CPU's ``log_sigmoid_forward``: the result and its buffer, ``exp(-|x|)``, which the
    backward reads."""
    if x.dtype.kind != "f" and x.dtype not in _HALF:
        raise unsupported("log_sigmoid_cpu", x.dtype)
    dtype, cdt = _compute_dtype("log_sigmoid_forward", x)
    x = _f(x, cdt)
    z = np.exp(-np.abs(x))
    return _out(np.minimum(x, 0) - np.log1p(z), dtype), _out(z, dtype)


def _softplus(x, beta=1, threshold=20):
    bx = x * np.asarray(beta, x.dtype)
    return np.where(bx > threshold, x, np.log1p(np.exp(bx)) / np.asarray(beta, x.dtype))


def _softplus_backward(g, x, beta, threshold):
    bx = x * np.asarray(beta, x.dtype)
    z = np.exp(bx)
    return np.where(bx > threshold, g, g * z / (z + 1))


def _shrink_backward(g, x, lambd):
    return np.where((x >= -lambd) & (x <= lambd), np.zeros((), g.dtype), g)


def _sigmoid_backward(gy, y):
    if y.dtype.kind == "c":  # CPU's complex kernel: gy * conj((1 - y) * y)
        return _elementwise(gy * np.conj((1 - y) * y), (gy, y), y.dtype)
    dtype, cdt = _compute_dtype("sigmoid_backward", y)
    g, yc = _f(gy, cdt), _f(y, cdt)
    return _elementwise(g * (1 - yc) * yc, (gy, y), dtype)


def _tanh_backward(gy, y):
    if y.dtype.kind == "c":  # CPU's complex kernel: gy * conj(1 - y * y)
        return _elementwise(gy * np.conj(1 - y * y), (gy, y), y.dtype)
    dtype, cdt = _compute_dtype("tanh_backward", y)
    g, yc = _f(gy, cdt), _f(y, cdt)
    return _elementwise(g * (1 - yc * yc), (gy, y), dtype)


def _relu(x):
    if x.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    if x.dtype.kind == "c":
        raise NotImplementedError("clamp is not supported for complex types")
    return np.asarray(np.maximum(x, np.zeros((), x.dtype)))


def _threshold_backward(grad, self, threshold):
    """Laid out as CPU's TensorIterator lays it out for ``self`` and ``grad``, in that order."""
    keep = ~(self <= threshold)
    if grad.dtype.kind == "f" and np.isfinite(grad).all():
        # Four times faster than np.where, and the same where grad is finite.
        r = grad * keep
    else:
        r = np.where(keep, grad, np.zeros((), grad.dtype))
    return _elementwise(r, (self, grad), grad.dtype)


# --- segment_reduce, fractional max pooling, CTC loss ------------------------------------------


_SEGMENT_INITIAL = {"sum": 0.0, "mean": 0.0, "max": -math.inf, "min": math.inf, "prod": 1.0}


def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                    unsafe=False, initial=None):
    op = "segment_reduce()"
    if reduce not in _SEGMENT_INITIAL:
        raise RuntimeError(f"{op}: reduce argument must be either sum, mean, max, min or prod, "
                           f"got {reduce}")
    if indices is not None:
        raise RuntimeError(f"{op}: indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError(f"{op}: Either lengths or offsets must be defined.")
    dtype, cdt = _compute_dtype("segment_reduce", data)
    axis = axis % max(data.ndim, 1)
    if lengths is None:
        if offsets.ndim != axis + 1:
            raise RuntimeError(f"{op}: Expected all rows of offsets along axis to be defined")
        lengths = np.diff(offsets, axis=-1)
    if lengths.ndim != axis + 1:
        raise RuntimeError(f"{op}: Expected lengths to have {axis + 1} dimensions")
    if not unsafe:
        if (lengths < 0).any():
            raise RuntimeError(f"{op}: lengths contains negative value!")
        if (lengths.sum(axis=-1) != data.shape[axis]).any():
            raise RuntimeError(
                f"{op}: Expected all rows of lengths along axis to sum to "
                f"data.size(lengths.dim()-1) when !unsafe."
            )
    x = _f(data, cdt)
    start = 0.0 if initial is None else float(initial)
    out = np.empty(lengths.shape + data.shape[axis + 1:], cdt)
    ends = np.cumsum(lengths, axis=-1)
    for prefix in np.ndindex(lengths.shape[:-1]):
        for s, (n, end) in enumerate(zip(lengths[prefix], ends[prefix], strict=True)):
            seg = x[prefix + (slice(int(end - n), int(end)),)]
            first = np.full(seg.shape[1:], _SEGMENT_INITIAL[reduce] if initial is None else start,
                            cdt)
            if reduce in ("sum", "mean"):
                r = first + seg.sum(axis=0)
                if reduce == "mean":
                    r = r / n if n else (np.full_like(r, np.nan) if initial is None else r)
            elif reduce == "prod":
                r = first * seg.prod(axis=0)
            else:
                f = np.fmax if reduce == "max" else np.fmin
                r = f.reduce(np.concatenate([first[None], seg]), axis=0)
                r = np.where(np.isnan(seg).any(axis=0), np.nan, r) if n else r
            out[prefix + (s,)] = r
    return _out(out, dtype)


def _fractional_intervals(sample, size, out, pool, cdt):
    """CPU's ``generate_intervals``, in its arithmetic (the input's float dtype)."""
    seq = np.zeros(out, np.int64)
    if out > 1:
        sample = cdt.type(sample)
        alpha = cdt.type(size - pool) / cdt.type(out - 1)
        i = np.arange(out, dtype=cdt)
        seq = ((i + sample) * alpha).astype(np.int64) - np.int64(sample * alpha)
    if out > 0:
        seq[-1] = size - pool
    return seq


def _fractional_max_pool(d):
    name = f"fractional_max_pool{d}d"
    # The sample each spatial dimension uses: (W, H) in 2-d, (T, H, W) in 3-d.
    which = (1, 0) if d == 2 else (0, 1, 2)

    def kernel(self, kernel_size, output_size, random_samples):
        dtype, cdt = _compute_dtype(name, self)
        x = self if self.ndim == d + 2 else self[None]
        sizes = x.shape[2:]
        for k, (n, pool, out) in enumerate(zip(sizes, kernel_size, output_size, strict=True)):
            if out + pool - 1 > n:
                raise RuntimeError(
                    f"{name}(): pool size {pool} too large relative to input size {n} "
                    f"in dimension {k} (output size {out})"
                )
        out = np.empty(x.shape[:2] + tuple(output_size), dtype)
        indices = np.empty(out.shape, np.int64)
        window = int(np.prod(kernel_size))
        strides = np.cumprod((1,) + sizes[:0:-1])[::-1]
        samples = np.asarray(random_samples, cdt)
        for n, c in np.ndindex(x.shape[:2]):
            starts = [_fractional_intervals(samples[n, c, which[k]], sizes[k], output_size[k],
                                            kernel_size[k], cdt) for k in range(d)]
            wins = np.lib.stride_tricks.sliding_window_view(_f(x[n, c], cdt), kernel_size)
            wins = wins[np.ix_(*starts)].reshape(tuple(output_size) + (window,))
            nan = np.isnan(wins)
            best = np.where(nan.any(-1), window - 1 - np.argmax(nan[..., ::-1], -1),
                            np.argmax(np.where(nan, -np.inf, wins), -1))
            offsets = np.unravel_index(best, kernel_size)
            grid = np.meshgrid(*starts, indexing="ij")
            where = [g + o for g, o in zip(grid, offsets, strict=True)]
            out[n, c] = x[n, c][tuple(where)]
            indices[n, c] = sum(w * s for w, s in zip(where, strides, strict=True))
        if self.ndim != d + 2:
            out, indices = out[0], indices[0]
        return out, indices

    kernel.__name__ = name
    return kernel


def _fractional_max_pool_backward(d):
    def kernel(grad_output, self, kernel_size, output_size, indices):
        dtype, cdt = _compute_dtype(f"fractional_max_pool{d}d_backward", self)
        planes = int(np.prod(self.shape[:-d]))
        n = int(np.prod(self.shape[-d:]))
        grad = np.zeros((planes, n), cdt)
        m = int(np.prod(indices.shape[-d:]))
        g = _f(grad_output, cdt).reshape(planes, m)
        np.add.at(grad, (np.arange(planes)[:, None], indices.reshape(planes, m)), g)
        return _out(grad.reshape(self.shape), dtype)

    return kernel


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """CPU's forward (``ctc_loss_cpu_template``): the log-alpha recursion over time, in the
    input's dtype, per batch element; returns (negative log likelihood, log alpha)."""
    dtype, cdt = _compute_dtype("ctc_loss", log_probs)
    batched = log_probs.ndim == 3
    lp = _f(log_probs if batched else log_probs[:, None], cdt)
    n_t, batch, n_c = lp.shape
    input_lengths = [int(n) for n in np.reshape(input_lengths, -1)]
    target_lengths = [int(n) for n in np.reshape(target_lengths, -1)]
    if not 0 <= blank < n_c:
        raise RuntimeError("ctc_loss: blank must be in label range")
    if len(input_lengths) != batch or len(target_lengths) != batch:
        raise RuntimeError(
            f"ctc_loss: input_lengths and target_lengths must be of size batch_size {batch}"
        )
    flat = targets.ndim == 1 or not batched
    if flat and batched:
        starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
    max_s = max(target_lengths, default=0)
    log_alpha = np.full((batch, n_t, 2 * max_s + 1), -np.inf, cdt)
    nll = np.empty(batch, cdt)
    zero = cdt.type(0)
    for b in range(batch):
        n_in, n_s = input_lengths[b], target_lengths[b]
        if n_in > n_t:
            raise RuntimeError(
                f"ctc_loss: Expected input_lengths to have value at most {n_t}, but got value "
                f"{n_in} (while checking arguments for ctc_loss_cpu)"
            )
        if flat:
            tgt = (targets[starts[b]:starts[b] + n_s] if batched else targets[:n_s])
        else:
            tgt = targets[b, :n_s]
        ext = np.full(2 * n_s + 1, blank, np.int64)
        ext[1::2] = tgt
        skip = np.zeros(2 * n_s + 1, bool)
        skip[3::2] = ext[3::2] != ext[1:-2:2]
        la = log_alpha[b]
        if n_in > 0:
            la[0, 0] = lp[0, b, blank]
            if n_s > 0:
                la[0, 1] = lp[0, b, ext[1]]
        width = 2 * n_s + 1
        for t in range(1, n_in):
            prev = la[t - 1, :width]
            la1 = prev
            la2 = np.concatenate([[-np.inf], prev[:-1]]).astype(cdt)
            la3 = np.where(skip, np.concatenate([[-np.inf, -np.inf], prev[:-2]]), -np.inf)
            la3 = la3.astype(cdt)
            lamax = np.maximum(np.maximum(la1, la2), la3)
            lamax = np.where(lamax == -np.inf, zero, lamax)
            with np.errstate(divide="ignore"):
                total = np.log(np.exp(la1 - lamax) + np.exp(la2 - lamax) + np.exp(la3 - lamax))
            la[t, :width] = total + lamax + lp[t, b, ext]
        if n_in == 0:
            nll[b] = 0 if n_s == 0 else np.inf
        else:
            l1 = la[n_in - 1, 2 * n_s]
            l2 = la[n_in - 1, 2 * n_s - 1] if n_s > 0 else cdt.type(-np.inf)
            m = max(l1, l2)
            m = zero if m == -np.inf else m
            nll[b] = -(np.log(np.exp(l1 - m) + np.exp(l2 - m)) + m)
        if zero_infinity and nll[b] == np.inf:
            nll[b] = 0
    if not batched:
        nll, log_alpha = nll[0], log_alpha[0]
    return _out(nll, dtype), _out(log_alpha, dtype)


def _ctc_loss_tensor(log_probs, targets, input_lengths, target_lengths, blank=0,
                     zero_infinity=False):
    return _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)


def _grid_reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return np.zeros_like(x)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = np.abs(x - low)
    extra = np.fmod(x, span)
    flips = np.floor(x / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low).astype(x.dtype)


def _grid_source(coord, size, padding_mode, align_corners):
    """CPU's ``grid_sampler_compute_source_index``: a normalized grid coordinate as a
    position in an input dimension of ``size``."""
    one = coord.dtype.type(1)
    if align_corners:
        x = (coord + one) / 2 * (size - 1)
    else:
        x = ((coord + one) * size - one) / 2
    if padding_mode == 1:
        x = np.clip(x, 0, size - 1)
    elif padding_mode == 2:
        x = (_grid_reflect(x, 0, 2 * (size - 1)) if align_corners
             else _grid_reflect(x, -1, 2 * size - 1))
        x = np.clip(x, 0, size - 1)
    return x.astype(coord.dtype)


def _grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    op = "grid_sampler_3d"
    if interpolation_mode not in (0, 1):
        raise RuntimeError(f"{op}(): bicubic interpolation only supports 4D input")
    dtype, cdt = _compute_dtype(op, input)
    x = _f(input, cdt)
    g = _f(grid, cdt)
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    # Grid coordinates (x, y, z) index (W, H, D).
    src = [_grid_source(g[..., 2 - k], sizes[k], padding_mode, align_corners) for k in range(3)]
    batch = np.arange(n).reshape((n,) + (1,) * (g.ndim - 2))

    def gather(idx):
        inside = np.ones(idx[0].shape, bool)
        for i, size in zip(idx, sizes, strict=True):
            inside &= (i >= 0) & (i < size)
        safe = [np.clip(i, 0, size - 1) for i, size in zip(idx, sizes, strict=True)]
        values = x[(batch, slice(None), *safe)]  # (N, *out, C)
        return np.where(inside[..., None], values, cdt.type(0))

    if interpolation_mode == 1:
        out = gather([np.rint(s).astype(np.int64) for s in src])
    else:
        low = [np.floor(s) for s in src]
        out = np.zeros(g.shape[:-1] + (c,), cdt)
        for corner in itertools.product((0, 1), repeat=3):
            idx = [(lo + k).astype(np.int64) for lo, k in zip(low, corner, strict=True)]
            weight = None
            for d in (2, 1, 0):  # x, y, z: CPU's order of the factors
                w = (src[d] - low[d]) if corner[d] else (low[d] + 1 - src[d])
                weight = w if weight is None else weight * w
            out = out + gather(idx) * weight[..., None]
    return _out(np.moveaxis(out, -1, 1), dtype)


def _segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None,
                             axis=0, initial=None):
    """The gradient of :func:`_segment_reduce` as CPU gives it: each segment's gradient to its
    elements (divided by the length for mean, shared among the elements equal to the result
    for max and min, times the product of the others for prod)."""
    dtype, cdt = _compute_dtype("_segment_reduce_backward", data)
    axis = axis % max(data.ndim, 1)
    if lengths is None:
        lengths = np.diff(offsets, axis=-1)
    x, g, y = _f(data, cdt), _f(grad, cdt), _f(output, cdt)
    out = np.zeros(data.shape, cdt)
    ends = np.cumsum(lengths, axis=-1)
    for prefix in np.ndindex(lengths.shape[:-1]):
        for s, (n, end) in enumerate(zip(lengths[prefix], ends[prefix], strict=True)):
            if n == 0:
                continue
            where = prefix + (slice(int(end - n), int(end)),)
            seg, gs, ys = x[where], g[prefix + (s,)], y[prefix + (s,)]
            if reduce == "sum":
                r = np.broadcast_to(gs, seg.shape)
            elif reduce == "mean":
                r = np.broadcast_to(gs / n, seg.shape)
            elif reduce in ("max", "min"):
                hit = (seg == ys) | (np.isnan(seg) & np.isnan(ys))
                r = np.where(hit, gs / hit.sum(axis=0), 0)
            else:
                zeros = (seg == 0).sum(axis=0)
                others = np.where(seg == 0, 1, seg).prod(axis=0)
                if initial is not None:
                    others = others * cdt.type(initial)
                r = np.where(zeros == 0, gs * ys / np.where(seg == 0, 1, seg),
                             np.where((zeros == 1) & (seg == 0), gs * others, 0))
            out[where] = r
    return _out(out, dtype)


KERNELS = {
    "_segment_reduce_backward": _segment_reduce_backward,
    "grid_sampler_3d": _grid_sampler_3d,
    "_ctc_loss": _ctc_loss,
    "_ctc_loss.Tensor": _ctc_loss_tensor,
    "fractional_max_pool2d": _fractional_max_pool(2),
    "fractional_max_pool3d": _fractional_max_pool(3),
    "fractional_max_pool2d_backward": _fractional_max_pool_backward(2),
    "fractional_max_pool3d_backward": _fractional_max_pool_backward(3),
    "segment_reduce": _segment_reduce,
    "relu": _relu,
    "threshold_backward": _threshold_backward,
    "convolution": _convolution,
    "convolution_backward": _convolution_backward,
    "max_pool2d_with_indices": _max_pool(2),
    "max_pool2d_with_indices_backward": _max_pool_backward(2),
    "max_pool3d_with_indices": _max_pool(3),
    "max_pool3d_with_indices_backward": _max_pool_backward(3),
    "avg_pool2d": _avg_pool(2),
    "avg_pool2d_backward": _avg_pool_backward(2),
    "avg_pool3d": _avg_pool(3),
    "avg_pool3d_backward": _avg_pool_backward(3),
    "_adaptive_avg_pool2d": _adaptive_avg_pool(2),
    "_adaptive_avg_pool2d_backward": _adaptive_avg_pool_backward(2),
    "_adaptive_avg_pool3d": _adaptive_avg_pool(3),
    "_adaptive_avg_pool3d_backward": _adaptive_avg_pool_backward(3),
    "adaptive_max_pool2d": _adaptive_max_pool(2),
    "adaptive_max_pool2d_backward": _adaptive_max_pool_backward(2),
    "adaptive_max_pool3d": _adaptive_max_pool(3),
    "adaptive_max_pool3d_backward": _adaptive_max_pool_backward(3),
    "upsample_nearest1d_backward": _upsample_backward("nearest", 1, align=False),
    "upsample_nearest2d_backward": _upsample_backward("nearest", 2, align=False),
    "upsample_nearest3d_backward": _upsample_backward("nearest", 3, align=False),
    "_upsample_nearest_exact1d_backward": _upsample_backward("nearest-exact", 1, align=False),
    "_upsample_nearest_exact2d_backward": _upsample_backward("nearest-exact", 2, align=False),
    "_upsample_nearest_exact3d_backward": _upsample_backward("nearest-exact", 3, align=False),
    "upsample_linear1d_backward": _upsample_backward("linear", 1),
    "upsample_bilinear2d_backward": _upsample_backward("linear", 2),
    "upsample_trilinear3d_backward": _upsample_backward("linear", 3),
    "upsample_bicubic2d_backward": _upsample_backward("cubic", 2),
    "_upsample_bilinear2d_aa": _upsample_aa("bilinear"),
    "_upsample_bicubic2d_aa": _upsample_aa("bicubic"),
    "_upsample_bilinear2d_aa_backward": _upsample_aa_backward("bilinear"),
    "_upsample_bicubic2d_aa_backward": _upsample_aa_backward("bicubic"),
    "max_unpool2d": _max_unpool(2),
    "max_unpool3d": _max_unpool(3),
    "native_batch_norm": _batch_norm("native_batch_norm"),
    "_native_batch_norm_legit": _batch_norm("_native_batch_norm_legit"),
    "_native_batch_norm_legit.no_stats": _native_batch_norm_legit_no_stats,
    "_native_batch_norm_legit_no_training": _native_batch_norm_legit_no_training,
    "native_batch_norm_backward": _native_batch_norm_backward,
    "native_layer_norm": _native_layer_norm,
    "native_layer_norm_backward": _native_layer_norm_backward,
    "native_group_norm": _native_group_norm,
    "native_group_norm_backward": _native_group_norm_backward,
    "_softmax": _softmax,
    "_log_softmax": _log_softmax,
    "_softmax_backward_data": _softmax_backward_data,
    "_log_softmax_backward_data": _log_softmax_backward_data,
    "nll_loss_forward": _nll_loss_forward("nll_loss_forward"),
    "nll_loss_backward": _nll_loss_backward("nll_loss_backward"),
    "nll_loss2d_forward": _nll_loss_forward("nll_loss2d_forward"),
    "nll_loss2d_backward": _nll_loss_backward("nll_loss2d_backward"),
    "multi_margin_loss_backward": _multi_margin_loss_backward,
    "multilabel_margin_loss_backward": _multilabel_margin_loss_backward,
    "mse_loss": _mse_loss,
    "mse_loss_backward": _mse_loss_backward,
    "gelu": _activation("gelu", _gelu),
    "gelu_backward": _activation_backward("gelu_backward", _gelu_backward),
    "hardtanh": _hardtanh,
    "hardtanh_backward": _activation_backward("hardtanh_backward", _hardtanh_backward),
    "leaky_relu": _activation("leaky_relu", _leaky_relu),
    "threshold": _threshold,
    "hardsigmoid": _activation("hardsigmoid", _hardsigmoid),
    "hardswish": _activation("hardswish", _hardswish),
    "hardshrink": _activation("hardshrink", _hardshrink),
    "leaky_relu_backward": _activation_backward("leaky_relu_backward", _leaky_relu_backward,
                                                input_first=True),
    "elu": _activation("elu", _elu),
    "elu_backward": _elu_backward,
    "log_sigmoid_forward": _log_sigmoid_forward,
    "silu": _activation("silu", _silu, complex_too=True),
    "silu_backward": _activation_backward("silu_backward", _silu_backward, complex_too=True),
    "softplus": _activation("softplus", _softplus),
    "softplus_backward": _activation_backward("softplus_backward", _softplus_backward),
    "softshrink_backward": _activation_backward("softshrink_backward", _shrink_backward),
    "hardshrink_backward": _activation_backward("hardshrink_backward", _shrink_backward),
    "sigmoid_backward": _sigmoid_backward,
    "tanh_backward": _tanh_backward,
}
