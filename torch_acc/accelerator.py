r"""The current accelerator: what ``torch.accelerator`` reports and uses.

:func:`set_current_accelerator` chooses it among the build's accelerators (``"cuda"``...), the
registered Python backends (bound when chosen) or none (``"cpu"``). With the patch series the
choice goes to ``at::setCurrentAccelerator``, which every C++ caller honours; on a stock wheel
the run-time patches make ``torch.accelerator``'s Python entry points honour it.
"""

import threading

import torch

from torch_acc import _compat, _patches, record, registry

__all__ = ["chosen", "current_accelerator", "set_current_accelerator"]

_lock = threading.RLock()
#: The accelerator chosen with set_current_accelerator: _UNSET, None (CPU only), or a device.
_UNSET = object()
_current = _UNSET

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
        registered = record.registered()
        bound = {r.name for r in record.bound().values()}
        if kind in registered:
            registry.use(kind)
        elif kind in _BUILTIN:
            module = getattr(torch, kind, None)
            if module is None or not module.is_available():
                raise ValueError(f"cannot make {kind} the current accelerator: not available")
        elif kind not in bound:
            raise ValueError(
                f"unknown accelerator {kind!r}: expected a registered backend "
                f"({', '.join(sorted(registered)) or 'none'}), an available built-in "
                "accelerator, or 'cpu'"
            )
        choice = torch.device(kind)
    setter = _compat.current_accelerator_setter()
    if setter is None:
        _patches.apply()
        _patches.accelerator_choice(chosen)
    with _lock:
        _current = choice
        if setter is not None:
            setter(choice)


def current_accelerator() -> torch.device | None:
    r"""The accelerator chosen with :func:`set_current_accelerator` (or torch's default)."""
    with _lock:
        choice = _current
    if choice is _UNSET:
        return _patches.original("current_accelerator")()
    return choice


def chosen() -> tuple[bool, torch.device | None]:
    r"""Whether an accelerator was chosen with :func:`set_current_accelerator`, and which
    (None: none, the CPU only); the run-time patches of ``torch.accelerator`` read it."""
    with _lock:
        choice = _current
    return (False, None) if choice is _UNSET else (True, choice)

