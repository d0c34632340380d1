r"""One record per Python backend, found from its device type.

A :class:`BackendRecord` holds everything torch_acc keeps for one backend: how the registry
binds it, what its setup installed (device module, hooks, device guard), its payload,
serialization and IPC functions, the ``torch.library`` handles of its kernels and its compile
backend. The registry creates a backend's record when it is registered, setup when it is
set up; every other module finds it by the backend's device type (:func:`get`), so nothing
assumes one backend per process.

How many backends can be bound at once is the number of device types a Python backend can
be bound to, its *slots* (:func:`slots`): those the running torch has (one on a stock wheel,
PrivateUse1; three with the patch series, which adds PrivateUse2 and PrivateUse3) that
torch_acc serves (:data:`SERVED_SLOTS`). :func:`check_slot` is the one place that limit is
checked.
"""

import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from torch_acc import _C, _compat

__all__ = [
    "BackendRecord",
    "DEFAULT_NAME",
    "ENV_VAR",
    "IpcFunctions",
    "PRIVATEUSE_TYPES",
    "Registration",
    "SERVED_SLOTS",
    "bound",
    "check_name",
    "check_slot",
    "check_slot_free",
    "get",
    "get_or_create",
    "names",
    "privateuse1",
    "registered",
    "set_up",
    "slot_holder",
    "slots",
]

#: The name of PrivateUse1 before a backend renames it.
DEFAULT_NAME = "privateuseone"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: The device types of backends defined outside PyTorch, in the order backends take them.
PRIVATEUSE_TYPES = ("PrivateUse1", "PrivateUse2", "PrivateUse3")
#: How many of them torch_acc serves. Its C++ core (device guard, hooks, payload tensors, the
#: kernel bridge) and its ``torch.library`` registrations are written for PrivateUse1, so on a
#: torch with the patch series PrivateUse2 and PrivateUse3 stay free for other backends.
SERVED_SLOTS = 1
#: The environment variable that names the backend a process binds when none is named.
ENV_VAR = "TORCH_ACC_BACKEND"


@dataclass
class Registration:
    """What :func:`torch_acc.register_backend` recorded: the backend's module (or its import
    name, until :meth:`backend_module` imports it) and the function that binds it (None:
    ``module.setup()`` or the default setup)."""

    module: object
    setup: Callable[[], object] | None = None
    #: The error of a setup that failed; the backend is not set up again.
    error: BaseException | None = None

    def is_module(self, module) -> bool:
        """Whether ``module`` (a module, or an import name) is the one registered."""
        if module is self.module:
            return True
        names = [m if isinstance(m, str) else getattr(m, "__name__", None)
                 for m in (module, self.module)]
        return isinstance(module, str) != isinstance(self.module, str) and names[0] == names[1]

    def backend_module(self):
        """The backend's module, imported here if it was registered by name."""
        if isinstance(self.module, str):
            self.module = importlib.import_module(self.module)
        return self.module


@dataclass
class IpcFunctions:
    """The IPC functions of ``library.impl_ipc``."""

    share: Callable
    rebuild: Callable
    is_shared: Callable | None = None


@dataclass(eq=False)
class BackendRecord:
    """Everything torch_acc keeps for the Python backend of device type ``name``."""

    name: str
    #: How the registry binds it; None for a backend set up without being registered.
    registration: Registration | None = None
    #: The device type it is bound to (one of :func:`slots`), or None: not set up.
    slot: str | None = None
    #: What setup installed: the device module (``torch.<name>``), hooks and device guard.
    device_module: object = None
    hooks: object = None
    guard: object = None
    #: ``to_cpu``, ``from_cpu`` and ``copy_into`` of ``library.impl_payload``.
    payload_functions: dict[str, Callable] = field(default_factory=dict)
    #: ``(serialize, deserialize)`` of ``library.impl_serialization``, or None: through the CPU.
    serialization: tuple[Callable, Callable] | None = None
    #: The IPC functions of ``library.impl_ipc``, or None: tensors are sent as CPU copies.
    ipc: IpcFunctions | None = None
    #: Whether the backend declared its tensors work in a child made by ``os.fork()``.
    fork_safe: bool = False
    #: The ``torch.library.Library`` objects that hold its registrations.
    libraries: list = field(default_factory=list)
    #: ``(compiler_fn, aot)`` of ``register_compile_backend``, or None: ``aot_eager``.
    compiler: tuple[Callable, bool] | None = None


_lock = threading.Lock()
_records: dict[str, BackendRecord] = {}


def get(name: str) -> BackendRecord | None:
    """The record of the backend of device type ``name``, or None."""
    with _lock:
        return _records.get(name)


def get_or_create(name: str) -> BackendRecord:
    """The record of the backend of device type ``name``, made empty if there is none."""
    with _lock:
        record = _records.get(name)
        if record is None:
            record = _records[name] = BackendRecord(name)
        return record


def names() -> list[str]:
    """The device types of every backend with a record (registered or set up), sorted."""
    with _lock:
        return sorted(_records)


def registered() -> list[str]:
    """The names of the registered backends, in the order they were registered."""
    with _lock:
        return [name for name, r in _records.items() if r.registration is not None]


