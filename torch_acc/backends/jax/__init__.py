r"""A JAX backend: device ``"jax"``, whose device data are jax.Arrays.

``jax:N`` is ``jax.devices()[N]``: the CPU with ``jax[cpu]``, the GPUs with ``jax[cuda]``
(no GPU code here). Arrays are immutable; how in-place writes and views stay coherent is in
``_payload.py``. ``jax_enable_x64`` is set, so float64 and int64 are real. Operators without a
kernel here run through ``torch._decomp``; ``torch.compile(backend="per_device")`` lowers
graphs on ``jax`` to one ``jax.jit`` function (``_compile.py``).

Example::

    >>> # xdoctest: +SKIP
    >>> import torch
    >>> from torch_acc.backends import jax as jax_backend
    >>> jax_backend.setup()
    'jax'
    >>> (torch.ones(2, device="jax") * 3).sum()
    tensor(6., device='jax:0')
"""

import jax
import torch

from torch_acc import library, versions
from torch_acc.backend_registration import (
    register_compile_backend,
    setup_privateuseone_for_python_backend,
)
from torch_acc.device_module import DeviceGuard, PrivateUse1Hooks

from . import _kernels, _payload, _random
from ._payload import DEVICE, JaxPayload, JaxView
from ._random import JaxGenerator

__all__ = ["DEVICE", "JaxGenerator", "JaxPayload", "JaxView", "array", "setup"]


def array(tensor: torch.Tensor) -> jax.Array:
    """The values of a tensor on ``jax`` as a jax.Array (a view's elements, gathered)."""
    from torch_acc import payload

    return payload(tensor).array


class _Guard(DeviceGuard):
    def device_count(self) -> int:
        return len(jax.devices())

    def synchronize_device(self, device_index: int) -> None:
        # A device runs its computations in order: the last one done, all are.
        jax.device_put(0, jax.devices()[device_index]).block_until_ready()


class _Hooks(PrivateUse1Hooks):
    def get_new_generator(self, device_index: int) -> JaxGenerator:
        return JaxGenerator()

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]


_registered = False


def setup() -> str:
    """Set up the ``jax`` device and register its kernels (idempotent). Returns ``"jax"``."""
    global _registered
    setup_privateuseone_for_python_backend(DEVICE, hook=_Hooks(), device_guard=_Guard())
    if not _registered:
        # Dynamo must not trace into JAX from eager code between a compiled function's graph
        # breaks (a backward inside it): the functions that call JAX are hidden from it.
        library.impl_payload(
            as_strided=_payload.as_strided,
            to_cpu=torch.compiler.disable(_payload.to_cpu),
            from_cpu=torch.compiler.disable(_payload.from_cpu),
            copy_into=torch.compiler.disable(_payload.copy_into),
        )
        kernels = dict(_kernels.KERNELS)
        kernels.update(_random.KERNELS)
        for name, kernel in kernels.items():
            if not versions.aten_op_removed(name):
                library.impl(name.removesuffix(".default"), kernel)
        from . import _compile

        register_compile_backend(DEVICE, _compile.compile_graph)
        _registered = True
    return DEVICE
