r"""Several Python backends in one environment: each recorded, and bound when first used.

Any number of backends can be *registered* (:func:`register_backend`, typically from a
``torch.backends`` entry point, which ``import torch`` loads): registering binds no device type
and never fails at import. A backend is *bound* to a device type for backends defined outside
PyTorch, a *slot* (:func:`torch_acc.record.slots`), when it is first used (:func:`use`,
:func:`device`, ``set_current_accelerator``). A stock wheel has one slot, PrivateUse1, so a
process binds one backend; ``TORCH_ACC_BACKEND=name`` chooses which when none is named.
"""

import os
import threading
import warnings

import torch

from torch_acc import backend_registration, record
from torch_acc.record import ENV_VAR

__all__ = [
    "autoload",
    "backend_module",
    "backends",
    "device",
    "register_backend",
    "use",
]

#: Makes binding (:func:`use`) one step at a time.
_lock = threading.RLock()


def register_backend(name: str, module, *, setup=None) -> None:
    r"""Record the Python backend ``name``; nothing is bound until it is used.

    Args:
        name (str): the device name the backend will have (``"npy"``).
        module: the backend's device module (registered as ``torch.<name>`` when bound), or
            its import name (``"my_package.backend"``), imported when the backend is bound or
            :func:`backend_module` asks for it: registering by name imports nothing, so a
            ``torch.backends`` entry point adds nothing to the time of ``import torch``.
        setup (callable, optional): called with no arguments to bind the backend; by default
            ``module.setup()`` if the module has one, else
            ``setup_privateuseone_for_python_backend(name, backend_module=module)``.

    Registering the same name and module again does nothing; another module under a name
    already taken is a ``ValueError``.

    Example::

        >>> # xdoctest: +SKIP
        >>> from torch_acc.backends import reference
        >>> register_backend("ref", reference)
        >>> torch.accelerator.set_current_accelerator("ref")  # binds it
        >>> torch.ones(2, device="ref").device
        device(type='ref', index=0)
    """
    name = record.check_name(name)
    with _lock:
        backend = record.get_or_create(name)
        known = backend.registration
        if known is not None:
            if known.is_module(module) and known.setup is setup:
                return
            raise ValueError(
                f"cannot register backend {name!r} with {module!r}: the name is already "
                f"registered with {known.module!r}"
            )
        backend.registration = record.Registration(module, setup)


def autoload(name: str, module, *, setup=None) -> None:
    r""":func:`register_backend` for a ``torch.backends`` entry point: ``import torch`` runs it,
    so a failure is a warning that names the backend, never an error."""
    try:
        register_backend(name, module, setup=setup)
    except Exception as e:  # noqa: BLE001 - import torch must not fail for a backend
        warnings.warn(f"torch_acc: backend {name!r} was not registered: {e}", stacklevel=2)


def backends() -> dict[str, bool]:
    r"""The registered backends, each with whether it is bound (set up on a slot)."""
    bound = {r.name for r in record.bound().values()}
    return {name: name in bound for name in record.registered()}


def backend_module(name: str):
    r"""The module :func:`register_backend` recorded for the backend ``name``.

    Tools that work on any registered backend read its attributes here (an OpInfo harness
    reads the backend's ``OPINFO_NOTES``). An unknown name is a ``ValueError`` that lists the
    registered backends.
    """
    return record.get(_resolve(name)).registration.backend_module()


def _resolve(name: str | None) -> str:
    if name is None:
        name = os.environ.get(ENV_VAR) or None
    registered = record.registered()
    if name is None:
        if len(registered) != 1:
            raise ValueError(
                f"name the backend to use: {len(registered)} are registered "
                f"({', '.join(sorted(registered)) or 'none'}); pass a name or set {ENV_VAR}"
            )
        (name,) = registered
    if name not in registered:
        autoload = (
            "; TORCH_DEVICE_BACKEND_AUTOLOAD=0 kept torch from loading the torch.backends "
            "entry points that register installed backends"
            if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0"
            else ""
        )
        raise ValueError(
            f"unknown backend {name!r}: registered backends are "
            f"{', '.join(sorted(registered)) or 'none'} (register_backend() records one)"
            f"{autoload}"
        )
    return name


def use(name: str | None = None) -> torch.device:
    r"""Bind the registered backend ``name`` to a free slot (PrivateUse1 on a stock wheel), if
    it is not yet, and return its device. Without a name: ``TORCH_ACC_BACKEND``, or the only
    registered backend.

    On a stock torch wheel one Python backend can be bound per process; asking for another
    once every slot is bound raises a ``RuntimeError`` that names the bound backends and the
    remedy.
    """
    name = _resolve(name)
    with _lock:
        backend = record.get(name)
        if backend.slot is not None:
            return torch.device(name)
        record.check_slot(name, "use")
        registration = backend.registration
        if registration.error is not None:
            raise RuntimeError(
                f"backend {name!r} failed to set up earlier: {registration.error}"
            ) from registration.error
        try:
            if registration.setup is not None:
                registration.setup()
            elif callable(getattr(module := registration.backend_module(), "setup", None)):
                module.setup()
            else:
                backend_registration.setup_privateuseone_for_python_backend(
                    name, backend_module=module
                )
        except Exception as e:
            registration.error = e
            raise RuntimeError(f"backend {name!r} failed to set up: {e}") from e
    return torch.device(name)


#: ``torch_acc.device("npy")`` binds the backend like :func:`use` and returns its device.
device = use
