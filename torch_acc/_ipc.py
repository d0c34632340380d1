r"""Payload tensors beyond their process: ``torch.multiprocessing`` and ``os.fork``.

Sending: ``torch.multiprocessing`` pickles tensors with ``ForkingPickler``, whose reduction
of a tensor reads its storage. A payload tensor has none, so this module puts a reduction of
its own in front of torch's: a backend's IPC functions (``library.impl_ipc``) give a handle
to its payload in memory other processes can open (the tensor then shares it, as CUDA
tensors do), otherwise the tensor travels as a CPU copy. A tensor that cannot be sent
travels as an error raised where it is received: ``multiprocessing.Queue`` pickles on a
thread of its own, which only prints an error, and the receiver would wait for ever.

Forking: a child made by ``os.fork()`` after the backend was set up inherits its state but
not its threads. A backend that does not declare itself fork-safe
(``library.declare_fork_safe``) refuses every call there, as CUDA does.
"""

import multiprocessing.reduction
import os

import torch
import torch.multiprocessing.reductions as torch_reductions

from torch_acc import _C, record
from torch_acc.payload import describe, layout

__all__ = ["check_fork", "in_bad_fork", "is_shared", "reduce_tensor", "share_memory_"]

#: The error every use of the backend raises in a forked child, or None.
_bad_fork: str | None = None


def _backend() -> str:
    return torch._C._get_privateuse1_backend_name()


def _ipc_functions() -> record.IpcFunctions | None:
    """The IPC functions (``library.impl_ipc``) of the backend on PrivateUse1, or None:
    tensors are sent as CPU copies."""
    backend = record.get(_backend())
    return None if backend is None else backend.ipc


def _fork_message(name: str) -> str:
    return (
        f"Cannot re-initialize {name} in forked subprocess: the {name} backend was set up "
        "before the fork and does not declare itself fork-safe "
        "(torch_acc.library.declare_fork_safe). To use it with multiprocessing, use the "
        "'spawn' start method (torch.multiprocessing.set_start_method('spawn') or "
        "get_context('spawn')), or set the backend up in the child only"
    )


def _after_fork_in_child() -> None:
    global _bad_fork
    if not _C.is_python_backend():
        return
    backend = record.get(_backend())
    if backend is not None and backend.fork_safe:
        _C.after_fork_in_child(None)
        return
    _bad_fork = _fork_message(_backend())
    _C.after_fork_in_child(_bad_fork)


def in_bad_fork() -> bool:
    """Whether this process is a forked child that refuses the backend."""
    return _bad_fork is not None


def check_fork() -> None:
    """Raises the forked child's error where the backend cannot run (see the module's doc)."""
    if _bad_fork is not None:
        raise RuntimeError(_bad_fork)


def _function_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _whole_payload(t: torch.Tensor):
    whole = _C.whole_payload(t)
    if whole is None:
        raise RuntimeError(
            f"a tensor on {t.device} has no payload: it was made by create_empty_tensor() "
            "and never given one (set_payload)"
        )
    return whole


def _share(t: torch.Tensor):
    """The handle of ``share`` for the payload ``t`` reads, which from then on is the payload
    ``share`` gave (in memory other processes can open); None where the backend shares
    nothing."""
    hooks = _ipc_functions()
    if hooks is None:
        return None
    check_fork()
    payload, sizes, strides = _whole_payload(t)
    shared = hooks.share(payload)
    if shared is None:
        return None
    name = _function_name(hooks.share)
    if not (isinstance(shared, tuple) and len(shared) == 2):
        raise TypeError(
            f"the {_backend()} backend's IPC function share ({name}) returned "
            f"{type(shared).__qualname__}, but expected None or a tuple (handle, payload)"
        )
    handle, held = shared
    if held is not payload:
        found = layout(held)
        if (
            found is None
            or found.dtype != t.dtype
            or list(found.shape) != sizes
            or list(found.stride()) != strides
        ):
            raise RuntimeError(
                f"the {_backend()} backend's IPC function share ({name}) returned the payload "
                f"{describe(held)}, but expected one laid out as the payload it "
                f"shares: dtype {t.dtype}, shape {tuple(sizes)}, strides {tuple(strides)}"
            )
        _C.replace_whole_payload(t, held, sizes, strides)
    return handle, sizes, strides


def share_memory_(t: torch.Tensor) -> bool:
    """``Tensor.share_memory_`` of a payload tensor: its payload is moved into memory other
    processes can open where the backend can (``library.impl_ipc``), for it and every view
    and alias of it; nothing otherwise, as for CUDA. False if ``t`` is no payload tensor."""
    if not _C.is_payload_tensor(t):
        return False
    _share(t)
    return True


