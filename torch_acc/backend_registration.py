r"""Set up PrivateUse1 as a device whose backend is written in Python.

This is the standalone form of the ``torch.utils.backend_registration`` extensions of the
patch series: after :func:`setup_privateuseone_for_python_backend`, kernels registered with
``torch.library`` for ``"privateuseone"`` make a device that behaves like one built in C++.
"""

import atexit
import contextlib
import re
import threading

import torch

from torch_acc import _autocast, _C, _patches
from torch_acc._fallback import fallback

__all__ = ["register_compile_backend", "setup_privateuseone_for_python_backend"]

_DEFAULT_NAME = "privateuseone"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_lock = threading.Lock()
#: The backend set up in this process: ``(name, device module, hooks, device guard)``, or
#: None.
_setup_done: tuple[str, object, object, object] | None = None


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


class _DefaultDeviceModule:
    """The device module registered as ``torch.<name>`` when the backend gives none.

    Device queries go to the device guard, so that this module, ``torch.accelerator`` and the
    C++ side always agree.
    """

    #: Always initialized: there is no lazy context to create. ``torch.utils.checkpoint``
    #: reads this attribute (not ``is_initialized()``) to decide whether to save and restore
    #: the device's random state around a recomputed forward.
    _initialized = True

    def __init__(self, name: str, hooks: _C.PrivateUse1Hooks):
        self._name = name
        self._hooks = hooks

    def __repr__(self) -> str:
        return f"<device module {self._name!r} of a Python backend>"

    def is_available(self) -> bool:
        is_available = getattr(self._hooks, "is_available", None)
        if is_available is None:
            return True
        available = is_available()
        if not isinstance(available, bool):
            raise TypeError(
                f"expected {type(self._hooks).__qualname__}.is_available() to return a bool, "
                f"but got {type(available)}"
            )
        return available

    def is_initialized(self) -> bool:
        return True

    def _is_in_bad_fork(self) -> bool:
        """Whether this is a child forked after the backend was set up, which refuses the
        backend (see ``library.declare_fork_safe``): ``torch.manual_seed`` then skips it,
        as it skips CUDA."""
        from torch_acc import _ipc

        return _ipc.in_bad_fork()

    def device_count(self) -> int:
        return _C.device_count()

    def current_device(self) -> int:
        return _C.current_device()

    def _index(self, device) -> int:
        """The index of the device ``device`` names (None: the current one); an error when
        it names no device of this backend."""
        return _C.device_index(device)

    def set_device(self, device) -> None:
        _C.set_device(device)

    def synchronize(self, device=None) -> None:
        _C.synchronize(device)

    @contextlib.contextmanager
    def device(self, device):
        """Makes ``device`` the current device inside the block, as ``torch.cuda.device``
        does (torch's storage and loading code enter it)."""
        previous = _C.current_device()
        _C.set_device(self._index(device))
        try:
            yield
        finally:
            _C.set_device(previous)

    # Random numbers. A backend whose hooks define ``get_new_generator`` has a default
    # ``torch.Generator`` per device (``_C.default_generator``), which these read and seed.
    # A backend without one draws nothing at random: seeding it does nothing (so that
    # ``torch.manual_seed``, which seeds every device module, works) and its state cannot be
    # read.
    def _has_generator(self) -> bool:
        return getattr(self._hooks, "get_new_generator", None) is not None

    def _generator(self, device) -> torch.Generator:
        return _C.default_generator(self._index(device))

    def _generators(self) -> list[torch.Generator]:
        if not self._has_generator():
            return []
        return [_C.default_generator(i) for i in range(self.device_count())]

    def get_rng_state(self, device=None) -> torch.Tensor:
        return self._generator(device).get_state()

    def set_rng_state(self, new_state: torch.Tensor, device=None) -> None:
        self._generator(device).set_state(new_state)

    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [self.get_rng_state(i) for i in range(self.device_count())]

    def set_rng_state_all(self, new_states) -> None:
        for i, state in enumerate(new_states):
            self.set_rng_state(state, i)

    def manual_seed(self, seed: int) -> None:
        if self._has_generator():
            self._generator(None).manual_seed(int(seed))

    def manual_seed_all(self, seed: int) -> None:
        for generator in self._generators():
            generator.manual_seed(int(seed))

    def seed(self) -> None:
        if self._has_generator():
            self._generator(None).seed()

    def seed_all(self) -> None:
        generators = self._generators()
        if generators:
            seed = generators[0].seed()
            for generator in generators[1:]:
                generator.manual_seed(seed)

    def initial_seed(self) -> int:
        return self._generator(None).initial_seed()

    # Autocast: the dtypes the backend's hooks declare (``get_amp_supported_dtype``); none
    # by default, so that ``torch.autocast`` warns and stays off for a backend that did not
    # say it computes in lower precision.
    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        supported = getattr(self._hooks, "get_amp_supported_dtype", None)
        if supported is None:
            return []
        dtypes = supported()
        if not isinstance(dtypes, (list, tuple)) or not all(
            isinstance(d, torch.dtype) for d in dtypes
        ):
            raise TypeError(
                f"expected {type(self._hooks).__qualname__}.get_amp_supported_dtype() to "
                f"return a list of torch.dtype, but got {dtypes!r}"
            )
        return list(dtypes)

    # Memory figures: the backend's own, from its hooks (``memory_stats`` and the methods
    # beside it, as ``torch.accelerator`` reads them through C++); when it reports none, the
    # bytes of its live payloads, which C++ counts as payloads are bound and released.
    def memory_stats(self, device=None) -> dict[str, int]:
        stats = getattr(self._hooks, "memory_stats", None)
        index = self._index(device)
        if stats is None:
            return _C.payload_memory_stats(index)
        figures = stats(index)
        if not isinstance(figures, dict) or not all(
            isinstance(k, str) and _is_int(v) for k, v in figures.items()
        ):
            raise TypeError(
                f"expected {type(self._hooks).__qualname__}.memory_stats() to return a dict "
                f"of str to int, but got {figures!r}"
            )
        return dict(figures)

    def memory_allocated(self, device=None) -> int:
        return self.memory_stats(device).get("allocated_bytes.all.current", 0)

    def max_memory_allocated(self, device=None) -> int:
        return self.memory_stats(device).get("allocated_bytes.all.peak", 0)

    def memory_reserved(self, device=None) -> int:
        return self.memory_stats(device).get("reserved_bytes.all.current", 0)

    def max_memory_reserved(self, device=None) -> int:
        return self.memory_stats(device).get("reserved_bytes.all.peak", 0)

    def _reset(self, method: str, reset_payload_figures, device) -> None:
        reset = getattr(self._hooks, method, None)
        index = self._index(device)
        if reset is not None:
            reset(index)
        elif getattr(self._hooks, "memory_stats", None) is not None:
            raise RuntimeError(
                f"{type(self._hooks).__qualname__} defines memory_stats() but no "
                f"{method}(device_index)"
            )
        else:
            reset_payload_figures(index)

    def reset_peak_memory_stats(self, device=None) -> None:
        self._reset("reset_peak_memory_stats", _C.reset_payload_peak_memory_stats, device)

    def reset_accumulated_memory_stats(self, device=None) -> None:
        self._reset(
            "reset_accumulated_memory_stats", _C.reset_payload_accumulated_memory_stats, device
        )

    def empty_cache(self) -> None:
        empty_cache = getattr(self._hooks, "empty_cache", None)
        if empty_cache is not None:
            empty_cache()

    def mem_get_info(self, device=None) -> tuple[int, int]:
        info = getattr(self._hooks, "mem_get_info", None)
        if info is None:
            raise NotImplementedError(
                f"the {self._name} backend reports no free and total memory: its hooks "
                f"({type(self._hooks).__qualname__}) define no mem_get_info(device_index)"
            )
        answer = info(self._index(device))
        if not (
            isinstance(answer, tuple)
            and len(answer) == 2
            and all(_is_int(v) and v >= 0 for v in answer)
        ):
            raise TypeError(
                f"expected {type(self._hooks).__qualname__}.mem_get_info() to return a "
                f"(free, total) pair of non-negative ints, but got {answer!r}"
            )
        free, total = answer
        return int(free), int(total)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_name(name) -> str:
    if name is None:
        return _DEFAULT_NAME
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
    global _setup_done
    name = _check_name(rename)
    # Type errors before anything else, whatever state the process is in.
    if hook is not None:
        _check_type(hook, _C.PrivateUse1Hooks, "hook")
    if device_guard is not None:
        _check_type(device_guard, _C.DeviceGuard, "device_guard")
    with _lock:
        if _setup_done is not None:
            done_name, done_module, done_hook, done_guard = _setup_done
            if done_name != name:
                raise RuntimeError(
                    f"cannot set up backend {name!r}: PrivateUse1 is already held by backend "
                    f"{done_name!r} (one Python backend per process on this torch)"
                )
            if backend_module is not None and backend_module is not done_module:
                raise RuntimeError(
                    f"backend {name!r} is already set up with device module {done_module!r}, "
                    f"not {backend_module!r}"
                )
            # Hooks or a guard of the class given (or a subclass) are what was asked for:
            # setting up again with a new instance of the same hooks does nothing.
            for what, given, done in (
                ("hooks", hook, done_hook),
                ("device guard", device_guard, done_guard),
            ):
                if given is not None and not isinstance(done, type(given)):
                    raise RuntimeError(
                        f"backend {name!r} is already set up with {what} "
                        f"{type(done).__qualname__}, not {type(given).__qualname__}: a "
                        f"backend's {what} cannot be replaced; pass {type(given).__qualname__} "
                        "(or a subclass of it) to the first setup"
                    )
            return done_module
        _check_slot_free(name)

        hook = _DefaultHooks() if hook is None else hook
        if device_guard is None:
            device_guard = _DefaultDeviceGuard(backend_module)
        if backend_module is None:
            backend_module = _DefaultDeviceModule(name, hook)

        # The order matters: methods and the device module are named after the backend, and
        # the device guard must exist before anything asks for a device of this type.
        if name != _DEFAULT_NAME:
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
        _refuse_inductor(name)
        _register_dynamo_backend()
        _register_distributed(name)
        atexit.register(_at_exit)
        _setup_done = (name, backend_module, hook, device_guard)
        return backend_module


