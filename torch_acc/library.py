r"""Register a Python backend's kernels: functions that take and return payloads.

A payload is the backend's own data (a NumPy array, a JAX array, a remote handle...). The
kernel bridge in C++ unwraps payload tensors, calls the kernel with payloads and plain Python
values (numbers, lists, ``torch.dtype``...), and wraps the payloads it returns, without making
Python tensor objects on the way. A kernel for an in-place or ``out=`` overload either writes
into the payload it is given or returns the new payload, which is then bound to the tensor.

Example::

    >>> # xdoctest: +SKIP
    >>> from torch_acc import library
    >>> @library.impl("aten::add.Tensor")
    ... def add(a, b, *, alpha=1):
    ...     return a + alpha * b
"""

import contextlib
import functools
import os
import weakref

import torch

from torch_acc import _C, _ipc, record
from torch_acc.payload import describe as _describe
from torch_acc.payload import layout as _layout

__all__ = [
    "check_kernels",
    "cpu_as_strided",
    "declare_fork_safe",
    "functional_overload",
    "impl",
    "impl_element_size_views",
    "impl_ipc",
    "impl_payload",
    "impl_serialization",
    "wrapped_number",
]

#: ``wrapped_number(value)``: a 0-dim CPU tensor of a Python ``bool``, ``int``, ``float`` or
#: ``complex`` marked as a wrapped number, as PyTorch's Python bindings make one for a number
#: passed where an operator takes a Tensor: type promotion then treats it as a scalar
#: (``int8_tensor + wrapped_number(1.5)`` is float32, not float64). For a backend that calls
#: torch operators on CPU tensors with the Python numbers its kernels received (C++,
#: ``csrc/acc/Module.cpp``).
wrapped_number = _C.wrapped_number


def _backend() -> record.BackendRecord:
    """The record of the backend on PrivateUse1, which holds what is registered here."""
    return record.privateuse1()


def _payload_functions() -> dict:
    """``to_cpu``, ``from_cpu`` and ``copy_into`` of :func:`impl_payload` (empty before)."""
    return _backend().payload_functions


def impl(op: str, fn=None, *, cpu_passthrough: bool = False):
    r"""Register ``fn`` as the kernel of the aten overload ``op`` (``"add.Tensor"``).

    Usable as a decorator. The kernel receives payloads for tensors on the device, Python
    scalars for CPU scalars, and Python values for everything else, in the operator's
    argument order (keyword-only arguments by keyword). It returns a payload per tensor
    result.

    ``cpu_passthrough=True`` declares that ``fn`` runs the operator's CPU kernel on payloads
    that are CPU tensors and returns what it returns (a passthrough backend such as
    ``torch_acc.backends.reference``): the bridge then runs CPU's kernel on the payloads
    itself, with no Python call, and calls ``fn`` only for operators that take a generator
    (whose state is the backend's Python object). A payload that is not a CPU tensor is then
    an error naming the operator.
    """

    if not _C.is_python_backend():
        raise RuntimeError(
            f"cannot register a kernel for {op}: set up a backend first "
            "(setup_privateuseone_for_python_backend)"
        )

    def register(f):
        _C.register_kernel(op, f, cpu_passthrough=cpu_passthrough)
        return f

    return register if fn is None else register(fn)


@functools.cache
def functional_overload(op):
    r"""The functional overload matching the in-place or ``out=`` overload ``op`` (the one of
    the same operator that takes its arguments but the ``out=`` ones and mutates nothing), or
    None (``op`` is neither, or has no such overload).

    Example::

        >>> # xdoctest: +SKIP
        >>> library.functional_overload(torch.ops.aten.add.out)
        <OpOverload(op='aten.add', overload='Tensor')>
    """
    schema = op._schema
    name = schema.name.split("::", 1)[-1]
    inplace = name.endswith("_") and not name.endswith("__")
    if not inplace and not any(a.is_out for a in schema.arguments):
        return None
    base = getattr(torch.ops.aten, name[:-1] if inplace else name, None)
    if base is None:
        return None
    wanted = [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]
    for overload in base.overloads():
        candidate = getattr(base, overload)
        cs = candidate._schema
        if cs.is_mutable or any(a.is_out for a in cs.arguments):
            continue
        if [(a.name, str(a.type)) for a in cs.arguments] == wanted:
            return candidate
    return None


