r"""A second reference backend: device ``"ref"``, whose payloads are CPU tensors.

The smallest complete payload backend: each kernel runs the same ATen operator on the CPU
payloads. It shows the payload protocol without any array library, and gives the registry a
second backend to choose from.
"""

import sys

import torch

from torch_acc import library, registry
from torch_acc.backend_registration import setup_privateuseone_for_python_backend

__all__ = ["DEVICE", "register", "setup"]

#: The device name this backend registers.
DEVICE = "ref"

_OPS = [
    "add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "neg", "exp", "log", "relu",
    "mm", "sum.dim_IntList", "mean.dim", "threshold_backward", "fill_.Scalar", "zero_",
]


def _cpu_kernel(name: str):
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")

    def kernel(*args, **kwargs):
        return op(*args, **kwargs)

    return kernel


def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return torch.empty(size, dtype=dtype)


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return torch.empty_strided(size, stride, dtype=dtype)


def _copy_into(dst, src):
    return dst.copy_(src)


_registered = False


def setup() -> str:
    """Set up the ``ref`` device and register its kernels (idempotent). Returns ``"ref"``."""
    global _registered
    setup_privateuseone_for_python_backend(DEVICE)
    if not _registered:
        library.impl_payload(
            as_strided=lambda p, size, stride, offset: p.as_strided(
                size, stride, p.storage_offset() + offset
            ),
            to_cpu=lambda p: p,
            from_cpu=lambda t: t.clone(),
            copy_into=_copy_into,
        )
        library.impl("empty.memory_format", _empty)
        library.impl("empty_strided", _empty_strided)
        for name in _OPS:
            library.impl(name, _cpu_kernel(name))
        _registered = True
    return DEVICE


def register() -> None:
    """Record the backend, bind nothing: what the ``torch.backends`` entry point
    (``torch_acc_autoload.ref``) calls."""
    registry.autoload(DEVICE, sys.modules[__name__])