def _register_distributed(name: str) -> None:
    """The device's c10d backend (:mod:`torch_acc.distributed`), where torch has
    ``torch.distributed``."""
    if torch.distributed.is_available():
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
    there, so the pass it ends is released while Python is intact."""
    if _setup_done is None:
        return
    name = _setup_done[0]
    try:
        for index in range(_C.device_count()):
            leaf = torch.zeros((), device=f"{name}:{index}", requires_grad=True)
            # Rooted on the CPU: the leaf's gradient is accumulated on the device's thread.
            leaf.cpu().backward()
    except Exception:  # noqa: BLE001
        # A backend that cannot run this pass (no kernels registered yet, an error in
        # them) has no backward of its own to drain; exit goes on.
        return


def _refuse_inductor(name: str) -> None:
    """Make ``torch.compile``'s default backend, inductor, refuse the device with one error.

    Inductor generates code that reads tensors' storages, which a Python backend's tensors do
    not have; without a code generator registered for the device it fails somewhere inside
    lowering (on torch 2.6 with ``'NoneType' object is not callable``). A backend with a
    compiler of its own registers it with :func:`register_compile_backend`, and
    ``torch.compile(backend="per_device")`` uses it.
    """
    from torch._inductor.codegen.common import register_backend_for_device

    def refuse(*args, **kwargs):
        raise RuntimeError(inductor_refusal(name))

    register_backend_for_device(name, refuse, refuse)


def inductor_refusal(name: str) -> str:
    """The error of inductor asked to compile for the Python backend ``name``."""
    return (
        f"inductor cannot compile for {name}: tensors on {name} have no storage for "
        f"generated code to read. Use torch.compile(backend={COMPILE_BACKEND!r}), which "
        f"runs the compiler the {name} backend registers with register_compile_backend "
        "(aot_eager where it registers none), or backend='aot_eager' (or 'eager')"
    )


#: The name of the ``torch.compile`` backend that hands a graph to the compiler its device's
#: backend registered (:func:`register_compile_backend`).
COMPILE_BACKEND = "per_device"

#: device type -> (compiler_fn, aot) of :func:`register_compile_backend`.
_compilers: dict[str, tuple[object, bool]] = {}
_dynamo_backend_registered = False
#: Guards the two above; setup holds ``_lock`` while it registers the Dynamo backend.
_compile_lock = threading.Lock()


def register_compile_backend(device, compiler_fn, *, aot: bool = True) -> None:
    r"""Register the compiler that ``torch.compile`` uses for graphs on ``device``.

    ``torch.compile(model, backend="per_device")`` gives a graph whose inputs (and parameters)
    are on ``device`` to ``compiler_fn``; a graph on a device without a registered compiler
    (the CPU, another backend) runs with ``aot_eager``. One graph is compiled for one device:
    a graph with inputs on two devices that both registered compilers is an error.

    Args:
        device (str or torch.device): a Python backend's device type (``"npy"``), set up or
            registered (``register_backend``); not an index.
        compiler_fn: ``compiler_fn(graph_module, example_inputs)``, a callable that runs the
            graph: called with positional tensors, it returns what ``graph_module`` returns.
            This is a ``torch.compile`` backend's signature (a JAX ``jit``, a NumPy graph
            executor...).
        aot (bool): with ``True`` (the default), ``compiler_fn`` gets the ATen-level forward
            and backward graphs of AOTAutograd (as inductor does), whose example inputs are
            fake tensors, and needs no autograd of its own; with ``False``, Dynamo's
            torch-level graph, which it must run with autograd if gradients are wanted.

    Registering again replaces the device's compiler; what was compiled with the previous one
    keeps it until ``torch._dynamo.reset()``.

    Example::

        >>> # xdoctest: +SKIP
        >>> def compiler(gm, example_inputs):
        ...     print(gm.graph)
        ...     return gm.forward
        >>> register_compile_backend("npy", compiler)
        >>> torch.compile(model.to("npy"), backend="per_device")(x.to("npy"))
    """
    if isinstance(device, torch.device):
        if device.index is not None:
            raise ValueError(
                f"register_compile_backend takes a device type, but got {device} (with an "
                f"index): use {device.type!r}"
            )
        device = device.type
    if not isinstance(device, str):
        raise TypeError(
            f"expected device to be a str or torch.device, but got {type(device).__qualname__}"
        )
    if not _is_known_backend(device):
        raise ValueError(
            f"cannot register a compile backend for {device!r}: it is not a Python backend "
            "set up or registered in this process (expected one of: "
            f"{', '.join(map(repr, _known_backends())) or 'none'})"
        )
    if not callable(compiler_fn):
        raise TypeError(
            f"cannot register a compile backend for {device!r}: expected compiler_fn to be "
            f"callable, but got {type(compiler_fn).__qualname__}"
        )
    with _compile_lock:
        _compilers[device] = (compiler_fn, bool(aot))
    _register_dynamo_backend()


def _known_backends() -> list[str]:
    from torch_acc import registry

    names = set(registry._registry)
    if _setup_done is not None:
        names.add(_setup_done[0])
    return sorted(names)


def _is_known_backend(name: str) -> bool:
    return name in _known_backends()


def _register_dynamo_backend() -> None:
    """Registers :data:`COMPILE_BACKEND` with ``torch._dynamo`` (once)."""
    global _dynamo_backend_registered
    with _compile_lock:
        if _dynamo_backend_registered:
            return
        from torch._dynamo import register_backend

        register_backend(_compile_for_device, name=COMPILE_BACKEND)
        _dynamo_backend_registered = True


def _graph_devices(gm, example_inputs) -> list[str]:
    """The device types of a graph's tensors: inputs, parameters and buffers, in order."""
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    tensors += list(gm.parameters()) + list(gm.buffers())
    return list(dict.fromkeys(t.device.type for t in tensors))


