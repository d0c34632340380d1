"""Kernels of the ``npy`` backend that training utilities reach: ``GradScaler``'s unscale and
scale update, ``weight_norm``'s norms and gradient, and the zero tensors of autograd and
forward-mode AD.

None of these operators but ``_weight_norm_interface`` has a decomposition (that one gives
the norms of a float16 weight in float16, the CPU in float32). As on the CPU, gradients are
unscaled in float32 (float64 in float64) and rounded back to their dtype;
``_efficientzerotensor`` (the gradient of ``sgn`` of a real tensor, zero tangents of
forward-mode AD) gives a tensor of zeros, whose values are CPU's (the CPU marks its result a
zero tensor, which saves work but changes no value).

Two operators describe a tensor's storage, which a payload tensor has none of: forward-mode
AD (``torch.func.jvp``, ``torch.autograd.forward_ad``) asks them whether a tangent is laid out
as its primal. :func:`register_storage_kernels` answers them from the payload's extent instead.
"""

import numpy as np
import torch

from torch_acc.payload import payload_nbytes

from ._common import check_no_internal_overlap, DEVICE, np_dtype, NUMPY_TO_TORCH
from ._nn import _compute_dtype, _f, _HALF, _out


def _one_element(op: str, name: str, x, dtype) -> None:
    if x.size != 1 or x.dtype != dtype:
        raise RuntimeError(
            f"{op}: {name} must be a 1-element tensor of dtype {NUMPY_TO_TORCH[np.dtype(dtype)]}"
            f", but got shape {list(x.shape)} and dtype {NUMPY_TO_TORCH[x.dtype]}"
        )


def _writable(op: str, name: str, x) -> None:
    if not x.flags.writeable:
        raise RuntimeError(f"{op}: the {DEVICE} backend cannot write {name} in place: it is "
                           "a read-only (broadcast) view; clone() it first")


def _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    op = "_amp_foreach_non_finite_check_and_unscale_"
    _one_element(op, "inv_scale", inv_scale, np.float32)
    _one_element(op, "found_inf", found_inf, np.float32)
    _writable(op, "found_inf", found_inf)
    scale = inv_scale.reshape(()).item()
    for k, grad in enumerate(grads):
        if grad.dtype.kind != "f" and grad.dtype not in _HALF:
            raise RuntimeError(f"{op}: tensor {k} of the list is not floating point "
                               f"(dtype {NUMPY_TO_TORCH[grad.dtype]})")
        _writable(op, f"tensor {k} of the list", grad)
        check_no_internal_overlap(op, grad)
        cdt = np.float32 if grad.dtype in _HALF else grad.dtype
        value = _f(grad, cdt)
        if not np.isfinite(value).all():
            found_inf[...] = 1.0
        if scale != 1.0:
            np.copyto(grad, value * np.asarray(scale, cdt), casting="unsafe")


def _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                       growth_interval):
    op = "_amp_update_scale_"
    _one_element(op, "current_scale", scale, np.float32)
    _one_element(op, "growth_tracker", growth_tracker, np.int32)
    _one_element(op, "found_inf", found_inf, np.float32)
    _writable(op, "current_scale", scale)
    _writable(op, "growth_tracker", growth_tracker)
    # As the CPU: the float32 scale times the (double) factor, rounded to float32.
    current = float(scale.reshape(()))
    if found_inf.reshape(()).item():
        scale[...] = np.float32(current * backoff_factor)
        growth_tracker[...] = 0
        return scale
    successful = int(growth_tracker.reshape(())) + 1
    if successful == growth_interval:
        grown = np.float32(current * growth_factor)
        if np.isfinite(grown):
            scale[...] = grown
        growth_tracker[...] = 0
    else:
        growth_tracker[...] = successful
    return scale


def _weight_norm_dims(op, v, dim):
    """(compute dtype, result dtype, axes reduced, shape of the norms) of a weight norm."""
    if dim not in (0, v.ndim - 1):
        raise RuntimeError(f"{op}: fused kernels can only be applied for first or last dim, "
                           f"got dim={dim} for a {v.ndim}-d weight")
    dtype, cdt = _compute_dtype(op, v)
    shape = [1] * v.ndim
    shape[dim] = v.shape[dim]
    return dtype, cdt, tuple(a for a in range(v.ndim) if a != dim), shape


def _weight_norm_interface(v, g, dim=0):
    """As the CPU: the norms in float32 for float16 and bfloat16 weights (the decomposition
    would give them in the weight's dtype)."""
    dtype, cdt, axes, shape = _weight_norm_dims("_weight_norm_interface", v, dim)
    vc = _f(v, cdt)
    norm = np.sqrt(np.square(vc).sum(axis=axes, keepdims=True))
    w = vc * (_f(g, cdt).reshape(shape) / norm)
    return _out(w, dtype), _out(norm, cdt)


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    op = "_weight_norm_interface_backward"
    dtype, cdt, axes, shape = _weight_norm_dims(op, saved_v, dim)
    gw, v = _f(grad_w, cdt), _f(saved_v, cdt)
    norm = _f(saved_norms, cdt).reshape(shape)
    g = _f(saved_g, cdt).reshape(shape)
    grad_g = (gw * v).sum(axis=axes, keepdims=True) / norm
    a = g / norm
    b = a * grad_g / norm
    return _out(a * gw - b * v, dtype), _out(grad_g.reshape(saved_g.shape), saved_g.dtype)


def _efficientzerotensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return np.zeros(tuple(size), np_dtype(dtype or torch.get_default_dtype(),
                                          "aten::_efficientzerotensor"))


KERNELS = {
    "_amp_foreach_non_finite_check_and_unscale_": _amp_foreach_non_finite_check_and_unscale_,
    "_amp_update_scale_": _amp_update_scale_,
    "_weight_norm_interface": _weight_norm_interface,
    "_weight_norm_interface_backward": _weight_norm_interface_backward,
    "_efficientzerotensor": _efficientzerotensor,
}


# --- storage descriptions for forward-mode AD (tensor-level kernels) ------------------------


def _storage_numel(t: torch.Tensor) -> int:
    """The elements a tensor's storage would hold: those its payload spans."""
    return payload_nbytes(t) // t.element_size()


def _has_same_storage_numel(base: torch.Tensor, other: torch.Tensor) -> bool:
    return _storage_numel(base) == _storage_numel(other)


def _new_zeros_with_same_feature_meta(self: torch.Tensor, other: torch.Tensor, *,
                                      self_num_batch_dims: int = 0) -> torch.Tensor:
    """As ATen's: zeros laid out as ``other`` in a storage as large as ``other``'s, with
    ``self``'s leading ``self_num_batch_dims`` dimensions in front, each slice contiguous."""
    numel = _storage_numel(other)
    sizes = list(self.shape[:self_num_batch_dims]) + list(other.shape)
    strides = [0] * self_num_batch_dims + list(other.stride())
    for i in range(self_num_batch_dims - 1, -1, -1):
        strides[i] = numel
        numel *= self.shape[i]
    zeros = torch.zeros(numel, dtype=other.dtype, device=other.device)
    return zeros.as_strided(sizes, strides, other.storage_offset())


_lib = None


def register_storage_kernels() -> None:
    """Register the two storage-describing kernels (once)."""
    global _lib
    if _lib is None:
        _lib = torch.library.Library("aten", "IMPL")
        _lib.impl("_has_same_storage_numel", _has_same_storage_numel, "PrivateUse1")
        _lib.impl("_new_zeros_with_same_feature_meta", _new_zeros_with_same_feature_meta,
                  "PrivateUse1")
