r"""Runtime patches that give stock torch wheels what the patch series changes in-tree.

Each source change of the series is one entry of :data:`SOURCE_CHANGES`, applied once by
:func:`apply`; :func:`accelerator_choice` stands in for ``torch.accelerator`` changes.

Each helper imports the torch_acc modules it uses when it is called: in-tree it is a function
of the torch module it changes (``torch/_tensor.py``...), which cannot import
``torch.utils._acc`` while ``torch`` loads. This module imports nothing of torch_acc at its top:
it sits below the setup and the accelerator choice, which call it, and takes the choice as a
callback (:func:`accelerator_choice`).
"""

import functools
import importlib
import inspect
import sys
import textwrap

import torch

__all__ = [
    "apply",
    "autocast_device_type",
    "collates_into_shared_storage",
    "payload_is_shared",
    "prints_through_cpu",
    "reduce_payload_tensor",
    "refuse_python_backend_graph",
    "resize_storage",
    "restore_tensor",
    "run_backward",
    "share_payload_memory",
    "storage_holds_no_data",
    "swaps_storage_less_param",
    "untyped_storage_of",
]

#: The source changes the patch series makes, mirrored at run time on stock wheels: in the
#: function ``function`` of module ``module``, each ``(old, new)`` of ``lines`` replaces text
#: that occurs once in that function; the new text may call ``helper`` (a function of this
#: module; in-tree it is added to ``module`` as ``_<helper>``). ``tools/gen_series.py`` reads
#: this literal to make the same change in the source. Each ``old`` is the same in torch 2.6
#: to 2.14, or from the release ``since`` names on (earlier ones, the series' base among
#: them, lack the code it changes). ``aliases`` names other modules' references to the
#: function, which torch took at import (``from .graph import _engine_run_backward``): they
#: are rebound at run time where the release has them; in-tree they take the changed
#: function at import. ``registries`` names dicts of ``module`` that hold the function as a
#: value (``default_collate_fn_map``): rebound the same way. Changes of one module may share
#: a helper.
SOURCE_CHANGES = (
    {
        # torch.profiler records a PrivateUse1 backend's device time in its fallback state,
        # which it takes for a renamed backend only; 2.6 then read that time only where
        # use_device was "privateuseone", never. 2.13 reads it for the backend's name.
        "module": "torch.autograd.profiler",
        "function": "profile._parse_kineto_results",
        "lines": (
            (
                'if self.use_device == "privateuseone":',
                "if self.use_device == _get_privateuse1_backend_name():",
            ),
        ),
    },
    {
        "module": "torch._subclasses.meta_utils",
        "function": "MetaTensorDescriber.describe_tensor",
        "lines": (
            (
                "self.describe_storage(t.untyped_storage(),",
                "self.describe_storage(_untyped_storage_of(t),",
            ),
        ),
        "helper": "untyped_storage_of",
    },
    {
        "module": "torch._tensor_str",
        "function": "_str_intern",
        "lines": (
            (
                'if self.device.type in ["xla", "lazy", "ipu", "mtia"]:',
                'if self.device.type in ["xla", "lazy", "ipu", "mtia"]'
                " or _prints_through_cpu(self):",
            ),
        ),
        "helper": "prints_through_cpu",
    },
    {
        # torch.save stores a storage-less tensor as a CPU copy plus its requires_grad flag,
        # unless its Python backend saves payloads in a format of its own
        # (library.impl_serialization). A copy made with self.cpu() from a tensor that
        # requires grad is a non-leaf, whose flag load cannot set: the copy is detached; the
        # flag saved beside it is set on load.
        "module": "torch._tensor",
        "function": "Tensor._reduce_ex_internal",
        "lines": (
            (
                "cpu_tensor = self.cpu()",
                "reduced = _reduce_payload_tensor(self)\n"
                "            if reduced is not None:\n"
                "                return reduced\n"
                "            cpu_tensor = self.detach().cpu()",
            ),
        ),
        "helper": "reduce_payload_tensor",
    },
    {
        # A payload tensor has no storage to move into shared memory: its backend's IPC
        # functions (library.impl_ipc) move its payload, or nothing happens, as for CUDA.
        "module": "torch._tensor",
        "function": "Tensor.share_memory_",
        "lines": (
            (
                "self._typed_storage()._share_memory_()",
                "if not _share_payload_memory(self):\n"
                "            self._typed_storage()._share_memory_()",
            ),
        ),
        "helper": "share_payload_memory",
    },
    {
        "module": "torch._tensor",
        "function": "Tensor.is_shared",
        "lines": (
            (
                "return self._typed_storage()._is_shared()",
                "shared = _payload_is_shared(self)\n"
                "        if shared is not None:\n"
                "            return shared\n"
                "        return self._typed_storage()._is_shared()",
            ),
        ),
        "helper": "payload_is_shared",
    },
    {
        # torch.load keeps a storage restored to a Python backend's device (saved there, or
        # map_location naming it) on the CPU, marked; each tensor on it moves to the device,
        # where the tensors of one storage share one payload (library.restore_tensor).
        "module": "torch._utils",
        "function": "_rebuild_tensor",
        "lines": (
            (
                "return t.set_(storage._untyped_storage, storage_offset, size, stride)",
                "return _restore_tensor(\n"
                "        t.set_(storage._untyped_storage, storage_offset, size, stride),\n"
                "        storage._untyped_storage,\n"
                "    )",
            ),
        ),
        "helper": "restore_tensor",
    },
    {
        # Inductor makes tensors of its own on a graph's device (pattern-matcher examples)
        # before any lowering could refuse a Python backend's device: a graph with tensors
        # there is refused first, with the compile backends that work.
        "module": "torch._inductor.compile_fx",
        "function": "compile_fx",
        "lines": (
            (
                "if config_patches:",
                "_refuse_python_backend_graph(model_, example_inputs_)\n    if config_patches:",
            ),
        ),
        "helper": "refuse_python_backend_graph",
    },
    {
        # A DataLoader worker stacks a batch into a tensor on a new shared-memory storage of
        # the batch's device; a Python backend's tensors have no storage: their batch is
        # stacked on the device and crosses to the main process through the backend's IPC
        # functions (library.impl_ipc), as a CUDA batch goes through CUDA's.
        "module": "torch.utils.data._utils.collate",
        "function": "collate_tensor_fn",
        "lines": (
            (
                "if torch.utils.data.get_worker_info() is not None:",
                "if torch.utils.data.get_worker_info() is not None and "
                "_collates_into_shared_storage(elem):",
            ),
        ),
        "helper": "collates_into_shared_storage",
        "registries": ("default_collate_fn_map",),
    },
    {
        # Module._apply keeps a parameter's Python object when its conversion has a TensorImpl
        # of a compatible type (param.data = ...), so that tied parameters stay tied and an
        # optimizer keeps its parameters; a Python backend's payload TensorImpl is not of the
        # CPU's type, so such a conversion swaps the two tensors instead (swap_tensors), as for
        # wrapper subclasses.
        "module": "torch.nn.modules.module",
        "function": "Module._apply",
        "lines": (
            (
                "is_traceable_wrapper_subclass(param_applied)",
                "is_traceable_wrapper_subclass(param_applied)\n"
                "                or _swaps_storage_less_param(param, param_applied)",
            ),
        ),
        "helper": "swaps_storage_less_param",
    },
    {
        # FSDP2 frees the memory of unsharded parameters and all-gather buffers by resizing
        # their storage to 0 bytes, and allocates it again by resizing it back. A payload
        # tensor's storage holds no data, which Python's storage refuses to resize: its
        # payload is released, and a new one bound, instead.
        "module": "torch.distributed.fsdp._fully_shard._fsdp_param",
        "function": "alloc_storage",
        "lines": (("storage.resize_(size)", "_resize_storage(tensor, storage, size)"),),
        "helper": "resize_storage",
        "aliases": ("torch.distributed.fsdp._fully_shard._fsdp_param_group.alloc_storage",),
    },
    {
        "module": "torch.distributed.fsdp._fully_shard._fsdp_param",
        "function": "free_storage",
        "lines": (("storage.resize_(0)", "_resize_storage(tensor, storage, 0)"),),
        "helper": "resize_storage",
    },
    {
        # From 2.13, FSDP2 tells a parameter's new local shard from the one it holds by the
        # data pointers of their storages, which Python refuses for a payload tensor's
        # storage (it holds no data). A payload tensor is taken as a new shard: FSDP copies
        # it, as it does one of another storage.
        "module": "torch.distributed.fsdp._fully_shard._fsdp_param",
        "function": "FSDPParam.reset_sharded_param",
        "since": (2, 13),
        "lines": (
            (
                "if type(self._sharded_param_data) is torch.Tensor:",
                "if type(self._sharded_param_data) is torch.Tensor and not "
                "_storage_holds_no_data(local_tensor):",
            ),
        ),
        "helper": "storage_holds_no_data",
    },
    {
        "module": "torch.amp.autocast_mode",
        "function": "autocast.__init__",
        "lines": (
            ("device_type: str,", "device_type: Optional[str] = None,"),
            (
                "if not isinstance(device_type, str):",
                "if not isinstance(device_type := _autocast_device_type(device_type), str):",
            ),
        ),
        "helper": "autocast_device_type",
    },
    {
        "module": "torch.autograd.graph",
        "function": "_engine_run_backward",
        "lines": (
            (
                "return Variable._execution_engine.run_backward(",
                "return _run_backward(Variable._execution_engine,",
            ),
        ),
        "helper": "run_backward",
        "aliases": ("torch.autograd._engine_run_backward",),
    },
)


