r"""The device module registered as ``torch.<name>`` for a backend that gives none."""

import contextlib

import torch

from torch_acc import _C, _ipc

__all__ = ["DefaultDeviceModule", "DeviceGuard", "PrivateUse1Hooks", "current_device"]

#: The classes a backend subclasses for its device guard and hooks (``device_guard=`` and
#: ``hook=`` of ``setup_privateuseone_for_python_backend``), also ``torch_acc.DeviceGuard`` and
#: ``torch_acc.PrivateUse1Hooks``. Backends import them from here: ``import torch_acc`` imports
#: torch, whose autoload imports the backends while ``torch_acc`` is still initialising.
DeviceGuard = _C.DeviceGuard
PrivateUse1Hooks = _C.PrivateUse1Hooks

#: ``current_device()``: the calling thread's current device index of the backend on
#: PrivateUse1, as its device guard answers (``torch.<name>.current_device()`` returns it):
#: for kernels that place their results on the current device. C++, no Python frame: kernels
#: call it on every operator.
current_device = _C.current_device


class DefaultDeviceModule:
    r"""The device module registered as ``torch.<name>`` when the backend gives none.

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

    # Streams and events: torch's generic ones on this backend's devices (its device guard
    # answers them), under the names of CUDA's device module, which FSDP asks of the module
    # of its device.
    def Stream(self, device=None, priority: int = 0) -> torch.Stream:  # noqa: N802
        return torch.Stream(device=torch.device(self._name, self._index(device)), priority=priority)

    def Event(  # noqa: N802
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        return torch.Event(
            device=self._name,
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def current_stream(self, device=None) -> torch.Stream:
        return torch.accelerator.current_stream(self._index(device))

    @contextlib.contextmanager
    def stream(self, stream: torch.Stream | None):
        """Makes ``stream`` the current stream of its device inside the block, as
        ``torch.cuda.stream`` does; None changes nothing."""
        if stream is None:
            yield
            return
        device = _C.current_device()
        previous = torch.accelerator.current_stream(stream.device_index)
        torch.accelerator.set_stream(stream)
        try:
            yield
        finally:
            torch.accelerator.set_stream(previous)
            _C.set_device(device)

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
