r"""Several Python backends in one environment, and the choice of the current accelerator.

Any number of backends can be *registered* (:func:`register_backend`, typically from a
``torch.backends`` entry point, which ``import torch`` loads): registering binds no device type
and never fails at import. A backend is *bound* to PrivateUse1, the device type stock PyTorch
lets a Python backend use, when it is first used (:func:`use`, :func:`device`,
:func:`set_current_accelerator`). A stock wheel has that one slot, so a process binds one
backend; ``TORCH_ACC_BACKEND=name`` chooses which when none is named.
"""

import os
import threading
import warnings
from dataclasses import dataclass

import torch

from torch_acc import _compat, backend_registration

__all__ = [
    "backends",
    "current_accelerator",
    "device",
    "register_backend",
    "set_current_accelerator",
    "use",
]

ENV_VAR = "TORCH_ACC_BACKEND"

_lock = threading.RLock()


@dataclass
class _Backend:
    module: object
    setup: object
    error: BaseException | None = None


_registry: dict[str, _Backend] = {}
#: The accelerator chosen with set_current_accelerator: _UNSET, None (CPU only), or a device.
_UNSET = object()
_current = _UNSET


def register_backend(name: str, module, *, setup=None) -> None:
    r"""Record the Python backend ``name``; nothing is bound until it is used.

    Args:
        name (str): the device name the backend will have (``"npy"``).
        module: the backend's device module (registered as ``torch.<name>`` when bound).
        setup (callable, optional): called with no arguments to bind the backend; by default
            ``module.setup()`` if the module has one, else
            ``setup_privateuseone_for_python_backend(name, backend_module=module)``.

    Registering the same name and module again does nothing; another module under a name
    already taken is a ``ValueError``.

    Example::

        >>> # xdoctest: +SKIP
        >>> from torch_acc.backends import numpy as npy_backend
        >>> register_backend("npy", npy_backend)
        >>> torch.accelerator.set_current_accelerator("npy")  # binds it
        >>> torch.ones(2, device="npy").device
        device(type='npy', index=0)
    """
    name = backend_registration._check_name(name)
    with _lock:
        known = _registry.get(name)
        if known is not None:
            if known.module is module and known.setup is setup:
                return
            raise ValueError(
                f"cannot register backend {name!r} with {module!r}: the name is already "
                f"registered with {known.module!r}"
            )
        _registry[name] = _Backend(module, setup)


def autoload(name: str, module, *, setup=None) -> None:
    """:func:`register_backend` for a ``torch.backends`` entry point: ``import torch`` runs it,
    so a failure is a warning that names the backend, never an error."""
    try:
        register_backend(name, module, setup=setup)
    except Exception as e:  # noqa: BLE001 - import torch must not fail for a backend
        warnings.warn(f"torch_acc: backend {name!r} was not registered: {e}", stacklevel=2)


def backends() -> dict[str, bool]:
    """The registered backends, each with whether it is bound (set up on PrivateUse1)."""
    bound = _bound()
    with _lock:
        return {name: name == bound for name in _registry}


def _bound() -> str | None:
    done = backend_registration._setup_done
    return None if done is None else done[0]


def _resolve(name: str | None) -> str:
    if name is None:
        name = os.environ.get(ENV_VAR) or None
    with _lock:
        if name is None:
            if len(_registry) != 1:
                raise ValueError(
                    f"name the backend to use: {len(_registry)} are registered "
                    f"({', '.join(sorted(_registry)) or 'none'}); pass a name or set {ENV_VAR}"
                )
            (name,) = _registry
        if name not in _registry:
            raise ValueError(
                f"unknown backend {name!r}: registered backends are "
                f"{', '.join(sorted(_registry)) or 'none'} (register_backend() records one)"
            )
    return name


