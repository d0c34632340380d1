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

__all__ = ["impl", "impl_payload"]

_payload_functions: dict[str, object] = {}
_lib = None


def impl(op: str, fn=None):
    r"""Register ``fn`` as the kernel of the aten overload ``op`` (``"add.Tensor"``).

    Usable as a decorator. The kernel receives payloads for tensors on the device, Python
    scalars for CPU scalars, and Python values for everything else, in the operator's
    argument order (keyword-only arguments by keyword). It returns a payload per tensor
    result.
    """

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