def cpu_as_strided(payload: torch.Tensor, size, stride, storage_offset: int) -> torch.Tensor:
    r"""``as_strided`` for :func:`impl_payload` of a backend whose payloads are CPU tensors:
    the view of ``payload`` (offsets relative to its own). Registered, the C++ core makes the
    views itself, without calling it."""
    return payload.as_strided(size, stride, payload.storage_offset() + storage_offset)


def impl_payload(*, as_strided, to_cpu, from_cpu, copy_into):
    r"""Register the four functions every payload backend provides.

    Args:
        as_strided: ``as_strided(payload, size, stride, storage_offset)``, the payload of a
            view (sizes and strides in elements, relative to the payload's own layout), of
            shape ``size``; :func:`cpu_as_strided` for payloads that are CPU tensors.
        to_cpu: ``to_cpu(payload)``, a CPU ``torch.Tensor`` with the payload's values, shape
            and dtype.
        from_cpu: ``from_cpu(tensor)``, a new payload with a CPU tensor's values, shape and
            dtype.
        copy_into: ``copy_into(dst, src)``, writes ``src`` into the payload ``dst`` (with
            broadcasting and dtype conversion) and returns ``dst``, or returns the new payload
            for a backend whose payloads are immutable: one with ``dst``'s shape, dtype and
            strides, for a tensor that spans its whole payload (not for a view of part of it).

    What each function returns is checked: a result that breaks these rules is a
    ``TypeError`` (not a tensor or payload at all) or ``RuntimeError`` (wrong shape, dtype or
    strides) naming the backend, the function and what it returned.
    """
    backend = _backend()
    if backend.payload_functions:
        raise RuntimeError("the payload functions of this backend are already registered")
    backend.payload_functions.update(to_cpu=to_cpu, from_cpu=from_cpu, copy_into=copy_into)
    _C.set_as_strided(_checked_as_strided(as_strided), cpu=as_strided is cpu_as_strided)
    _C.set_copy_into(copy_into)
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    lib.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
    # PyTorch's conjugate/negative fallbacks would materialize a conj or neg view by a
    # clone, which copies through _copy_from again, without end: _copy_from resolves the
    # bits itself (through the CPU).
    for key in ("Conjugate", "Negative"):
        lib.impl("_copy_from", torch.library.fallthrough_kernel, key)
        lib.impl("_copy_from_and_resize", torch.library.fallthrough_kernel, key)
    backend.libraries.append(lib)


_COMPLEX_OF = {
    torch.float16: torch.complex32,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}
_REAL_OF = {c: r for r, c in _COMPLEX_OF.items()}