def untyped_storage_of(t: torch.Tensor) -> torch.UntypedStorage:
    """The storage of ``t``, or for a payload tensor the meta storage standing for its payload.

    Payload tensors have no storage, but meta and fake conversion describe which tensors share
    data through their storages: every tensor on one payload gets the same meta storage, as
    large as the payload.
    """
    from torch_acc import _C

    if not _C.is_payload_tensor(t):
        return t.untyped_storage()
    token = _C.storage_token(t)
    if token is None:
        token = torch.UntypedStorage(_C.payload_nbytes(t), device="meta")
        _C.set_storage_token(t, token)
    return token


def reduce_payload_tensor(t: "torch.Tensor"):
    """How pickle saves the storage-less tensor ``t``: ``(rebuild function, arguments)`` when
    its Python backend saves payloads in a format of its own
    (``library.impl_serialization``), else None (through the CPU).

    The annotation is a string: in-tree this function is defined in ``torch/_tensor.py``,
    before ``torch.Tensor`` exists."""
    from torch_acc import _C, library

    if not _C.is_payload_tensor(t):
        return None
    return library.reduce_for_pickle(t)


def resize_storage(tensor: "torch.Tensor", storage, nbytes: int) -> None:
    """``storage.resize_(nbytes)``, ``storage`` being the storage of ``tensor``. A payload
    tensor's storage holds no data: its payload is released (0 bytes), or a new one is bound
    (from 0 bytes), which every tensor on the storage then reads."""
    from torch_acc import _C

    if _C.is_payload_tensor(tensor):
        _C.resize_payload_storage(tensor, nbytes)
    else:
        storage.resize_(nbytes)


