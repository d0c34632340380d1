"""FFT kernels of the ``npy`` backend: the three ATen primitives ``torch.fft`` reduces to.

``normalization`` is ATen's ``fft_norm_mode``: 0 no scaling, 1 by ``1/sqrt(n)``, 2 by
``1/n``, n the product of the transformed sizes (of the signal, for ``_fft_c2r``).
"""

import math

import numpy as np

from ._common import DEVICE

_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}


def _complex_of(op: str, a) -> np.dtype:
    dtype = a.dtype
    if dtype.kind == "c":
        return dtype
    if dtype in _COMPLEX:
        return np.dtype(_COMPLEX[dtype])
    raise RuntimeError(
        f"{op}: unsupported dtype {dtype} on the {DEVICE} backend (float32/float64 and "
        "complex64/complex128 only)"
    )


def _wide(a):
    """``a`` in double precision: NumPy's single-precision FFT rounds differently from
    PyTorch's (MKL), double then rounded back agrees closer."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64, copy=False)


def _scale(value, normalization: int, n: int):
    if normalization == 1:
        return value / math.sqrt(n) if n else value
    if normalization == 2:
        return value / n if n else value
    return value


def _axes(a, dim) -> tuple:
    return tuple(d % a.ndim for d in dim)


# PyTorch's CPU (MKL) FFT writes its result in a layout of its own: the batch dims first,
# in the input's stride order, then the transformed dims in the order it transforms them.
# The results here take the same strides.


def _elem_strides(a) -> list:
    return [s // a.itemsize for s in a.strides]


def _sort_dims(strides, dims, exclude_last: bool = False) -> list:
    dims = list(dims)
    head = dims[:-1] if exclude_last else dims
    head = sorted(head, key=lambda d: -strides[d])
    return head + dims[-1:] if exclude_last else head


def _partition(perm: list, keep) -> int:
    """libstdc++'s ``std::partition`` (bidirectional): reorders ``perm`` in place."""
    first, last = 0, len(perm)
    while True:
        while True:
            if first == last:
                return first
            if keep(perm[first]):
                first += 1
            else:
                break
        last -= 1
        while True:
            if first == last:
                return first
            if not keep(perm[last]):
                last -= 1
            else:
                break
        perm[first], perm[last] = perm[last], perm[first]
        first += 1


def _layout(in_strides, out_sizes, dims) -> list:
    ndim = len(out_sizes)
    perm = list(range(ndim))
    end = _partition(perm, lambda d: d not in dims)
    batch = sorted(perm[:end], key=lambda d: -in_strides[d])
    sizes = [math.prod(out_sizes[d] for d in batch)] + [out_sizes[d] for d in dims]
    contiguous = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        contiguous[i] = contiguous[i + 1] * max(sizes[i + 1], 1)
    strides = [0] * ndim
    numel = 1
    for d in reversed(batch):
        strides[d] = numel * contiguous[0]
        numel *= out_sizes[d]
    for j, d in enumerate(dims):
        strides[d] = contiguous[1 + j]
    return strides


def _strided(value, dtype, strides) -> np.ndarray:
    """``value`` (cast to ``dtype``) in a new array with these element strides."""
    value = np.asarray(value)
    dtype = np.dtype(dtype)
    buf = np.empty((value.size,), dtype)
    out = np.lib.stride_tricks.as_strided(
        buf, value.shape, tuple(s * dtype.itemsize for s in strides)
    )
    out[...] = value
    return out


def _fft_c2c(self, dim, normalization, forward):
    dtype = _complex_of("_fft_c2c", self)
    axes = _axes(self, dim)
    if not axes:
        return self.astype(dtype, copy=True)
    n = math.prod(self.shape[d] for d in axes)
    # norm="backward" is unscaled forward; norm="forward" is the unscaled inverse.
    if forward:
        value = np.fft.fftn(_wide(self), axes=axes, norm="backward")
    else:
        value = np.fft.ifftn(_wide(self), axes=axes, norm="forward")
    strides = _layout(_elem_strides(self), self.shape, _sort_dims(_elem_strides(self), axes))
    return _strided(_scale(value, normalization, n), dtype, strides)


def _fft_r2c(self, dim, normalization, onesided):
    dtype = _complex_of("_fft_r2c", self)
    axes = _axes(self, dim)
    n = math.prod(self.shape[d] for d in axes)
    if onesided:
        value = np.fft.rfftn(_wide(self), axes=axes, norm="backward")
    else:
        value = np.fft.fftn(_wide(self), axes=axes, norm="backward")
    in_strides = _elem_strides(self)
    strides = _layout(in_strides, value.shape, _sort_dims(in_strides, axes, exclude_last=True))
    return _strided(_scale(value, normalization, n), dtype, strides)


def _fft_c2r(self, dim, normalization, last_dim_size):
    dtype = _complex_of("_fft_c2r", self)
    real = np.empty((), dtype).real.dtype
    axes = _axes(self, dim)
    a = self
    if len(axes) > 1:
        # As PyTorch: a C2C inverse over the other dims, then a 1-D C2R transform.
        a = _fft_c2c(self, axes[:-1], normalization, False)
    last = axes[-1]
    value = np.fft.irfft(_wide(a), n=last_dim_size, axis=last, norm="forward")
    strides = _layout(_elem_strides(a), value.shape, [last])
    return _strided(_scale(value, normalization, last_dim_size), real, strides)


KERNELS = {
    "_fft_c2c": _fft_c2c,
    "_fft_r2c": _fft_r2c,
    "_fft_c2r": _fft_c2r,
}
