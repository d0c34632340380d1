r"""torch_acc: let a Python object be a real PyTorch device.

A backend author writes kernels in Python (NumPy, JAX, a remote service...), calls
:func:`setup_privateuseone_for_python_backend` once and registers kernels with
``torch.library``; the device then works with ``.to(...)``, printing, autograd and views.

Example::

    >>> # xdoctest: +SKIP
    >>> import torch, torch_acc
    >>> torch_acc.setup_privateuseone_for_python_backend("npy")
    >>> torch.device("npy:0")
    device(type='npy', index=0)
"""

import torch  # noqa: F401  (loads libtorch before the extension)

from torch_acc import (
    _C,
    backends,  # callable: lists the registered backends
    library,
)
from torch_acc.accelerator import current_accelerator, set_current_accelerator
from torch_acc.backend_registration import (
    register_compile_backend,
    setup_privateuseone_for_python_backend,
)
from torch_acc.device_module import DeviceGuard, PrivateUse1Hooks
from torch_acc.payload import payload, wrap
from torch_acc.registry import device, register_backend, use

__all__ = [
    "DeviceGuard",
    "PrivateUse1Hooks",
    "backends",
    "current_accelerator",
    "device",
    "library",
    "payload",
    "register_backend",
    "register_compile_backend",
    "set_current_accelerator",
    "setup_privateuseone_for_python_backend",
    "use",
    "wrap",
    "_C",
]
