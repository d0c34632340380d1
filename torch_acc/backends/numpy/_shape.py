"""Creation, joining and indexing kernels of the ``npy`` backend."""

import numpy as np
import torch

from ._common import np_dtype, NUMPY_TO_TORCH, result_type


def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return np.empty(tuple(size), np_dtype(dtype or torch.get_default_dtype()))


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = np.dtype(np_dtype(dtype or torch.get_default_dtype()))
    extent = sum((s - 1) * st for s, st in zip(size, stride, strict=True)) + 1
    flat = np.empty((max(extent, 0),), dtype)
    return np.lib.stride_tricks.as_strided(
        flat, tuple(size), tuple(s * dtype.itemsize for s in stride)
    )


def _arange_out(start, end, step=1, *, out):
    return np.arange(start, end, step, dtype=out.dtype)


def _cat(tensors, dim=0):
    dtype = result_type(*((NUMPY_TO_TORCH[t.dtype], False) for t in tensors))
    return np.concatenate(tensors, axis=dim, dtype=dtype)


KERNELS = {
    "empty.memory_format": _empty,
    "empty_strided": _empty_strided,
    "arange.start_out": _arange_out,
    "cat": _cat,
}
