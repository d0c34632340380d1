"""``_foreach_*`` kernels: a per-tensor kernel of this backend applied over lists of tensors.

The optimizers and ``clip_grad_norm_`` use the foreach operators on devices that support
them, as ``npy`` does. Without kernels here each would go through its decomposition, one
bridge call per tensor and per step of the decomposition; with them a whole list is one call.

A foreach overload is paired with the per-tensor overload it applies, and its arguments with
that overload's by schema: by name where the names agree (``alpha``, ``ord``, ``dtype``), else
by position (``_foreach_add.Scalar``'s ``scalar`` is ``add.Scalar``'s ``other``). A list
argument gives each tensor its own element; any other argument is the same for all.
"""

import numpy as np
import torch

from ._common import check_no_internal_overlap, NUMPY_TO_TORCH

#: Foreach operators that get kernels, where the backend has the per-tensor kernels.
_NAMES = (
    "abs", "add", "addcdiv", "addcmul", "clamp_max", "clamp_min", "div", "exp", "lerp",
    "maximum", "minimum", "mul", "neg", "norm", "pow", "reciprocal", "sign", "sqrt", "sub",
    "zero",
)  # fmt: skip

#: Per-tensor overloads to try for a foreach overload, by the foreach overload's name.
_CANDIDATES = {
    "List": ("Tensor", "Tensor_Tensor", "default"),
    "Tensor": ("Tensor", "Tensor_Tensor"),
    "Scalar": ("Scalar", "Tensor_Scalar", "Tensor", "default"),
    "ScalarList": ("Scalar", "Tensor_Scalar", "Tensor", "default"),
    "default": ("default",),
}
_PER_TENSOR_NAME = {"norm": "linalg_vector_norm"}


def _key(packet: str, overload: str) -> str:
    return packet if overload == "default" else f"{packet}.{overload}"


def _per_tensor_overload(base: str, inplace: bool, overload: str, kernels: dict):
    """The per-tensor kernel's key and schema: for an in-place foreach overload the in-place
    per-tensor kernel, else the out-of-place one (its result is then written into ``self``)."""
    name = _PER_TENSOR_NAME.get(base, base)
    for packet in (name + "_", name) if inplace else (name,):
        for candidate in _CANDIDATES.get(overload, ()):
            key = _key(packet, candidate)
            if key in kernels:
                return key, getattr(getattr(torch.ops.aten, packet), candidate)._schema
    return None


def _is_list(arg) -> bool:
    return isinstance(arg.type, torch.ListType)


def _plan(foreach_schema, schema):
    """Where each foreach argument goes in the per-tensor call: ``(index, name, is_list)``, with
    ``index`` a position or None for a keyword; None when the schemas do not pair up."""
    targets = schema.arguments
    by_name = {a.name: i for i, a in enumerate(targets)}
    plan, taken = [], set()
    for i, arg in enumerate(foreach_schema.arguments):
        j = by_name.get(arg.name, i if i < len(targets) else None)
        if j is None or _is_list(targets[j]) or (arg.kwarg_only and arg.name not in by_name):
            return None
        if j in taken:
            return None  # two foreach arguments for one per-tensor argument
        taken.add(j)
        target = targets[j]
        plan.append((None if target.kwarg_only else j, target.name, _is_list(arg)))
    positional = [j for j, _, _ in plan if j is not None]
    # Positions left out in between take their schema defaults.
    for j in range(max(positional, default=-1) + 1):
        if j not in positional and not targets[j].has_default_value():
            return None
    return plan


def _write(name: str, k: int, target, result) -> None:
    """An in-place result written into its tensor, which keeps its dtype (as on the CPU, a
    result that does not cast to it safely is an error)."""
    check_no_internal_overlap(f"{name} (tensor {k} of the list)", target)
    have, want = np.dtype(result.dtype), target.dtype
    if have != want and not torch.can_cast(NUMPY_TO_TORCH[have], NUMPY_TO_TORCH[want]):
        raise RuntimeError(
            f"{name}: result type {NUMPY_TO_TORCH[have]} can't be cast to the desired output "
            f"type {NUMPY_TO_TORCH[want]} (tensor {k} of the list)"
        )
    try:
        np.copyto(target, result, casting="unsafe")
    except ValueError as e:
        raise RuntimeError(f"{name}: cannot write tensor {k} of the list in place: {e}") from e


def _make_kernel(name: str, kernel, schema, plan, inplace: bool):
    defaults = [a.default_value if a.has_default_value() else None for a in schema.arguments]
    npositional = max((j for j, _, _ in plan if j is not None), default=-1) + 1

    def foreach(*args, **kwargs):
        values = list(args) + list(kwargs.values())
        selves = values[0]
        lists = [v for v, (_, _, is_list) in zip(values, plan, strict=True) if is_list]
        if any(len(v) != len(selves) for v in lists):
            raise RuntimeError(
                f"{name}: expected every tensor list to have {len(selves)} elements, but got "
                f"lists of {[len(v) for v in lists]}"
            )
        results = []
        for k, target in enumerate(selves):
            call_args = defaults[:npositional]
            call_kwargs = {}
            for value, (j, arg_name, is_list) in zip(values, plan, strict=True):
                value = value[k] if is_list else value
                if j is None:
                    call_kwargs[arg_name] = value
                else:
                    call_args[j] = value
            result = kernel(*call_args, **call_kwargs)
            if inplace and result is not target:
                _write(name, k, target, result)
            results.append(result)
        return None if inplace else results

    foreach.__name__ = name
    return foreach


def foreach_kernels(kernels: dict) -> dict:
    """Kernels for the foreach overloads whose per-tensor overloads are in ``kernels``."""
    out = {}
    for base in _NAMES:
        for inplace in (False, True):
            packet_name = f"_foreach_{base}" + ("_" if inplace else "")
            packet = getattr(torch.ops.aten, packet_name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                foreach_schema = getattr(packet, overload)._schema
                if not foreach_schema.arguments or not _is_list(foreach_schema.arguments[0]):
                    continue  # a scalar first (pow.ScalarAndTensor): the decomposition
                found = _per_tensor_overload(base, inplace, overload, kernels)
                if found is None:
                    continue
                key, schema = found
                plan = _plan(foreach_schema, schema)
                if plan is None:
                    continue
                out[_key(packet_name, overload)] = _make_kernel(
                    _key(packet_name, overload), kernels[key], schema, plan, inplace
                )
    return out