def impl_element_size_views(reinterpret):
    r"""Register ``view_as_real`` and ``view_as_complex`` for the backend, which views change
    the element size and share their base's memory, with CPU's offsets and strides.

    A view's payload comes from its base's (a tensor's own payload keeps one element size),
    through ``reinterpret(payload, dtype)``: a payload over the same memory as the 1-D
    ``payload`` with ``torch.dtype`` ``dtype``, half or twice the element size (NumPy's
    ``array.view(dtype)``, a CPU tensor's ``tensor.view(dtype)``). A negative view stays one.

    Example::

        >>> # xdoctest: +SKIP
        >>> library.impl_element_size_views(lambda payload, dtype: payload.view(dtype))
    """
    backend = _backend()
    lib = torch.library.Library("aten", "IMPL")

    def storage_as(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        # The base a view that changes the element size is a view of: its memory from the
        # payload's start to the tensor's last element, so that the offset is CPU's.
        n = tensor.storage_offset() + 1 + sum(
            (size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True)
        )
        flat = tensor.as_strided((n if tensor.numel() else 0,), (1,), 0)
        view = _C.wrap(reinterpret(_C.materialize(flat), dtype), device=tensor.device)
        _C.mark_shared_memory(view, tensor)
        return view

    def view_as_real(self: torch.Tensor) -> torch.Tensor:
        if not self.is_complex():
            raise RuntimeError("view_as_real is only supported for complex tensors")
        if self.is_conj():
            raise RuntimeError(
                "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the "
                "conjugate tensor so you can view it as real, use self.resolve_conj(); however, "
                "be warned that the resulting tensor will NOT alias the original."
            )
        view = storage_as(self, _REAL_OF[self.dtype]).as_strided(
            (*self.shape, 2), (*(2 * st for st in self.stride()), 1), 2 * self.storage_offset()
        )
        return torch._neg_view(view) if self.is_neg() else view

    def view_as_complex(self: torch.Tensor) -> torch.Tensor:
        if self.dtype not in _COMPLEX_OF:
            raise RuntimeError(
                "view_as_complex is only supported for half, float and double tensors, but got "
                f"a tensor of scalar type: {self.dtype}"
            )
        if self.ndim == 0 or self.shape[-1] != 2:
            raise RuntimeError("Tensor must have a last dimension of size 2")
        if self.stride(-1) != 1:
            raise RuntimeError("Tensor must have a last dimension with stride 1")
        if any(st % 2 for st in self.stride()[:-1]):
            raise RuntimeError(
                "Tensor must have a stride divisible by 2 for all but last dimension"
            )
        if self.storage_offset() % 2:
            raise RuntimeError("Tensor must have a storage_offset divisible by 2")
        # Even offset and strides: the memory up to the last element has an even length.
        view = storage_as(self, _COMPLEX_OF[self.dtype]).as_strided(
            self.shape[:-1], tuple(st // 2 for st in self.stride()[:-1]),
            self.storage_offset() // 2,
        )
        return torch._neg_view(view) if self.is_neg() else view

    lib.impl("view_as_real", view_as_real, "PrivateUse1")
    lib.impl("view_as_complex", view_as_complex, "PrivateUse1")
    backend.libraries.append(lib)


def _on_device(t: torch.Tensor) -> bool:
    return t.device.type == torch._C._get_privateuse1_backend_name()


def _function_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _bad_result(function: str, result, expected: str, error=RuntimeError) -> Exception:
    backend = torch._C._get_privateuse1_backend_name()
    fn = _payload_functions().get(function)
    named = function if fn is None else f"{function} ({_function_name(fn)})"
    return error(
        f"the {backend} backend's payload function {named} returned {_describe(result)}, "
        f"but expected {expected}"
    )


def _checked_as_strided(as_strided):
    """``as_strided`` with its result's shape checked. The C++ core calls it for every view
    it gives a kernel, so where the shape is right the check is one comparison of tuples
    (about 0.1 us, against 4 us for ``a[1:] + b[1:]`` on 4x4 views)."""

    def view(payload, size, stride, storage_offset):
        result = as_strided(payload, size, stride, storage_offset)
        try:
            if result.shape == size:
                return result
            shape = tuple(int(s) for s in result.shape)  # a shape that is a list, say
        except Exception:  # noqa: BLE001 - reported as not a payload below
            shape = None
        if shape == tuple(size):
            return result
        backend = torch._C._get_privateuse1_backend_name()
        raise (TypeError if shape is None else RuntimeError)(
            f"the {backend} backend's payload function as_strided "
            f"({_function_name(as_strided)}) returned {_describe(result)}, but expected a "
            f"payload of the view's shape {tuple(size)} (size {tuple(size)}, stride "
            f"{tuple(stride)}, storage offset {storage_offset})"
        )

    return view


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b``, of one shape, lay their elements out alike in memory."""
    return a.numel() == 0 or all(
        sa == sb for n, sa, sb in zip(a.shape, a.stride(), b.stride(), strict=True) if n > 1
    )


def _extent(t: torch.Tensor) -> int:
    """Bytes from the start of ``t``'s payload to the end of its last element."""
    if t.numel() == 0:
        return 0
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return (last + 1) * t.element_size()


def _to_cpu(t: torch.Tensor) -> torch.Tensor:
    """``to_cpu`` of the payload of the device tensor ``t``, checked."""
    value = _payload_functions()["to_cpu"](_C.materialize(t))
    if (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.shape == t.shape
        and value.dtype == t.dtype
    ):
        return value
    raise _bad_result(
        "to_cpu",
        value,
        f"a CPU torch.Tensor of shape {tuple(t.shape)} and dtype {t.dtype} (the tensor's)",
        TypeError if not isinstance(value, torch.Tensor) else RuntimeError,
    )


def _from_cpu(t: torch.Tensor):
    """``from_cpu`` of the CPU tensor ``t``, checked."""
    result = _payload_functions()["from_cpu"](t)
    found = _layout(result)
    if found is None or found.shape != t.shape or found.dtype != t.dtype:
        raise _bad_result(
            "from_cpu",
            result,
            f"a payload of shape {tuple(t.shape)} and dtype {t.dtype} (the CPU tensor's)",
            TypeError if found is None else RuntimeError,
        )
    return result


def _write(dst: torch.Tensor, value) -> None:
    given = _C.materialize(dst)
    result = _payload_functions()["copy_into"](given, value)
    if result is given:
        return
    found = _layout(result)
    if found is None or found.shape != dst.shape or found.dtype != dst.dtype:
        raise _bad_result(
            "copy_into",
            result,
            f"the dst payload it was given or a new payload of dst's shape {tuple(dst.shape)} "
            f"and dtype {dst.dtype}",
            TypeError if found is None else RuntimeError,
        )
    if dst.storage_offset() != 0 or _extent(dst) != _C.payload_nbytes(dst):
        raise _bad_result(
            "copy_into",
            result,
            "the dst payload it was given: dst is a view of part of a payload, which a new "
            "payload cannot replace (write into dst)",
        )
    if not _same_strides(found, dst):
        raise _bad_result(
            "copy_into",
            result,
            f"the dst payload it was given or a new payload laid out as dst (strides "
            f"{dst.stride()}), but the new payload has strides {found.stride()}",
        )
    _C.set_payload(dst, result)


def _values(t: torch.Tensor) -> torch.Tensor:
    """A tensor's values on the CPU, its conj and neg bits applied."""
    if not _on_device(t):
        return t.detach().resolve_conj().resolve_neg()
    value = _to_cpu(t)
    if t.is_conj():
        value = torch.conj_physical(value)
    if t.is_neg():
        value = _negated(value)
    return value


def _negated(value: torch.Tensor) -> torch.Tensor:
    """CPU values negated as CPU resolves a negative view (an empty bool one too)."""
    return torch._neg_view(value).resolve_neg()


def _copy_with_bits(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """_copy_from where src or dst is a conjugate or negative view."""
    value = _values(src)
    if not _on_device(dst):
        dst.copy_(value)
        return dst
    # In dst's dtype first, as CPU copies: the bits apply to the values dst holds.
    value = value.to(dst.dtype)
    if dst.is_neg():
        value = _negated(value)
    if dst.is_conj():
        value = torch.conj_physical(value)
    _write(dst, _from_cpu(value))
    return dst


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False):
    _ipc.check_fork()
    if not isinstance(src, torch.Tensor):
        # A Python scalar (copy_(False)): PyTorch gives a wrapped number as the number.
        src = torch.tensor(src)
    if src.shape != dst.shape and torch.broadcast_shapes(dst.shape, src.shape) != dst.shape:
        raise RuntimeError(
            f"output with shape {list(dst.shape)} doesn't match the broadcast shape "
            f"{list(torch.broadcast_shapes(dst.shape, src.shape))}"
        )
    src_here, dst_here = _on_device(src), _on_device(dst)
    if src_here and dst_here:
        _C.check_copy_overlap(dst, src)
    if src.is_conj() or dst.is_conj() or src.is_neg() or dst.is_neg():
        return _copy_with_bits(src, dst)
    if not dst_here:
        dst.copy_(_to_cpu(src))
    elif src_here:
        _write(dst, _C.materialize(src))
    elif src.device.type == "cpu":
        _write(dst, _from_cpu(src.detach()))
    else:
        raise RuntimeError(
            f"cannot copy from {src.device} to {dst.device}: copy through the CPU "
            "(.cpu() first)"
        )
    return dst


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor):
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    return _copy_from(src, dst)


def impl_ipc(share, rebuild, *, is_shared=None):
    r"""Send this backend's tensors to other processes without a copy.

    ``torch.multiprocessing`` (``Queue``, ``Pipe``, arguments of processes it starts,
    ``DataLoader`` workers) sends a tensor of a Python backend as a CPU copy, rebuilt on the
    device where it is received. A backend whose payloads can live in memory that other
    processes open (shared memory, a device's IPC handles) registers these functions
    instead, and its tensors are shared as CUDA's are: the receiver's tensor reads and writes
    the sender's memory, which the sender must keep alive (hold the tensor) until the
    receiver has it.

    Args:
        share: ``share(payload)`` is given the whole payload a tensor reads (for a view, its
            base's) and returns ``(handle, payload)``: a picklable ``handle`` that opens the
            memory of ``payload`` in another process, and the payload in that memory. That is
            the given payload when it lies there already; otherwise a new payload with the
            same values, dtype, shape and strides, which from then on replaces the given one
            for the tensor and every view and alias of it (``Tensor.share_memory_`` calls
            ``share`` too). Or None: this payload is sent as a CPU copy.
        rebuild: ``rebuild(handle)``, in the receiving process: the payload over the memory
            ``handle`` opens, laid out as the payload ``share`` returned.
        is_shared: ``is_shared(payload)``, whether a payload lies in such memory
            (``Tensor.is_shared``); without it, ``is_shared()`` is False.

    A tensor that cannot be sent (a backend function that raises, a non-leaf tensor that
    requires grad) is received as a ``RuntimeError`` saying why: ``multiprocessing.Queue``
    pickles on a thread of its own, whose errors would otherwise leave the receiver waiting.

    Example::

        >>> # xdoctest: +SKIP
        >>> library.impl_ipc(share_in_shm, open_shm, is_shared=in_shm)
        >>> q = torch.multiprocessing.get_context("spawn").Queue()
        >>> q.put(torch.ones(3, device="npy"))  # the receiver's tensor shares its memory
    """
    for what, fn in (("share", share), ("rebuild", rebuild), ("is_shared", is_shared)):
        if not callable(fn) and not (what == "is_shared" and fn is None):
            raise TypeError(
                f"expected {what} to be callable, but got {type(fn).__qualname__} (backend "
                f"{torch._C._get_privateuse1_backend_name()})"
            )
    backend = _backend()
    if backend.ipc is not None:
        raise RuntimeError("the IPC functions of this backend are already registered")
    backend.ipc = record.IpcFunctions(share, rebuild, is_shared)


def declare_fork_safe(safe: bool = True) -> None:
    r"""Declare whether this backend's tensors work in a child made by ``os.fork()``.

    By default a child forked after the backend was set up refuses every use of it with an
    error, as CUDA does ("Cannot re-initialize ... in forked subprocess"): a backend whose
    state does not survive a fork (threads, a device context, sockets) would hang or crash
    there. A backend whose payloads and kernels are plain process memory declares itself
    fork-safe, and then works in forked children, such as ``DataLoader`` workers and
    processes of the ``fork`` start method. Takes effect for forks made after the call.
    """
    _backend().fork_safe = bool(safe)


def impl_serialization(serialize, deserialize):
    r"""Save this backend's payloads in a format of its own instead of through the CPU.

    By default ``torch.save``, ``pickle`` and ``torch.Tensor.__reduce_ex__`` store a tensor of
    a Python backend as a CPU copy, rebuilt on the device when loaded. A backend whose data
    has a better form (a file format of its own, a handle that stays on a remote machine, a
    copy without a round trip through the host) registers two functions instead:

    Args:
        serialize: ``serialize(payload)``, the object saved in place of the payload (for a
            view, of the view's payload), or None to save this payload through the CPU.
            Loading with ``weights_only=True`` (``torch.load``'s default) rebuilds only what
            torch's weights-only unpickler allows: tensors, numbers, strings, ``bytes``,
            tuples, lists and dicts of them.
        deserialize: ``deserialize(state)``, a new payload with the values of the payload
            ``serialize`` was given. The tensor gets the saved requires_grad and device
            (after ``map_location``), and the new payload's shape, dtype and strides, which
            must be the saved shape and dtype: a payload that is not, as a damaged or crafted
            file gives, is an error naming the backend, never a tensor larger than its data.

    Loading such a tensor needs the backend set up in the loading process, even with
    ``map_location="cpu"`` (the payload is deserialized, then copied to the CPU with the
    ``to_cpu`` function of :func:`impl_payload`); without it, ``torch.load`` raises an
    error naming the backend. ``copy.deepcopy`` copies on the device (``clone``) and does not
    serialize.

    Example::

        >>> # xdoctest: +SKIP
        >>> import io
        >>> import numpy as np
        >>> from torch_acc import library
        >>> def serialize(array):
        ...     buf = io.BytesIO()
        ...     np.save(buf, array)  # the .npy format: dtype, shape, order, data
        ...     return {"npy": buf.getvalue()}
        >>> def deserialize(state):
        ...     return np.load(io.BytesIO(state["npy"]))
        >>> library.impl_serialization(serialize, deserialize)
        >>> torch.save(torch.ones(3, device="npy"), "ones.pt")  # holds the .npy bytes
    """
    for what, fn in (("serialize", serialize), ("deserialize", deserialize)):
        if not callable(fn):
            raise TypeError(
                f"expected {what} to be callable, but got {type(fn).__qualname__} (backend "
                f"{torch._C._get_privateuse1_backend_name()})"
            )
    backend = _backend()
    if not backend.payload_functions:
        raise RuntimeError(
            "register the payload functions (impl_payload) before impl_serialization: loading "
            "with map_location='cpu' needs to_cpu"
        )
    if backend.serialization is not None:
        raise RuntimeError("the serialization functions of this backend are already registered")
    _allow_rebuild()
    backend.serialization = (serialize, deserialize)


def _allow_rebuild() -> None:
    """Let ``torch.load(weights_only=True)`` call the rebuild functions of payload tensors."""
    safe = torch.serialization.get_safe_globals()
    for fn in (_rebuild_payload_tensor, _rebuild_payload_view):
        if fn not in safe:
            torch.serialization.add_safe_globals([fn])


class _SavedPayload:
    """Stands for one payload in a file saved in the backend's own format: the tensors on
    the payload name this object, which pickle saves once and loads once (as the tensor
    its ``__reduce__`` rebuilds), so that they load sharing one payload again."""

    __slots__ = ("__weakref__", "payload", "reduced")

    def __init__(self, payload, reduced):
        self.payload = payload  # holds the id it is found by in _saving
        self.reduced = reduced

    def __reduce__(self):
        return self.reduced


#: id(payload) -> what stands for the payload while a pickler saves the tensors on it: a
#: :class:`_SavedPayload`, or a CPU tensor with the payload's memory (element by element, as
#: views address it). Only the pickler's memo holds them: a later save copies again.
_saving: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
#: data_ptr -> the CPU tensor of _saving whose storage that is, for :func:`_location_tag`.
_saving_memory: "weakref.WeakValueDictionary[int, torch.Tensor]" = weakref.WeakValueDictionary()
#: id(CPU tensor of _saving) -> (the payload it copies, the payload's device).
_memory_of: dict[int, tuple[object, str]] = {}


def _layout_extent(size, stride) -> int:
    """Elements from the first to one past the last element a layout addresses."""
    if any(n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))


