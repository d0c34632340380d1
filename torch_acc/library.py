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

import torch

from torch_acc import _C

__all__ = ["impl", "impl_payload", "impl_serialization"]

_payload_functions: dict[str, object] = {}
_lib = None
#: ``(serialize, deserialize)`` of :func:`impl_serialization`, or None: through the CPU.
_serialization: tuple | None = None


def impl(op: str, fn=None):
    r"""Register ``fn`` as the kernel of the aten overload ``op`` (``"add.Tensor"``).

    Usable as a decorator. The kernel receives payloads for tensors on the device, Python
    scalars for CPU scalars, and Python values for everything else, in the operator's
    argument order (keyword-only arguments by keyword). It returns a payload per tensor
    result.
    """

    if not _C.is_python_backend():
        raise RuntimeError(
            f"cannot register a kernel for {op}: set up a backend first "
            "(setup_privateuseone_for_python_backend)"
        )

    def register(f):
        _C.register_kernel(op, f)
        return f

    return register if fn is None else register(fn)


def impl_payload(*, as_strided, to_cpu, from_cpu, copy_into):
    r"""Register the four functions every payload backend provides.

    Args:
        as_strided: ``as_strided(payload, size, stride, storage_offset)``, the payload of a
            view (sizes and strides in elements, relative to the payload's own layout).
        to_cpu: ``to_cpu(payload)``, a CPU tensor with the payload's values.
        from_cpu: ``from_cpu(tensor)``, a new payload with a CPU tensor's values.
        copy_into: ``copy_into(dst, src)``, writes ``src`` into the payload ``dst`` (with
            broadcasting and dtype conversion) and returns ``dst``, or returns the new payload
            for a backend whose payloads are immutable.
    """
    global _lib
    if _payload_functions:
        raise RuntimeError("the payload functions of this backend are already registered")
    _payload_functions.update(to_cpu=to_cpu, from_cpu=from_cpu, copy_into=copy_into)
    _C.set_as_strided(as_strided)
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    lib.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
    # PyTorch's conjugate/negative fallbacks would materialize a conj or neg view by a
    # clone, which copies through _copy_from again, without end: _copy_from resolves the
    # bits itself (through the CPU).
    for key in ("Conjugate", "Negative"):
        lib.impl("_copy_from", torch.library.fallthrough_kernel, key)
        lib.impl("_copy_from_and_resize", torch.library.fallthrough_kernel, key)
    _lib = lib


def _on_device(t: torch.Tensor) -> bool:
    return t.device.type == torch._C._get_privateuse1_backend_name()


def _write(dst: torch.Tensor, value) -> None:
    given = _C.payload(dst)
    result = _payload_functions["copy_into"](given, value)
    if result is not given:
        _C.set_payload(dst, result)


def _values(t: torch.Tensor) -> torch.Tensor:
    """A tensor's values on the CPU, its conj and neg bits applied."""
    if not _on_device(t):
        return t.detach().resolve_conj().resolve_neg()
    value = _payload_functions["to_cpu"](_C.payload(t))
    if t.is_conj():
        value = torch.conj_physical(value)
    if t.is_neg():
        value = torch.neg(value)
    return value


def _copy_with_bits(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """_copy_from where src or dst is a conjugate or negative view."""
    value = _values(src)
    if not _on_device(dst):
        dst.copy_(value)
        return dst
    if dst.is_neg():
        value = torch.neg(value)
    if dst.is_conj():
        value = torch.conj_physical(value)
    _write(dst, _payload_functions["from_cpu"](value.to(dst.dtype)))
    return dst


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False):
    if src.is_conj() or dst.is_conj() or src.is_neg() or dst.is_neg():
        return _copy_with_bits(src, dst)
    if not _on_device(dst):
        dst.copy_(_payload_functions["to_cpu"](_C.payload(src)))
    elif _on_device(src):
        _write(dst, _C.payload(src))
    elif src.device.type == "cpu":
        _write(dst, _payload_functions["from_cpu"](src.detach()))
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
            ``serialize`` was given. The tensor gets the saved shape, dtype, requires_grad
            and device (after ``map_location``), and the strides of the new payload.

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
    global _serialization
    for what, fn in (("serialize", serialize), ("deserialize", deserialize)):
        if not callable(fn):
            raise TypeError(
                f"expected {what} to be callable, but got {type(fn).__qualname__} (backend "
                f"{torch._C._get_privateuse1_backend_name()})"
            )
    if not _payload_functions:
        raise RuntimeError(
            "register the payload functions (impl_payload) before impl_serialization: loading "
            "with map_location='cpu' needs to_cpu"
        )
    if _serialization is not None:
        raise RuntimeError("the serialization functions of this backend are already registered")
    _allow_rebuild()
    _serialization = (serialize, deserialize)


def _allow_rebuild() -> None:
    """Let ``torch.load(weights_only=True)`` call :func:`_rebuild_payload_tensor`."""
    if _rebuild_payload_tensor not in torch.serialization.get_safe_globals():
        torch.serialization.add_safe_globals([_rebuild_payload_tensor])


def _reduce(tensor: torch.Tensor):
    """``(rebuild function, arguments)`` saving the payload tensor ``tensor`` in its backend's
    own format (:func:`impl_serialization`), or None to save it through the CPU."""
    if _serialization is None:
        return None
    state = _serialization[0](_C.payload(tensor))
    if state is None:
        return None
    _allow_rebuild()
    return (
        _rebuild_payload_tensor,
        (
            torch._C._get_privateuse1_backend_name(),
            state,
            tensor.dtype,
            tuple(tensor.shape),
            str(tensor.device),
            tensor.requires_grad,
        ),
    )


def _rebuild_payload_tensor(backend, state, dtype, size, device, requires_grad):
    """Loads a tensor saved by :func:`_reduce`, on ``device`` or where ``map_location`` says."""
    if torch._C._get_privateuse1_backend_name() != backend or not _C.is_python_backend():
        reason = f"the {backend} backend is not set up in this process"
    elif _serialization is None:
        reason = f"the {backend} backend registers no deserialize function (impl_serialization)"
    else:
        reason = None
    if reason is not None:
        raise RuntimeError(
            f"cannot load a tensor saved by the {backend} backend in its own format: {reason}. "
            f"Loading it, even with map_location='cpu', needs the {backend} backend set up "
            "before torch.load"
        )
    target = torch.device(torch._utils._get_restore_location(device))
    if target.type == backend and target.index is not None:
        # The payload is made on the device it will belong to, as kernels' results are.
        previous = _C.current_device()
        _C.set_device(target.index)
        try:
            payload = _serialization[1](state)
        finally:
            _C.set_device(previous)
    else:
        payload = _serialization[1](state)
    if target.type == backend:
        tensor = _C.wrap(payload, shape=size, dtype=dtype, device=target)
    else:
        tensor = _payload_functions["to_cpu"](payload).to(dtype).reshape(size).to(target)
    tensor.requires_grad = requires_grad
    return tensor


_allow_rebuild()
