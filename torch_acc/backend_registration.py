r"""Set up PrivateUse1 as a device whose backend is written in Python.

This is the standalone form of the ``torch.utils.backend_registration`` extensions of the
patch series: after :func:`setup_privateuseone_for_python_backend`, kernels registered with
``torch.library`` for ``"privateuseone"`` make a device that behaves like one built in C++.
"""

import atexit
import threading

import torch

from torch_acc import _autocast, _C, _patches, record
from torch_acc._fallback import fallback
from torch_acc.compile import refuse_inductor, register_compile_backend, register_dynamo_backend
from torch_acc.device_module import DefaultDeviceModule

__all__ = ["register_compile_backend", "setup_privateuseone_for_python_backend"]

_lock = threading.Lock()


class _DefaultDeviceGuard(_C.DeviceGuard):
    """The guard used when the backend gives none.

    It takes the device count from the backend's device module when the backend gave one
    with ``device_count()``; everything else keeps the C++ defaults (see
    ``csrc/acc/DeviceGuard.h``), which need no Python and so take no GIL.
    """

    def __init__(self, backend_module=None):
        super().__init__()
        if backend_module is not None and callable(getattr(backend_module, "device_count", None)):
            self.device_count = backend_module.device_count


class _DefaultHooks(_C.PrivateUse1Hooks):
    """The hooks used when the backend gives none: built, available, nothing to initialize."""


def setup_privateuseone_for_python_backend(
    rename=None, backend_module=None, hook=None, device_guard=None
):
    r"""Prepare PrivateUse1 to be a device whose backend is written in Python.

    This installs what PyTorch expects of a backend registered in C++: the device name, the
    tensor/module/storage methods (``Tensor.to_<name>()``, ``Tensor.is_<name>``, ...), the
    device module ``torch.<name>``, hooks and a device guard. Afterwards, kernels registered
    with ``torch.library`` for ``"privateuseone"`` run for tensors on the device, and autograd,
    views and printing work as on a C++ backend.

    Calling it again with the same name does nothing; asking then for hooks or a device guard
    of a class the installed ones are not instances of is an error (they cannot be replaced).
    Registration is process-global.

    Args:
        rename (str, optional): the device name (default ``"privateuseone"``). Must be a Python
            identifier that is not a device type built into PyTorch.
        backend_module (object, optional): the device module, registered as
            ``torch.<name>``. By default, a module whose ``device_count``,
            ``current_device``, ``set_device`` and ``synchronize`` come from the device guard.
        hook (PrivateUse1Hooks, optional): the hooks; by default, hooks saying the
            backend is built and available.
        device_guard (DeviceGuard, optional): the device guard; by default one
            that takes ``device_count()`` from ``backend_module`` and otherwise describes a
            synchronous device with one default stream per device.

    Returns:
        The device module registered as ``torch.<name>``.

    Raises:
        ValueError: ``rename`` is not a valid device name.
        RuntimeError: PrivateUse1 is already held by another backend, or by this one with
            other hooks or another device guard.

    Example::

        >>> # xdoctest: +SKIP
        >>> setup_privateuseone_for_python_backend("npy")
        >>> @torch.library.impl("aten::add.Tensor", "privateuseone")
        ... def add(a, b, *, alpha=1): ...
        >>> torch.device("npy:0")
        device(type='npy', index=0)
    """
    name = record.check_name(rename)
    # Type errors before anything else, whatever state the process is in.
    if hook is not None:
        _check_type(hook, _C.PrivateUse1Hooks, "hook")
    if device_guard is not None:
        _check_type(device_guard, _C.DeviceGuard, "device_guard")
    with _lock:
        record.check_slot(name, "set up")
        backend = record.slot_holder()
        if backend is not None:
            if backend_module is not None and backend_module is not backend.device_module:
                raise RuntimeError(
                    f"backend {name!r} is already set up with device module "
                    f"{backend.device_module!r}, not {backend_module!r}"
                )
            # Hooks or a guard of the class given (or a subclass) are what was asked for:
            # setting up again with a new instance of the same hooks does nothing.
            for what, given, done in (
                ("hooks", hook, backend.hooks),
                ("device guard", device_guard, backend.guard),
            ):
                if given is not None and not isinstance(done, type(given)):
                    raise RuntimeError(
                        f"backend {name!r} is already set up with {what} "
                        f"{type(done).__qualname__}, not {type(given).__qualname__}: a "
                        f"backend's {what} cannot be replaced; pass {type(given).__qualname__} "
                        "(or a subclass of it) to the first setup"
                    )
            return backend.device_module
        record.check_slot_free(name)

        hook = _DefaultHooks() if hook is None else hook
        if device_guard is None:
            device_guard = _DefaultDeviceGuard(backend_module)
        if backend_module is None:
            backend_module = DefaultDeviceModule(name, hook)

        # The order matters: methods and the device module are named after the backend, and
        # the device guard must exist before anything asks for a device of this type.
        if name != record.DEFAULT_NAME:
            torch.utils.rename_privateuse1_backend(name)
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
        torch._register_device_module(name, backend_module)
        _register(_C.register_python_privateuseone_device_guard, device_guard, name)
        _register(_C.register_python_privateuseone_hook, hook, name)
        # The fallback runs inside the dispatcher, as torch.library's Python kernels do: Dynamo
        # must not trace it when a compiled frame's graph break leaves an operator to eager
        # (torch 2.14 traced it and compiled a graph inside the runtime wrapper: a crash).
        _C.set_fallback(torch._disable_dynamo(fallback))
        _autocast.register()
        _patches.apply()
        refuse_inductor(name)
        register_dynamo_backend()
        _register_distributed(name)
        atexit.register(_at_exit)
        record.set_up(name, backend_module, hook, device_guard)
        return backend_module


