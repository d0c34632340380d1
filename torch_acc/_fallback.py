r"""The PrivateUse1 fallback: what runs for an operator the backend has no kernel for.

In order: in-place and ``out=`` overloads from the functional overload's kernel;
``_local_scalar_dense`` (``.item()``) through the CPU; then ``torch._decomp``
decompositions (the core ATen table and the standard ones) down to operators the backend
has. Only when none applies does it raise a :class:`MissingKernelError` that names the
operator, the backend, the operators a decomposition needed that are missing, and how to
register a kernel.
"""

import functools
import threading
import warnings

import torch

from torch_acc import library

__all__ = ["MissingKernelError", "fallback"]


class MissingKernelError(NotImplementedError):
    """An operator has no kernel for the backend and nothing to fall back to."""

    def __init__(self, message: str, missing: tuple[str, ...]):
        super().__init__(message)
        self.missing = missing


_active = threading.local()


@functools.cache
def _decompositions() -> dict:
    import torch._decomp

    table = dict(torch._decomp.decomposition_table)
    table.update(torch._decomp.core_aten_decompositions())
    return table


def _overload(name: str, overload: str):
    """The OpOverload of ``namespace::name``, ``overload`` (of any namespace: ``aten``,
    ``fsdp``, a library's own)."""
    namespace, _, op_name = name.rpartition("::")
    packet = getattr(getattr(torch.ops, namespace or "aten"), op_name)
    return getattr(packet, overload or "default")


def _has_kernel(op) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")


def _into(op, args: tuple, kwargs: dict, result):
    """Write a functional result into the in-place argument or the out= arguments of ``op``."""
    outs = [kwargs[a.name] for a in op._schema.arguments if a.is_out]
    if not outs:
        if args[0].shape != result.shape:
            raise RuntimeError(
                f"output with shape {list(args[0].shape)} doesn't match the broadcast shape "
                f"{list(result.shape)}"
            )
        args[0].copy_(result)
        return args[0]
    results = result if isinstance(result, tuple) else (result,)
    for out, value in zip(outs, results, strict=True):
        if out.shape != value.shape:
            out.resize_(value.shape)
        out.copy_(value)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _message(op, backend: str, missing: tuple[str, ...]) -> str:
    user = _user_name(op)
    namespace, _, name = user.partition(".")
    text = f"{user} has no kernel for the {backend} backend"
    if missing == (user,):
        text += " (its decomposition comes back to it)"
    elif missing:
        text += f", and its decomposition needs {', '.join(missing)}, which have none"
    else:
        text += " and no decomposition"
    tensors = f"torch.library.impl('{namespace}::{name}', 'privateuseone') (tensors)"
    if namespace != "aten":  # payload kernels are for aten's operators
        return text + f". Register a kernel with {tensors}."
    payloads = f"{library.__name__}.impl('{name}', fn) (payloads)"
    return text + f". Register a kernel with {payloads} or {tensors}."


def _special(op, args, kwargs):
    """Operators every payload backend gets from its payload functions; None if not one."""
    aten = torch.ops.aten
    if op is aten.copy_.default:
        self, src = args[0], args[1]
        return aten._copy_from(src, self, kwargs.get("non_blocking", False))
    if op is aten._local_scalar_dense.default:
        return args[0].cpu().item()
    if op in (aten.masked_fill_.Scalar, aten.masked_fill_.Tensor) and _expanded_dims(args[0]):
        return _masked_fill_expanded(*args)
    return None


def _expanded_dims(t: torch.Tensor) -> list[int]:
    """The dimensions along which ``t`` repeats one element (stride 0, size above 1)."""
    return [d for d in range(t.dim()) if t.stride(d) == 0 and t.size(d) > 1]


def _masked_fill_expanded(self, mask, value):
    """``masked_fill_`` into an expanded tensor, as CPU does it (deprecated there, with this
    warning): an element that several positions share takes ``value`` where any of them is
    masked. The copy of a functional result would refuse the shared elements."""
    warnings.warn(
        "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor "
        "before performing this operation. This also applies to advanced indexing e.g. "
        "tensor[mask] = scalar",
        UserWarning,
        stacklevel=2,
    )
    target, mask = self, mask.expand(self.shape)
    for d in _expanded_dims(self):
        target, mask = target.narrow(d, 0, 1), mask.any(d, keepdim=True)
    target.copy_(target.masked_fill(mask, value))
    return self


def fallback(name: str, overload: str, args: tuple, kwargs: dict):
    """Called by the C++ fallback with the operator's name and its (tensor) arguments."""
    op = _overload(name, overload)
    backend = torch._C._get_privateuse1_backend_name()
    active = getattr(_active, "ops", None)
    if active is None:
        active = _active.ops = set()
    if op in active:
        raise MissingKernelError(_message(op, backend, ()), (_user_name(op),))
    active.add(op)
    try:
        return _fall_back(op, backend, args, kwargs)
    finally:
        active.discard(op)


def _fall_back(op, backend: str, args: tuple, kwargs: dict):
    special = _special(op, args, kwargs)
    if special is not None:
        return special
    functional = library.functional_overload(op)
    out_names = {a.name for a in op._schema.arguments if a.is_out}
    functional_kwargs = {k: v for k, v in kwargs.items() if k not in out_names}
    if functional is not None and out_names:
        _reduce_in_out_dtype(functional, args, kwargs, functional_kwargs)
    if functional is not None and _has_kernel(functional):
        return _into(op, args, kwargs, functional(*args, **functional_kwargs))
    table = _decompositions()
    try:
        if op in table:
            return table[op](*args, **kwargs)
        if functional is not None and functional in table:
            return _into(op, args, kwargs, table[functional](*args, **functional_kwargs))
    except MissingKernelError as e:
        name = _user_name(op)
        # A decomposition that comes back to its own operator needs a kernel for it.
        missing = tuple(dict.fromkeys(m for m in e.missing if m != name)) or (name,)
        raise MissingKernelError(_message(op, backend, missing), missing) from e
    raise MissingKernelError(_message(op, backend, ()), (_user_name(op),))


#: Reductions whose out= overload computes in the out tensor's dtype when no dtype is given
#: (ATen's ``get_dtype_from_result``), as their functional overload does with ``dtype=``.
_REDUCTIONS_IN_OUT_DTYPE = frozenset(
    {"sum", "nansum", "prod", "mean", "cumsum", "cumprod"}
)


def _reduce_in_out_dtype(functional, args, kwargs, functional_kwargs) -> None:
    """Sets ``dtype`` of a reduction's functional overload to its out tensor's dtype."""
    name = functional._schema.name.split("::", 1)[-1]
    if name not in _REDUCTIONS_IN_OUT_DTYPE or functional_kwargs.get("dtype") is not None:
        return
    if "dtype" in {a.name for a in functional._schema.arguments if a.kwarg_only}:
        out = kwargs.get("out")
        if isinstance(out, torch.Tensor):
            functional_kwargs["dtype"] = out.dtype


def _user_name(op) -> str:
    """The overload to name to a backend author: the functional one of an out= overload,
    which is what gets called (a kernel for it is used before any out= variant)."""
    outs = any(a.is_out for a in op._schema.arguments)
    functional = library.functional_overload(op) if outs else None
    return str(functional or op)