def _compile_for_device(gm, example_inputs):
    """The ``torch_acc`` compile backend: the compiler of the graph's device, or aot_eager."""
    devices = [d for d in _graph_devices(gm, example_inputs) if d in _compilers]
    if len(devices) > 1:
        raise RuntimeError(
            f"cannot compile one graph for {devices[0]} and {devices[1]}: both registered a "
            f"compile backend, and backend={COMPILE_BACKEND!r} gives a graph to one device's "
            "compiler. Move the inputs to one device"
        )
    if not devices:
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example_inputs)
    compiler_fn, aot = _compilers[devices[0]]
    if not aot:
        return compiler_fn(gm, example_inputs)
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_compiler

    return aot_autograd(fw_compiler=make_boxed_compiler(compiler_fn))(gm, example_inputs)


def _check_type(obj, cls, what: str) -> None:
    if not isinstance(obj, cls):
        raise TypeError(
            f"expected {what} to be an instance of a subclass of {cls.__module__}.{cls.__name__}, "
            f"but got {type(obj).__qualname__}"
        )


def _holder() -> str:
    return torch._C._get_privateuse1_backend_name()


def _check_slot_free(name: str) -> None:
    holder = _holder()
    taken = (
        holder not in (_DEFAULT_NAME, name)
        or getattr(torch, holder, None) is not None
        or _C.is_device_guard_registered()
        or _C.is_hook_registered()
    )
    if taken:
        raise RuntimeError(
            f"cannot set up backend {name!r}: PrivateUse1 is already held by backend "
            f"{holder!r}, set up by other means (only one PrivateUse1 backend per process)"
        )


def _register(register, obj, name: str) -> None:
    if not register(obj):
        raise RuntimeError(
            f"cannot set up backend {name!r}: PrivateUse1 is already held by backend "
            f"{_holder()!r}, whose {register.__name__.rsplit('_', 1)[-1]} is installed"
        )