def _saved_memory(tensor: torch.Tensor, payload, sizes, strides):
    """A CPU tensor of the payload's memory, one dimension, element ``i`` at offset ``i``,
    tagged with the tensor's device (:func:`_location_tag`); None for a payload of no
    elements, which is saved through the CPU as it is."""
    extent = _layout_extent(sizes, strides)
    if extent == 0:
        return None
    values = _payload_functions()["to_cpu"](payload)
    if not (
        isinstance(values, torch.Tensor)
        and values.device.type == "cpu"
        and list(values.shape) == sizes
        and values.dtype == tensor.dtype
    ):
        raise _bad_result(
            "to_cpu",
            values,
            f"a CPU torch.Tensor of shape {tuple(sizes)} and dtype {tensor.dtype} (the "
            "payload's)",
            TypeError if not isinstance(values, torch.Tensor) else RuntimeError,
        )
    memory = torch.zeros(extent, dtype=tensor.dtype)
    memory.as_strided(sizes, strides).copy_(values)
    # Beside the tensor, not on it: pickle saves a tensor's attributes.
    _memory_of[id(memory)] = (payload, str(tensor.device))
    weakref.finalize(memory, _memory_of.pop, id(memory), None)
    _saving_memory[memory.data_ptr()] = memory
    return memory