def use(name: str | None = None) -> torch.device:
    r"""Bind the registered backend ``name`` to PrivateUse1 (if it is not yet) and return its
    device. Without a name: ``TORCH_ACC_BACKEND``, or the only registered backend.

    On a stock torch wheel one Python backend can be bound per process; asking for a second
    raises a ``RuntimeError`` that names both and the remedies.
    """
    name = _resolve(name)
    with _lock:
        bound = _bound()
        if bound == name:
            return torch.device(name)
        if bound is not None:
            raise RuntimeError(
                f"cannot use backend {name!r}: PrivateUse1 is bound to backend {bound!r}, and "
                "this torch has one device type for Python backends. Choose the backend of a "
                f"process with {ENV_VAR}={name}, or build PyTorch with the torch_acc patch "
                "series, whose PrivateUse2/PrivateUse3 slots hold more"
            )
        backend = _registry[name]
        if backend.error is not None:
            raise RuntimeError(
                f"backend {name!r} failed to set up earlier: {backend.error}"
            ) from backend.error
        try:
            if backend.setup is not None:
                backend.setup()
            elif callable(getattr(backend.module, "setup", None)):
                backend.module.setup()
            else:
                backend_registration.setup_privateuseone_for_python_backend(
                    name, backend_module=backend.module
                )
        except Exception as e:
            backend.error = e
            raise RuntimeError(f"backend {name!r} failed to set up: {e}") from e
    return torch.device(name)


#: ``torch_acc.device("npy")`` binds the backend like :func:`use` and returns its device.
device = use

_BUILTIN = ("cuda", "xpu", "mps", "mtia", "hpu")


def set_current_accelerator(device) -> None:
    r"""Choose what ``torch.accelerator`` reports as the current accelerator.

    ``device`` is a registered Python backend (bound now if it is not yet), a built-in
    accelerator available in this build (``"cuda"``...), or ``None``/``"cpu"`` for none.
    Existing tensors are unaffected: the choice only changes what code asking for "the
    accelerator" gets.

    Example::

        >>> # xdoctest: +SKIP
        >>> set_current_accelerator("npy")
        >>> torch.accelerator.current_accelerator()
        device(type='npy')
        >>> set_current_accelerator("cpu")
        >>> torch.accelerator.is_available()
        False
    """
    global _current
    # The type named, without parsing a backend's name before it is bound.
    kind, index = None, None
    if isinstance(device, torch.device):
        kind, index = device.type, device.index
    elif device is not None:
        kind, _, index = str(device).partition(":")
    if index not in (None, ""):
        raise ValueError(
            f"set_current_accelerator takes a device type, but got {str(device)!r} (with an "
            f"index): use set_current_accelerator({kind!r}), and "
            "torch.accelerator.set_device_index() for the device"
        )
    if kind in (None, "cpu"):
        choice = None
    else:
        with _lock:
            registered = kind in _registry
        if registered:
            use(kind)
        elif kind in _BUILTIN:
            module = getattr(torch, kind, None)
            if module is None or not module.is_available():
                raise ValueError(f"cannot make {kind} the current accelerator: not available")
        elif kind != _bound():
            raise ValueError(
                f"unknown accelerator {kind!r}: expected a registered backend "
                f"({', '.join(sorted(_registry)) or 'none'}), an available built-in "
                "accelerator, or 'cpu'"
            )
        choice = torch.device(kind)
    setter = _compat.current_accelerator_setter()
    if setter is None:
        from torch_acc import _patches

        _patches.apply()
        _patches.accelerator_choice()
    with _lock:
        _current = choice
        if setter is not None:
            setter(choice)


def current_accelerator() -> torch.device | None:
    """The accelerator chosen with :func:`set_current_accelerator` (or torch's default)."""
    with _lock:
        choice = _current
    if choice is _UNSET:
        from torch_acc import _patches

        return _patches.original("current_accelerator")()
    return choice


def _choice():
    """``_UNSET``, ``None`` or the chosen device; read by the torch.accelerator patches."""
    with _lock:
        return _current

