r"""Payload tensors: plain ``torch.Tensor`` objects whose device data is any Python object."""

import torch

from torch_acc import _C

__all__ = ["describe", "layout", "payload", "payload_nbytes", "wrap"]


#: ``wrap(payload, *, shape=None, dtype=None, device=None, strides=None)``, a tensor whose data
#: is ``payload`` (see its docstring). Defined in C++ (``csrc/acc/Module.cpp``) with no Python
#: frame on the way: making a tensor around existing data is meant to cost less than
#: ``torch.empty``.
wrap = _C.wrap

#: ``payload_nbytes(tensor)``: the bytes the payload of a device tensor spans, by its own
#: layout and dtype (0 while it has none); what a storage of the tensor would hold (C++).
payload_nbytes = _C.payload_nbytes


def payload(tensor: torch.Tensor):
    r"""The device data of a tensor made by :func:`wrap` (or a kernel), as kernels see it.

    For a view this is what the backend's ``as_strided`` makes of the base's payload.
    """
    return _C.payload(tensor)


def layout(obj, device=None) -> torch.Tensor | None:
    r"""A tensor over the payload ``obj`` with the payload's own shape, dtype and strides, as
    the C++ core reads them; None if ``obj`` is no payload (it has no shape or dtype)."""
    try:
        return _C.wrap(obj, device=device)
    except Exception:  # noqa: BLE001 - whatever the object lacks, it is not a payload
        return None


def describe(obj) -> str:
    r"""What a backend function returned (a payload, a tensor, anything), for an error
    message."""
    if obj is None:
        return "None"
    if isinstance(obj, torch.Tensor):
        return f"a {obj.device.type} torch.Tensor of shape {tuple(obj.shape)} and dtype {obj.dtype}"
    kind = type(obj)
    name = kind.__qualname__ if kind.__module__ == "builtins" else (
        f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
    )
    try:
        shape, dtype = tuple(obj.shape), obj.dtype
    except Exception:  # noqa: BLE001 - not array-like: its type is all there is to say
        return f"a {name}"
    return f"a {name} of shape {shape} and dtype {dtype}"