def reduce_for_pickle(tensor: torch.Tensor):
    r"""``(rebuild function, arguments)`` saving the payload tensor ``tensor``, or None to
    save it as torch saves a tensor without storage (a CPU copy of its values).

    The payload is saved once per file, however many tensors read it: in the backend's own
    format (:func:`impl_serialization`), else as a CPU tensor of its memory, tagged with
    the device (``map_location`` sees that device, as for CUDA storages). Each tensor is
    saved as a view of it (size, stride, offset), so tensors that shared a payload share one
    again when loaded, as CPU tensors that shared a storage do.
    """
    if tensor.is_conj() or tensor.is_neg():
        return None
    whole = _C.whole_payload(tensor)
    if whole is None:
        return None
    payload, sizes, strides = whole
    saved = _saving.get(id(payload))
    if saved is None or (saved.payload if isinstance(saved, _SavedPayload)
                         else _memory_of[id(saved)][0]) is not payload:
        serialization = _backend().serialization
        state = None if serialization is None else serialization[0](payload)
        if state is not None:
            saved = _SavedPayload(payload, (
                _rebuild_payload_tensor,
                (torch._C._get_privateuse1_backend_name(), state, tensor.dtype, tuple(sizes),
                 str(tensor.device), False, tuple(strides)),
            ))
        else:
            saved = _saved_memory(tensor, payload, sizes, strides)
            if saved is None:
                return None
        _saving[id(payload)] = saved
    _allow_rebuild()
    return (
        _rebuild_payload_view,
        (torch._C._get_privateuse1_backend_name(), saved, tensor.dtype, tuple(tensor.shape),
         tensor.stride(), tensor.storage_offset(), tensor.requires_grad),
    )