def storage_holds_no_data(t: "torch.Tensor") -> bool:
    """Whether ``t`` is a Python backend's payload tensor, whose storage stands for its payload
    (which tensors share it, how large it is) without holding data."""
    from torch_acc import _C

    return _C.is_payload_tensor(t)


def share_payload_memory(t: "torch.Tensor") -> bool:
    """``Tensor.share_memory_`` of the storage-less tensor ``t``: its backend moves its payload
    into memory other processes can open where it can (``library.impl_ipc``). False if ``t``
    has a storage, which torch moves itself."""
    from torch_acc import _ipc

    return _ipc.share_memory_(t)


def payload_is_shared(t: "torch.Tensor"):
    """``Tensor.is_shared`` of the storage-less tensor ``t``: whether its payload lies in
    memory other processes can open; None if ``t`` has a storage."""
    from torch_acc import _ipc

    return _ipc.is_shared(t)


def restore_tensor(t: "torch.Tensor", storage) -> "torch.Tensor":
    """The tensor ``torch.load`` rebuilt on ``storage``, on the Python backend's device
    where the storage was restored to it (``library.restore_tensor``), else ``t``."""
    if getattr(storage, "_torch_acc_location", None) is None:
        return t
    from torch_acc import library

    return library.restore_tensor(t, storage)


def refuse_python_backend_graph(gm, example_inputs) -> None:
    """Raises inductor's refusal of a Python backend's device (naming the compile backends
    that work) where the graph ``gm`` has inputs, parameters or buffers on it."""
    from torch_acc import _C

    if not _C.is_python_backend():
        return
    name = torch._C._get_privateuse1_backend_name()
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if isinstance(gm, torch.nn.Module):
        tensors += list(gm.parameters()) + list(gm.buffers())
    if any(t.device.type == name for t in tensors):
        from torch_acc.compile import inductor_refusal

        raise RuntimeError(inductor_refusal(name))