def is_shared(t: torch.Tensor) -> bool | None:
    """``Tensor.is_shared`` of a payload tensor: whether its payload lies in memory other
    processes can open (the backend's ``is_shared``). None if ``t`` is no payload tensor."""
    if not _C.is_payload_tensor(t):
        return None
    hooks = _ipc_functions()
    if hooks is None or hooks.is_shared is None:
        return False
    check_fork()
    return bool(hooks.is_shared(_whole_payload(t)[0]))


def _raise_on_receipt(message: str):
    raise RuntimeError(message)


def _check_backend(backend: str) -> None:
    if _backend() != backend or not _C.is_python_backend():
        raise RuntimeError(
            f"cannot receive a tensor on {backend}: the {backend} backend is not set up in "
            f"this process. Set it up before the tensor is received (with the spawn start "
            "method, at import of the main module or of the module that defines the "
            "process's function; or install it for TORCH_DEVICE_BACKEND_AUTOLOAD)"
        )
    check_fork()


def _rebuild_shared(
    backend, handle, dtype, sizes, strides, size, stride, offset, index, requires_grad
):
    """A tensor received over the payload that ``handle`` opens (see :func:`_share`)."""
    _check_backend(backend)
    hooks = _ipc_functions()
    if hooks is None:
        raise RuntimeError(
            f"cannot receive a tensor shared by the {backend} backend: this process's "
            f"{backend} backend registers no IPC functions (library.impl_ipc)"
        )
    try:
        payload = hooks.rebuild(handle)
    except Exception as e:
        raise RuntimeError(
            f"cannot receive a tensor shared by the {backend} backend: its IPC function "
            f"rebuild ({_function_name(hooks.rebuild)}) raised {type(e).__name__}: {e}. The "
            "sending process must keep the tensor alive until it is received, as for CUDA"
        ) from e
    base = _C.wrap(payload, device=index)
    if base.dtype != dtype or list(base.shape) != sizes or list(base.stride()) != strides:
        raise RuntimeError(
            f"cannot receive a tensor shared by the {backend} backend: its IPC function "
            f"rebuild ({_function_name(hooks.rebuild)}) returned a payload of dtype "
            f"{base.dtype}, shape {tuple(base.shape)} and strides {base.stride()}, but the "
            f"sender's has dtype {dtype}, shape {tuple(sizes)} and strides {tuple(strides)}"
        )
    with torch.no_grad():
        tensor = base.as_strided(size, stride, offset).detach()
    tensor.requires_grad_(requires_grad)
    return tensor


def _rebuild_from_cpu(backend, cpu, index, requires_grad):
    """A tensor received as a CPU copy."""
    _check_backend(backend)
    tensor = cpu.to(torch.device(backend, index))
    tensor.requires_grad_(requires_grad)
    return tensor


def _reduce_payload_tensor(t: torch.Tensor):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries. If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., putting "
            "it on the queue)."
        )
    check_fork()
    backend = _backend()
    shared = None if t.is_conj() or t.is_neg() else _share(t)
    if shared is None:
        return (_rebuild_from_cpu, (backend, t.detach().cpu(), t.device.index, t.requires_grad))
    handle, sizes, strides = shared
    return (
        _rebuild_shared,
        (
            backend,
            handle,
            t.dtype,
            sizes,
            strides,
            tuple(t.shape),
            t.stride(),
            t.storage_offset(),
            t.device.index,
            t.requires_grad,
        ),
    )


def reduce_tensor(t: torch.Tensor):
    """``ForkingPickler``'s reduction of a tensor: torch's, but for payload tensors, which
    are shared through the backend's IPC functions or sent as CPU copies. One that cannot
    be sent is received as the error that says why (see the module's doc)."""
    if not _C.is_payload_tensor(t):
        return torch_reductions.reduce_tensor(t)
    try:
        return _reduce_payload_tensor(t)
    except Exception as e:  # noqa: BLE001 - raised where the tensor is received
        return (
            _raise_on_receipt,
            (f"cannot send a tensor on {t.device} to another process: {type(e).__name__}: {e}",),
        )


def _install() -> None:
    from torch.nn.parameter import Parameter

    for cls in (torch.Tensor, Parameter):
        multiprocessing.reduction.ForkingPickler.register(cls, reduce_tensor)
    os.register_at_fork(after_in_child=_after_fork_in_child)


_install()
