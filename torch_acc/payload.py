r"""Payload tensors: plain ``torch.Tensor`` objects whose device data is any Python object."""

import torch

from torch_acc import _C

__all__ = ["payload", "wrap"]


#: ``wrap(payload, *, shape=None, dtype=None, device=None, strides=None)``, a tensor whose data
#: is ``payload`` (see its docstring). Defined in C++ (``csrc/acc/Module.cpp``) with no Python
#: frame on the way: making a tensor around existing data is meant to cost less than
#: ``torch.empty``.
wrap = _C.wrap


def payload(tensor: torch.Tensor):
    r"""The device data of a tensor made by :func:`wrap` (or a kernel), as kernels see it.

    For a view this is what the backend's ``as_strided`` makes of the base's payload.
    """
    return _C.payload(tensor)
