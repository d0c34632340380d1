"""Reductions and linear algebra of the ``npy`` backend."""

import numpy as np
import torch

from ._common import kind, np_dtype, NUMPY_TO_TORCH, result_type


def _sum(self, dim=None, keepdim=False, *, dtype=None):
    axis = None if not dim else tuple(dim)
    if dtype is None:
        dtype = NUMPY_TO_TORCH[self.dtype]
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = torch.int64
    return np.asarray(np.sum(self, axis=axis, keepdims=keepdim, dtype=np_dtype(dtype)))


def _mean(self, dim=None, keepdim=False, *, dtype=None):
    axis = None if not dim else tuple(dim)
    dtype = self.dtype if dtype is None else np_dtype(dtype)
    return np.asarray(np.mean(self, axis=axis, keepdims=keepdim, dtype=dtype))


def _mm(a, b):
    # NumPy multiplies bfloat16 matrices into float32.
    return np.matmul(a, b).astype(result_type(kind(a), kind(b)), copy=False)


KERNELS = {
    "sum.dim_IntList": _sum,
    "mean.dim": _mean,
    "mm": _mm,
}