def _register_distributed(name: str) -> None:
    """The device's c10d backend (:mod:`torch_acc.distributed`), where torch has
    ``torch.distributed``."""
    if torch.distributed.is_available():
        # Imported here, where torch has torch.distributed, which it then loads.
        from torch_acc import distributed

        distributed.register(name)


#: How long the interpreter waits at exit for backend calls running on other threads.
EXIT_TIMEOUT_S = 10.0


def _at_exit() -> None:
    """Runs while the interpreter is still intact: other threads, such as autograd's device
    threads, may no longer call into Python (kernels raise, payloads released there are
    leaked), and the calls running are waited for (see ``csrc/acc/Shutdown.h``). A device
    thread that asks for the GIL once the interpreter finalizes would abort the process."""
    _drain_device_threads()
    _C.begin_exit(EXIT_TIMEOUT_S)


def _drain_device_threads() -> None:
    """Waits until autograd's device threads of this backend have finished what they were
    running. A backward pass that raised on the calling thread returns while a device thread
    still runs a kernel of that pass; when the kernel ends, the thread drops the pass and, with
    it, nodes and tensors that hold Python objects (a Python ``autograd.Function``), which
    torch releases by taking the GIL. Once the interpreter finalizes, that aborts the process.
    A small backward pass through each device's thread returns only after the kernel running
    there, so the pass it ends is released while Python is intact.

    These passes call the engine directly, not through ``torch.autograd.backward``: torch
    (2.13 and later) copies a ``contextvars.Context`` into the thread-local state each pass
    keeps, and the pass is freed by whichever thread lets go of it last, often the device
    thread, after ``backward`` returned. That frees the context with the GIL once the
    interpreter finalizes, and aborts the process: the drain itself would be the pass it
    guards against. Without a Python object in their state, these passes free none."""
    backend = record.slot_holder()
    if backend is None:
        return
    name = backend.name
    try:
        for index in range(_C.device_count()):
            leaf = torch.zeros((), device=f"{name}:{index}", requires_grad=True)
            # Rooted on the CPU: the leaf's gradient is accumulated on the device's thread.
            root = leaf.cpu()
            torch.autograd.Variable._execution_engine.run_backward(
                tensors=(root,),
                grad_tensors=(torch.ones_like(root),),
                keep_graph=False,
                create_graph=False,
                inputs=(),
                allow_unreachable=True,
                accumulate_grad=True,
            )
    except Exception:  # noqa: BLE001
        # A backend that cannot run this pass (no kernels registered yet, an error in
        # them) has no backward of its own to drain; exit goes on.
        return


def _check_type(obj, cls, what: str) -> None:
    if not isinstance(obj, cls):
        raise TypeError(
            f"expected {what} to be an instance of a subclass of {cls.__module__}.{cls.__name__}, "
            f"but got {type(obj).__qualname__}"
        )


def _register(register, obj, name: str) -> None:
    if not register(obj):
        raise RuntimeError(
            f"cannot set up backend {name!r}: PrivateUse1 is already held by backend "
            f"{torch._C._get_privateuse1_backend_name()!r}, whose "
            f"{register.__name__.rsplit('_', 1)[-1]} is installed"
        )
