"""Payloads in shared memory, for ``torch.multiprocessing`` (``library.impl_ipc``).

``share`` copies a dense array once into an anonymous shared memory file (``memfd_create``);
from then on the tensor reads that array. The file is sent as a file descriptor, duplicated
for the receiver as ``torch.multiprocessing`` sends CPU storages (``DupFd``), so the memory
lives as long as any process maps it: the sending process must run until the tensor is
received, but need not hold the tensor. Arrays with gaps or no elements, and platforms
without ``memfd_create``, are sent as CPU copies.
"""

import mmap
import multiprocessing.reduction
import os
import weakref

import numpy as np

#: id(array) -> the :class:`Handle` of the shared memory an array of this process lies in
#: (made by :func:`share` or mapped by :func:`rebuild`), whose file descriptor is closed when
#: the array is freed. One handle per array: pickled once per message (the pickler's memo),
#: its descriptor is passed once.
_handles: dict[int, "Handle"] = {}


def _close(key: int, fd: int) -> None:
    _handles.pop(key, None)
    os.close(fd)


def _over(fd: int, dtype, shape, strides) -> np.ndarray:
    """An array over the shared memory file ``fd``, which it keeps open while it lives."""
    size = os.fstat(fd).st_size
    array = np.ndarray(shape, dtype, buffer=mmap.mmap(fd, size), strides=strides)
    _handles[id(array)] = Handle(fd, dtype, shape, strides)
    weakref.finalize(array, _close, id(array), fd)
    return array


class Handle:
    """What is sent for a shared array: its memory's file descriptor, duplicated for the
    receiver when pickled, and its layout."""

    def __init__(self, fd: int, dtype, shape, strides):
        self.fd, self.dtype, self.shape, self.strides = fd, dtype, shape, strides

    def __reduce__(self):
        dup = multiprocessing.reduction.DupFd(self.fd)
        return (_received, (dup, self.dtype, self.shape, self.strides))


def _received(dup, dtype, shape, strides) -> np.ndarray:
    return _over(dup.detach(), dtype, shape, strides)


def share(payload):
    """``(handle, payload in shared memory)``, or None to send a CPU copy."""
    array = payload
    if not isinstance(array, np.ndarray) or not hasattr(os, "memfd_create"):
        return None
    handle = _handles.get(id(array))
    if handle is None:
        if array.nbytes == 0 or not (array.flags.c_contiguous or array.flags.f_contiguous):
            return None
        fd = os.memfd_create("torch_acc_npy")
        try:
            os.ftruncate(fd, array.nbytes)
        except OSError:
            os.close(fd)
            raise
        shared = _over(fd, array.dtype, array.shape, array.strides)
        np.copyto(shared, array)
        array = shared
        handle = _handles[id(array)]
    return handle, array


def rebuild(handle):
    """The array over the shared memory ``handle`` (unpickled) maps in this process."""
    if not isinstance(handle, np.ndarray) or id(handle) not in _handles:
        raise TypeError(f"expected an array received in shared memory, but got {type(handle)}")
    return handle


def is_shared(payload) -> bool:
    return isinstance(payload, np.ndarray) and id(payload) in _handles