def _location_tag(storage):
    """``torch.save``'s location of a storage: the device of the payload whose memory a
    CPU tensor of :func:`_saved_memory` holds; None for any other storage."""
    if storage.device.type != "cpu":
        return None
    memory = _saving_memory.get(storage.data_ptr())
    if memory is None or memory.untyped_storage().data_ptr() != storage.data_ptr():
        return None
    return _memory_of[id(memory)][1]


def _restore_location(storage, location: str):
    """``torch.load``'s restore function for storages tagged with a Python backend's device
    (:func:`_location_tag`, or ``map_location`` naming the device): the storage stays on the
    CPU, marked with the device, and :func:`restore_tensor` moves each tensor on it. A
    location that names no device of this process is an error naming the backend to set up
    (torch's own would list the built-in device types)."""
    backend = location.split(":", 1)[0]
    if backend == torch._C._get_privateuse1_backend_name() and _C.is_python_backend():
        storage._torch_acc_location = str(torch.device(location))
        return storage
    try:
        torch.device(location)
    except RuntimeError:
        raise RuntimeError(
            f"cannot load data saved on {location}: the {backend} backend is not set up in "
            f"this process. Set it up before torch.load (the backend's setup function, or "
            f"torch_acc.setup_privateuseone_for_python_backend({backend!r}) and its "
            "kernels), or load to the CPU with map_location='cpu'"
        ) from None
    return None


