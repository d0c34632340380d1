r"""Payload tensors: plain ``torch.Tensor`` objects whose device data is any Python object."""

import torch

from torch_acc import _C

__all__ = ["payload", "wrap"]


def _device_index(device) -> int:
    name = torch._C._get_privateuse1_backend_name()
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != name:
        raise ValueError(f"expected a {name} device, but got {device}")
    return _C.current_device() if device.index is None else device.index


def wrap(payload, *, shape=None, dtype=None, device=None, strides=None) -> torch.Tensor:
    r"""A tensor on the Python backend's device whose data is ``payload``.

    ``shape`` and ``dtype`` default to ``payload.shape`` and ``payload.dtype`` (a NumPy or
    torch dtype); ``strides`` (in elements) to ``payload.strides`` (in bytes, NumPy-style)
    or contiguous. ``device`` defaults to the current device. The result is a plain
    ``torch.Tensor``; storage access on it raises an error suggesting ``.cpu()``.

    Example::

        >>> # xdoctest: +SKIP
        >>> t = wrap(np.ones((2, 3), np.float32))
        >>> t.shape, t.dtype, type(t) is torch.Tensor
        (torch.Size([2, 3]), torch.float32, True)
    """
    if shape is not None:
        shape = [int(s) for s in shape]
    if strides is not None:
        strides = [int(s) for s in strides]
    return _C.wrap(payload, shape, dtype, _device_index(device), strides)


def payload(tensor: torch.Tensor):
    r"""The device data of a tensor made by :func:`wrap` (or a kernel), as kernels see it.

    For a view this is what the backend's ``as_strided`` makes of the base's payload.
    """
    return _C.payload(tensor)