def run_backward(engine, t_outputs, *args, **kwargs):
    """``engine.run_backward(t_outputs, *args, **kwargs)``, on the calling thread when a
    root of the graph is a tensor of a Python backend.

    The autograd engine runs the backward of every device but the CPU on a thread of its own
    per device, as CUDA needs: ``backward()`` hands the graph over to that thread and waits
    for it, having released the GIL, and every kernel there takes the GIL back. A Python
    backend's kernels need the GIL anyway, so that thread only adds two hand-offs per
    ``backward()`` and a GIL hand-off per kernel. With multithreading disabled (the
    documented ``torch.autograd.set_multithreading_enabled``, for the call only) the
    calling thread runs the graph, as it does for the CPU. A graph whose roots are on
    another device keeps the engine's threads.

    An error of the backend's device guard that the engine could not take (a guard method
    called where nothing can throw, see ``csrc/acc/DeviceGuard.h``) is kept on the thread
    that ran into it; a pass that returns raises the one kept on the calling thread.
    """
    from torch_acc import _C

    if not _C.is_python_backend():
        return engine.run_backward(t_outputs, *args, **kwargs)
    name = torch._C._get_privateuse1_backend_name()
    if any(isinstance(t, torch.Tensor) and t.device.type == name for t in t_outputs):
        with torch.autograd.set_multithreading_enabled(False):
            result = engine.run_backward(t_outputs, *args, **kwargs)
    else:
        result = engine.run_backward(t_outputs, *args, **kwargs)
    _C.raise_pending_error()
    return result


def prints_through_cpu(t: torch.Tensor) -> bool:
    """Whether printing ``t`` formats a CPU copy of it: a tensor of a Python backend.

    Printing does so for xla, lazy, ipu and mtia tensors, whose printing would otherwise run
    a dozen small operators on the device; the same holds for a Python backend, which may not
    have those operators at all.
    """
    from torch_acc import _C

    return t.device.type == torch._C._get_privateuse1_backend_name() and _C.is_python_backend()


def collates_into_shared_storage(elem) -> bool:
    """Whether a DataLoader worker stacks a batch of tensors like ``elem`` into a new storage
    in shared memory: not for the storage-less tensor of a Python backend."""
    from torch_acc import _C

    return not _C.is_payload_tensor(elem)


def swaps_storage_less_param(param, param_applied) -> bool:
    """Whether ``Module._apply`` swaps ``param`` with its conversion ``param_applied``: where
    one of them is a Python backend's storage-less tensor, whose TensorImpl the other cannot
    take in place."""
    from torch_acc import _C

    return not torch._has_compatible_shallow_copy_type(param, param_applied) and (
        _C.is_payload_tensor(param) or _C.is_payload_tensor(param_applied)
    )


def autocast_device_type(device_type) -> str:
    """The device type of ``torch.autocast(device_type=None)``: the current accelerator's.

    That is the accelerator chosen with ``set_current_accelerator`` (or, with no choice, the
    one this build detects); ``"cpu"`` when there is none. Any other ``device_type`` is
    returned as it is, for ``autocast`` to check. (Unannotated: the in-tree copy must also
    load on the Python releases whose ``X | None`` annotations fail at definition time.)
    """
    if device_type is not None:
        return device_type
    if not torch.accelerator.is_available():
        return "cpu"
    return torch.accelerator.current_accelerator().type


def _function_source(change: dict, source: str) -> str:
    """``source`` (a function's) with the changes of ``change["lines"]`` made; each ``old``
    must occur exactly once."""
    for old, new in change["lines"]:
        count = source.count(old)
        if count != 1:
            raise RuntimeError(
                f"torch {torch.__version__}: expected {old!r} once in "
                f"{change['module']}.{change['function']}, but found it {count} times; the "
                "series' change needs updating (torch_acc/_patches.py)"
            )
        source = source.replace(old, new)
    return source


