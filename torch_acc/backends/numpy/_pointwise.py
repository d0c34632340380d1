"""Elementwise kernels of the ``npy`` backend: arithmetic, math functions, comparisons."""

import numpy as np
import torch

from ._common import kind, np_dtype, promoted, result_type


def _add(a, b, *, alpha=1):
    return promoted(a + alpha * b if alpha != 1 else a + b, a, b)


def _sub(a, b, *, alpha=1):
    return promoted(a - alpha * b if alpha != 1 else a - b, a, b)


def _mul(a, b):
    return promoted(a * b, a, b)


def _div(a, b):
    out = np.true_divide(a, b)
    dtype = result_type(kind(a), kind(b))
    if dtype.kind in "biu":
        dtype = np.dtype(np_dtype(torch.get_default_dtype()))
    return np.asarray(out, dtype=dtype)


def _inplace(op):
    def kernel(self, other, *, alpha=1):
        value = op(self, other, alpha=alpha) if alpha != 1 else op(self, other)
        np.copyto(self, value, casting="unsafe")
        return self

    return kernel


def _fill(self, value):
    self[...] = value
    return self


def _zero(self):
    self[...] = 0
    return self


KERNELS = {
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
    "gt.Scalar": lambda self, other: np.asarray(self > other),
    "fill_.Scalar": _fill,
    "zero_": _zero,
}