def restore_tensor(tensor: torch.Tensor, storage) -> torch.Tensor:
    """A tensor that ``torch.load`` rebuilt on ``storage``, on the device
    :func:`_restore_location` marked the storage with (``tensor`` where it marked none).
    Tensors on one storage are moved to one payload, which they share."""
    location = getattr(storage, "_torch_acc_location", None)
    if location is None:
        return tensor
    moved = storage.__dict__.setdefault("_torch_acc_restored", {})
    whole = moved.get(tensor.dtype)
    if whole is None:
        n = storage.nbytes() // tensor.element_size()
        whole = torch.empty(0, dtype=tensor.dtype).set_(storage, 0, (n,), (1,)).to(location)
        moved[tensor.dtype] = whole
    with torch.no_grad():
        return whole.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset()).detach()


def _is_shape(size) -> bool:
    return isinstance(size, tuple | list) and all(type(n) is int and n >= 0 for n in size)


def _restore_device(device: str) -> torch.device:
    """Where ``map_location`` puts a tensor saved on ``device``. A callable ``map_location``
    is asked with an empty CPU storage: the device of the storage it returns, ``device``
    where it returns None."""
    map_location = torch.serialization._serialization_tls.map_location
    if callable(map_location) and not isinstance(map_location, dict):
        restored = map_location(torch.UntypedStorage(0), device)
        return torch.device(device if restored is None else restored.device)
    return torch.device(torch._utils._get_restore_location(device))


def _rebuild_payload_tensor(backend, state, dtype, size, device, requires_grad, strides=None):
    """Loads a payload saved in the backend's own format by :func:`reduce_for_pickle`, on
    ``device`` or where ``map_location`` says, laid out with ``strides`` where the file gives
    them."""
    found = record.get(backend)
    serialization = None if found is None else found.serialization
    if torch._C._get_privateuse1_backend_name() != backend or not _C.is_python_backend():
        reason = f"the {backend} backend is not set up in this process"
    elif serialization is None:
        reason = f"the {backend} backend registers no deserialize function (impl_serialization)"
    else:
        reason = None
    if reason is not None:
        raise RuntimeError(
            f"cannot load a tensor saved by the {backend} backend in its own format: {reason}. "
            f"Loading it, even with map_location='cpu', needs the {backend} backend set up "
            "before torch.load"
        )
    if not isinstance(dtype, torch.dtype) or not _is_shape(size):
        raise RuntimeError(
            f"cannot load a tensor saved by the {backend} backend in its own format: the file "
            f"gives dtype {dtype!r} and size {size!r}, but expected a torch.dtype and a tuple "
            "of non-negative ints; the file is damaged or was not written by torch.save"
        )
    if strides is not None and not (_is_shape(strides) and len(strides) == len(size)):
        raise RuntimeError(
            f"cannot load a tensor saved by the {backend} backend in its own format: the file "
            f"gives strides {strides!r} for size {size!r}, but expected a tuple of as many "
            "non-negative ints; the file is damaged or was not written by torch.save"
        )
    target = _restore_device(device)
    deserialize = serialization[1]
    if target.type == backend and target.index is not None:
        # The payload is made on the device it will belong to, as kernels' results are.
        previous = _C.current_device()
        _C.set_device(target.index)
        try:
            payload = deserialize(state)
        finally:
            _C.set_device(previous)
    else:
        payload = deserialize(state)
    # The tensor takes the payload's own shape, dtype and strides, which must be the saved
    # ones: metadata read from a file never describes more data than the payload holds.
    tensor = _layout(payload, target if target.type == backend else None)
    if tensor is None or tensor.shape != tuple(size) or tensor.dtype != dtype:
        raise (TypeError if tensor is None else RuntimeError)(
            f"cannot load a tensor saved by the {backend} backend in its own format: its "
            f"deserialize function ({_function_name(deserialize)}) returned "
            f"{_describe(payload)}, but the file gives shape {tuple(size)} and dtype {dtype}; "
            "the file is damaged or was not written by torch.save"
        )
    if strides is not None and tensor.numel() > 1 and tensor.stride() != tuple(strides):
        # Views saved with the payload address its elements as it was laid out.
        laid_out = torch.empty_strided(size, strides, dtype=dtype, device=tensor.device)
        tensor = laid_out.copy_(tensor)
    if target.type != backend:
        tensor = tensor.cpu().to(target)
    tensor.requires_grad = requires_grad
    return tensor