def _apply_source_change(change: dict) -> None:
    """Recompiles one function of a torch module with its lines changed (``SOURCE_CHANGES``)."""
    module = importlib.import_module(change["module"])
    *owner_path, name = change["function"].split(".")
    owner = functools.reduce(getattr, owner_path, module)
    function = getattr(owner, name)
    if getattr(function, "_torch_acc_source_change", False):
        return  # applied already
    aliases = []
    for alias in change.get("aliases", ()):
        alias_module, attr = alias.rsplit(".", 1)
        holder = sys.modules.get(alias_module)
        if not hasattr(holder, attr):
            # Not imported yet (its import will take the changed function), or a release
            # without this reference.
            continue
        if getattr(holder, attr) is not function:
            raise RuntimeError(
                f"torch {torch.__version__}: expected {alias} to be "
                f"{change['module']}.{change['function']}; the series' change needs updating "
                "(torch_acc/_patches.py)"
            )
        aliases.append((holder, attr))
    # The lines are changed before the source is dedented: a new text of several lines
    # carries the indentation of the file, as the series' change of the source does.
    source = inspect.getsource(function)
    namespace = dict(vars(module))
    if "helper" in change:
        helper = "_" + change["helper"]
        if hasattr(module, helper):
            return  # a torch with the series applied
        namespace[helper] = globals()[change["helper"]]
    elif all(new in source and old not in source for old, new in change["lines"]):
        return  # a torch with the series applied
    code = compile(
        "from __future__ import annotations\n"
        + textwrap.dedent(_function_source(change, source)),
        module.__file__,
        "exec",
    )
    exec(code, namespace)  # noqa: S102 - the same function, with its lines changed
    changed = namespace[name]
    changed._torch_acc_source_change = True
    setattr(owner, name, changed)
    for holder, attr in aliases:
        setattr(holder, attr, changed)
    for registry in change.get("registries", ()):
        table = getattr(module, registry)
        for key in [k for k, v in table.items() if v is function]:
            table[key] = changed


_ORIGINALS: dict[str, object] = {}


def original(name: str):
    """The torch function a patch replaced (``"current_accelerator"``...)."""
    return _ORIGINALS.get(name) or getattr(torch.accelerator, name)


def accelerator_choice(chosen) -> None:
    """``torch.accelerator`` and ``torch.get_device_module()`` report the accelerator that
    ``chosen()`` names: it returns ``(False, None)`` while none was chosen (torch's own answers
    stand), else ``(True, device)``, ``device`` None for none (the CPU only).

    Upstream, ``torch.accelerator.set_current_accelerator`` makes ``at::getAccelerator``
    honour the choice. A stock wheel's C++ cannot be changed from Python, so only these
    Python entry points see it: ``torch.accelerator.current_accelerator``, ``device_count``,
    ``is_available``, and ``torch.get_device_module()`` without an argument. C++ callers of
    ``at::getAccelerator`` (``torch.accelerator.current_device_index``, ``set_device_index``,
    ``current_stream``, ``synchronize``, pinned memory's default device, the autograd engine)
    still see the build's accelerator (PrivateUse1 once a Python backend is bound).
    """
    if _ORIGINALS:
        return
    acc = torch.accelerator
    _ORIGINALS.update(
        current_accelerator=acc.current_accelerator,
        device_count=acc.device_count,
        is_available=acc.is_available,
        get_device_module=torch.get_device_module,
    )

    def chosen_module(choice):
        return _ORIGINALS["get_device_module"](choice.type)

    @functools.wraps(acc.current_accelerator)
    def current_accelerator(*args, **kwargs):
        made, choice = chosen()
        if not made:
            return _ORIGINALS["current_accelerator"](*args, **kwargs)
        check_available = kwargs.get("check_available", args[0] if args else False)
        if choice is None or (check_available and not chosen_module(choice).is_available()):
            return None
        return choice

    @functools.wraps(acc.device_count)
    def device_count():
        made, choice = chosen()
        if not made:
            return _ORIGINALS["device_count"]()
        return 0 if choice is None else chosen_module(choice).device_count()

    @functools.wraps(acc.is_available)
    def is_available():
        made, choice = chosen()
        if not made:
            return _ORIGINALS["is_available"]()
        return choice is not None and chosen_module(choice).is_available()

    @functools.wraps(torch.get_device_module)
    def get_device_module(device=None):
        made, choice = chosen()
        if device is None and made:
            return torch.cpu if choice is None else chosen_module(choice)
        return _ORIGINALS["get_device_module"](device)

    acc.current_accelerator = current_accelerator
    acc.device_count = device_count
    acc.is_available = is_available
    torch.get_device_module = get_device_module


@functools.cache
def apply() -> None:
    """Apply every source change of ``SOURCE_CHANGES`` (once per process), each when its
    module is imported (at once where it is: inductor's waits, as it takes seconds)."""
    from torch_acc._compat import TORCH_VERSION
    from torch_acc._imports import when_imported

    for change in SOURCE_CHANGES:
        if TORCH_VERSION < change.get("since", TORCH_VERSION):
            continue
        when_imported(change["module"], functools.partial(_apply_source_change, change))