def slots() -> tuple[str, ...]:
    """The device types a Python backend can be bound to here, in the order they are taken:
    those of :data:`PRIVATEUSE_TYPES` that the running torch has (one on a released wheel,
    three with the patch series) and torch_acc serves (:data:`SERVED_SLOTS`)."""
    return PRIVATEUSE_TYPES[: min(_compat.privateuse_backend_slots(), SERVED_SLOTS)]


def slot_holder(slot: str = PRIVATEUSE_TYPES[0]) -> BackendRecord | None:
    """The record of the backend bound to ``slot``, or None."""
    with _lock:
        return next((r for r in _records.values() if r.slot == slot), None)


def bound() -> dict[str, BackendRecord]:
    """The backends bound to a slot, by slot, in slot order."""
    with _lock:
        held = {r.slot: r for r in _records.values() if r.slot is not None}
    return {slot: held[slot] for slot in PRIVATEUSE_TYPES if slot in held}


def privateuse1() -> BackendRecord:
    """The record of the backend on PrivateUse1. Before a backend is set up that is the record
    of PrivateUse1's default name, which holds what a backend registers before its setup
    (``library.declare_fork_safe``...) until :func:`set_up` moves it to the backend's."""
    return get_or_create(torch._C._get_privateuse1_backend_name())


def set_up(name: str, device_module, hooks, guard) -> BackendRecord:
    """Records that the backend ``name`` is set up on PrivateUse1 with ``device_module``,
    ``hooks`` and ``guard``; what was registered for PrivateUse1 under its default name before
    setup renamed it becomes the backend's."""
    with _lock:
        record = _records.get(name)
        if record is None:
            record = _records[name] = BackendRecord(name)
        early = _records.get(DEFAULT_NAME) if name != DEFAULT_NAME else None
        if early is not None and early.slot is None and early.registration is None:
            del _records[DEFAULT_NAME]
            for what in _REGISTERED_BEFORE_SETUP:
                setattr(record, what, getattr(early, what))
        record.device_module, record.hooks, record.guard = device_module, hooks, guard
        record.slot = PRIVATEUSE_TYPES[0]
        return record


#: The fields of a record that ``library`` fills, which may be filled before setup.
_REGISTERED_BEFORE_SETUP = (
    "payload_functions",
    "serialization",
    "ipc",
    "fork_safe",
    "libraries",
)


def check_slot(name: str, action: str) -> None:
    """Raises if the backend ``name`` cannot be bound because every slot (:func:`slots`) is
    held by another backend; the error names them. ``action`` is what was asked (``"use"``,
    ``"set up"``), for the message."""
    held = bound()
    available = slots()
    if any(r.name == name for r in held.values()) or any(s not in held for s in available):
        return
    verb = "is bound to" if action == "use" else "is already held by"
    holders = ", ".join(f"{slot} {verb} backend {r.name!r}" for slot, r in held.items())
    torch_slots = _compat.privateuse_backend_slots()
    if torch_slots > len(available):
        limit = (
            f"torch_acc binds Python backends to {', '.join(available)} only, of the "
            f"{torch_slots} device types this torch has for backends defined outside it"
        )
    elif torch_slots == 1:
        limit = "this torch has one device type for Python backends"
    else:
        limit = f"this torch has {torch_slots} device types for Python backends, all bound"
    if action == "use":
        raise RuntimeError(
            f"cannot use backend {name!r}: {holders}, and {limit}. Choose the backend of a "
            f"process with {ENV_VAR}={name}"
        )
    raise RuntimeError(f"cannot {action} backend {name!r}: {holders} ({limit})")


def check_slot_free(name: str) -> None:
    """Raises if PrivateUse1 is held by a backend set up by other means than torch_acc's
    setup (renamed, a device module, hooks or a device guard registered)."""
    holder = torch._C._get_privateuse1_backend_name()
    taken = (
        holder not in (DEFAULT_NAME, name)
        or getattr(torch, holder, None) is not None
        or _C.is_device_guard_registered()
        or _C.is_hook_registered()
    )
    if taken:
        raise RuntimeError(
            f"cannot set up backend {name!r}: PrivateUse1 is already held by backend "
            f"{holder!r}, set up by other means (only one PrivateUse1 backend per process)"
        )


def check_name(name) -> str:
    """``name`` as a backend's device type (None: :data:`DEFAULT_NAME`); an error if it is
    not a Python identifier or is a device type built into PyTorch."""
    if name is None:
        return DEFAULT_NAME
    if not isinstance(name, str):
        raise TypeError(f"expected the backend name to be a str, but got {type(name).__name__}")
    if not _NAME.match(name):
        raise ValueError(
            f"invalid backend name {name!r}: expected a Python identifier such as 'npy' "
            "(letters, digits and '_', not starting with a digit)"
        )
    if name != torch._C._get_privateuse1_backend_name():
        try:
            torch.device(name)
        except RuntimeError:
            pass
        else:
            raise ValueError(
                f"invalid backend name {name!r}: it is a device type built into PyTorch"
            )
    return name
