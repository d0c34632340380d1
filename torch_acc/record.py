r"""One record per Python backend, found from its device type.

A :class:`BackendRecord` holds everything torch_acc keeps for one backend: how the registry
binds it, what its setup installed (device module, hooks, device guard), its payload,
serialization and IPC functions, the ``torch.library`` handles of its kernels and its compile
backend. The registry creates a backend's record when it is registered, setup when it is
set up; every other module finds it by the backend's device type (:func:`get`), so nothing
assumes one backend per process.

How many backends can be bound at once is the number of device types a Python backend can
be bound to, its *slots* (:data:`SLOTS`): a stock PyTorch wheel has one, PrivateUse1.
:func:`check_slot` is the one place that limit is checked.
"""

import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from torch_acc import _C

__all__ = [
    "BackendRecord",
    "DEFAULT_NAME",
    "ENV_VAR",
    "IpcFunctions",
    "Registration",
    "SLOTS",
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
]

#: The name of PrivateUse1 before a backend renames it.
DEFAULT_NAME = "privateuseone"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: The device types a Python backend can be bound to: one on a stock wheel.
SLOTS = ("PrivateUse1",)
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
    #: The device type it is bound to (one of :data:`SLOTS`), or None: not set up.
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


def slot_holder(slot: str = SLOTS[0]) -> BackendRecord | None:
    """The record of the backend bound to ``slot``, or None."""
    with _lock:
        return next((r for r in _records.values() if r.slot == slot), None)


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
        record.slot = SLOTS[0]
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
    """Raises if the backend ``name`` cannot be bound because every slot is held by another
    backend: the one-slot limit of a stock wheel. ``action`` is what was asked (``"use"``,
    ``"set up"``), for the message."""
    holder = slot_holder()
    if holder is None or holder.name == name:
        return
    if action == "use":
        raise RuntimeError(
            f"cannot use backend {name!r}: PrivateUse1 is bound to backend {holder.name!r}, "
            "and this torch has one device type for Python backends. Choose the backend of a "
            f"process with {ENV_VAR}={name}, or build PyTorch with the torch_acc patch series, "
            "whose PrivateUse2/PrivateUse3 slots hold more"
        )
    raise RuntimeError(
        f"cannot {action} backend {name!r}: PrivateUse1 is already held by backend "
        f"{holder.name!r} (one Python backend per process on this torch)"
    )


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