def _rebuild_payload_view(backend, base, dtype, size, stride, offset, requires_grad):
    """Loads a tensor saved by :func:`reduce_for_pickle`: a view of ``base``, the tensor its payload
    was loaded as (once for all the tensors that read it), wherever ``map_location`` put
    it."""
    if not (
        isinstance(base, torch.Tensor)
        and base.dtype == dtype
        and _is_shape(size)
        and _is_shape(stride)
        and len(stride) == len(size)
        and type(offset) is int
        and offset >= 0
    ):
        raise RuntimeError(
            f"cannot load a tensor saved on the {backend} backend: the file gives a view of "
            f"size {size!r}, stride {stride!r} and offset {offset!r} of dtype {dtype!r} on "
            f"{_describe(base)}; the file is damaged or was not written by torch.save"
        )
    if _C.is_payload_tensor(base):
        available = _C.payload_nbytes(base) // base.element_size() - base.storage_offset()
    else:
        available = base.untyped_storage().nbytes() // base.element_size() - base.storage_offset()
    needed = _layout_extent(size, stride)
    if needed and offset + needed > available:
        raise RuntimeError(
            f"cannot load a tensor saved on the {backend} backend: the file gives a view of "
            f"size {tuple(size)}, stride {tuple(stride)} and offset {offset} that addresses "
            f"{offset + needed} elements of a payload of {available}; the file is damaged or "
            "was not written by torch.save"
        )
    with torch.no_grad():
        tensor = base.as_strided(size, stride, base.storage_offset() + offset).detach()
    tensor.requires_grad_(requires_grad)
    return tensor


_allow_rebuild()
# Before the CPU's (10): the memory of payloads saved through the CPU is tagged with their
# device, and a storage restored to a Python backend's device stays on the CPU, marked.
torch.serialization.register_package(9, _location_tag, _restore_location)


@contextlib.contextmanager
def check_kernels(enabled: bool = True):
    r"""Compare what every payload kernel returns with its operator's meta function.

    Inside the block (process-wide, for every thread), each result of a kernel registered
    with :func:`impl` is checked against the shapes and dtypes that the operator's meta
    function gives for the same arguments; a kernel that returns a float64 payload for
    float32 inputs, or a (4, 5) payload for a (4, 4) product, raises a ``RuntimeError``
    naming the operator, the kernel, and what was expected. Operators without a meta
    function are not compared. It costs a meta call per kernel call: a mode for testing a
    backend, not for production. Setting the environment variable
    ``TORCH_ACC_CHECK_KERNELS=1`` turns it on for the whole process.

    Checked always, at no measurable cost: the number of results, no ``None`` where the
    operator has a tensor, no input payload returned by an operator whose results do not
    alias its inputs, payloads for mutated tensors of their dtype (and in place, their
    shape), and the results of ``out=`` overloads against the meta function.

    Example::

        >>> # xdoctest: +SKIP
        >>> from torch_acc import library
        >>> with library.check_kernels():
        ...     torch.mm(a, b)  # raises if the backend's mm kernel returns a wrong shape
    """
    previous = _C.set_check_kernels(bool(enabled))
    try:
        yield
    finally:
        _C.set_check_kernels(previous)


if os.environ.get("TORCH_ACC_CHECK_KERNELS", "0") not in ("", "0"):
    _C.set_check_kernels(True)
