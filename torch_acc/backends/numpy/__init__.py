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

import torch

from torch_acc import library, versions
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.device_module import PrivateUse1Hooks

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

__all__ = ["DEVICE", "NumpyGenerator", "OPINFO_NOTES", "setup"]

_SPARSE = (
    "takes or makes a sparse tensor: a payload tensor is strided (its data one NumPy array); "
    "the backend has no sparse layouts, as a device without sparse kernels has none"
)
_RANDOM = "random values drawn from the device's own generator (NumPy's), not CPU's"

#: OpInfo entries ``python -m torch_acc.testing.opinfo`` does not run on this backend
#: (``"skip"``) or compares without values (``"values"``), and why.
OPINFO_NOTES = {
    "to_sparse": ("skip", _SPARSE),
    "sparse.mm.reduce": ("skip", _SPARSE),
    "sparse.sampled_addmm": ("skip", _SPARSE),
    "chalf": (
        "skip",
        "complex32: NumPy has no such dtype; the backend refuses it (NotImplementedError)",
    ),
    "hash_tensor": (
        "skip",
        "its result is uint64: the backend has arrays of torch's core dtypes only, no uint16, "
        "uint32 or uint64 (a NotImplementedError names the dtype)",
    ),
    "randn": ("values", _RANDOM),
    "randint": ("values", _RANDOM),
    "nn.functional.alpha_dropout": ("values", _RANDOM + " (PyTorch expects CUDA to differ too)"),
    "nn.functional.fractional_max_pool2d": ("values", _RANDOM + " (the pooling regions)"),
    "nn.functional.fractional_max_pool3d": ("values", _RANDOM + " (the pooling regions)"),
    "as_strided.partial_views": (
        "values",
        "reads storage outside the sample's view, which a copy to the device does not carry "
        "(PyTorch expects every device to differ from CPU here)",
    ),
}


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
            if not versions.aten_op_removed(name):
                library.impl(name, kernel)
        _training.register_storage_kernels()
        _shape.register_view_kernels()
        if torch.distributed.is_available():
            from torch_acc import distributed

            distributed.register(DEVICE, host_view=_common.host_view)
        library.impl_ipc(_shared.share, _shared.rebuild, is_shared=_shared.is_shared)
        library.declare_fork_safe()
        _registered = True
    return DEVICE
