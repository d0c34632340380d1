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
    packet = getattr(torch.ops.aten, name.split("::", 1)[-1])
    return getattr(packet, overload or "default")


def _functional_of(op):
    """The functional overload matching an in-place or ``out=`` one, or None."""
    schema = op._schema
    name = schema.name.split("::", 1)[-1]
    inplace = name.endswith("_") and not name.endswith("__")
    outs = [a for a in schema.arguments if a.is_out]
    if not inplace and not outs:
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
    name = user.removeprefix("aten.")
    text = f"{user} has no kernel for the {backend} backend"
    if missing == (user,):
        text += " (its decomposition comes back to it)"
    elif missing:
        text += f", and its decomposition needs {', '.join(missing)}, which have none"
    else:
        text += " and no decomposition"
    return (
        text + f". Register a kernel with {library.__name__}.impl('{name}', fn) "
        f"(payloads) or torch.library.impl('aten::{name}', 'privateuseone') (tensors)."
    )


def _special(op, args, kwargs):
    """Operators every payload backend gets from its payload functions; None if not one."""
    aten = torch.ops.aten
    if op is aten.copy_.default:
        self, src = args[0], args[1]
        return aten._copy_from(src, self, kwargs.get("non_blocking", False))
    if op is aten._local_scalar_dense.default:
        return args[0].cpu().item()
    return None


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
    functional = _functional_of(op)
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
    functional = _functional_of(op) if any(a.is_out for a in op._schema.arguments) else None
    return str(functional or op)
