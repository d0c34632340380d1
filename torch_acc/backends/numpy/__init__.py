r"""The reference backend: device ``"npy"``, whose device data are NumPy arrays.

Tensors on ``npy`` are plain ``torch.Tensor`` objects whose payload is a NumPy array; the
kernels below take and return arrays (registered through the library module). Views share
their base's array, so writes through a view show in the base. Operators without a kernel
here run through PyTorch's decompositions.

Example::

    >>> # xdoctest: +SKIP
    >>> import torch
    >>> from torch_acc.backends import numpy as npy_backend
    >>> npy_backend.setup()
    'npy'
    >>> (torch.ones(2, device="npy") * 3).sum()
    tensor(6., device='npy:0')
"""

import sys

import torch

from torch_acc import _compat, library, registry
from torch_acc._C import PrivateUse1Hooks
from torch_acc.backend_registration import setup_privateuseone_for_python_backend

from . import (
    _attention,
    _common,
    _fft,
    _index,
    _linalg,
    _nn,
    _pointwise,
    _random,
    _reduce,
    _rnn,
    _shape,
    _shared,
    _training,
)
from ._common import DEVICE
from ._foreach import foreach_kernels
from ._random import NumpyGenerator

__all__ = ["DEVICE", "NumpyGenerator", "register", "setup"]


def _kernels() -> dict:
    """Every module's kernels; an operator registered by two modules is a mistake."""
    kernels: dict = {}
    modules = (_shape, _index, _pointwise, _reduce, _linalg, _fft, _nn, _random, _rnn,
               _attention, _training)
    for module in modules:
        twice = kernels.keys() & module.KERNELS.keys()
        if twice:
            raise RuntimeError(
                f"{module.__name__} registers kernels another module of the {DEVICE} backend "
                f"registers too: {', '.join(sorted(twice))}"
            )
        kernels.update(module.KERNELS)
    kernels.update(foreach_kernels(kernels))
    return kernels


class _Hooks(PrivateUse1Hooks):
    def get_new_generator(self, device_index: int) -> NumpyGenerator:
        return NumpyGenerator()

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]


_registered = False


def setup() -> str:
    """Set up the ``npy`` device and register its kernels (idempotent). Returns ``"npy"``."""
    global _registered
    setup_privateuseone_for_python_backend(DEVICE, hook=_Hooks())
    if not _registered:
        library.impl_payload(
            as_strided=_common.as_strided,
            to_cpu=_common.to_cpu,
            from_cpu=_common.from_cpu,
            copy_into=_common.copy_into,
        )
        for name, kernel in _kernels().items():
            if not _compat.aten_op_removed(name):
                library.impl(name, kernel)
        _training.register_storage_kernels()
        if torch.distributed.is_available():
            from torch_acc import distributed

            distributed.register(DEVICE, host_view=_common.host_view)
        library.impl_ipc(_shared.share, _shared.rebuild, is_shared=_shared.is_shared)
        library.declare_fork_safe()
        _registered = True
    return DEVICE


def register() -> None:
    """Record the backend, bind nothing: what the ``torch.backends`` entry point
    (``torch_acc_autoload.npy``) calls."""
    registry.autoload(DEVICE, sys.modules[__name__])
