"""Attention kernels of the ``npy`` backend: the inference fast paths of
``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``.

In eval mode (no autograd) these modules call ``_native_multi_head_attention`` and
``_transformer_encoder_layer_fwd`` on the CPU, CUDA and the PrivateUse1 device; neither has a
decomposition. The kernels follow CPU's implementation: the packed ``qkv`` projection, the query
scaled by ``1 / sqrt(head_dim)`` with its bias, a softmax whose masked positions count as
zero (a row with every position masked gives NaN, as on the CPU), the output projection; then the
encoder layer's residual connections, layer norms and feed-forward block. float16 and
bfloat16 are computed in float32.
"""

import math

import numpy as np

from ._common import DEVICE
from ._nn import _compute_dtype, _f, _gelu, _native_layer_norm, _out


def _linear(x, weight, bias=None):
    y = np.matmul(x, weight.T)
    return y if bias is None else y + bias


def _mask(op, mask, mask_type, scores_shape):
    """The boolean mask (True: left out) broadcast to the scores (B, H, Lq, Lk), with CPU's
    checks: ``mask_type`` 0 is an (L, L) attention mask, 1 a (B, L) padding mask, 2 a mask of
    the scores' shape (the only kind for a mask that is not 2-d)."""
    if mask.dtype != np.bool_:
        mask = mask != 0
    b, _, lq, lk = scores_shape
    if mask.ndim != 2:
        mask_type = 2
    if mask_type == 2:
        if mask.shape != tuple(scores_shape):
            raise RuntimeError(f"{op}: For mask_type == 2 mask shape should match input shape: "
                               f"got {list(mask.shape)} for {list(scores_shape)}")
        return mask
    if mask_type == 1:
        if mask.shape != (b, lk):
            raise RuntimeError(f"{op}: For mask_type == 1 mask shape should be (B, L): got "
                               f"{list(mask.shape)} for scores {list(scores_shape)}")
        return np.broadcast_to(mask[:, None, None, :], scores_shape)
    if mask_type == 0:
        if mask.shape != (lq, lk):
            raise RuntimeError(f"{op}: For mask_type == 0 mask shape should be (L, L): got "
                               f"{list(mask.shape)} for scores {list(scores_shape)}")
        return np.broadcast_to(mask, scores_shape)
    raise RuntimeError(f"{op}: Mask Type should be defined (0, 1 or 2), got {mask_type}")


def _masked_softmax(scores, mask):
    """Softmax over the last axis, masked positions left out: NaN where all are, as on the
    CPU."""
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D / H)."""
    b, t, d = x.shape
    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def _attention(op, query, key, value, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
               proj_bias, mask, need_weights, average_attn_weights, mask_type, cdt):
    """(the attention output, its weights or None), in ``cdt``; inputs (B, T, D)."""
    if query.ndim != 3 or query.shape[-1] != embed_dim or embed_dim % num_heads:
        raise RuntimeError(
            f"{op}: the {DEVICE} backend expected a query of shape [batch, seq, {embed_dim}] "
            f"with {embed_dim} divisible by num_heads={num_heads}, but got "
            f"{list(query.shape)}")
    if qkv_weight.shape != (3 * embed_dim, embed_dim):
        raise RuntimeError(
            f"{op}: expected qkv_weight of shape [{3 * embed_dim}, {embed_dim}], but got "
            f"{list(qkv_weight.shape)}")
    w, bias = _f(qkv_weight, cdt), _f(qkv_bias, cdt)
    d = embed_dim
    head_dim = d // num_heads
    q = (_linear(_f(query, cdt), w[:d]) + bias[:d]) * np.asarray(1 / math.sqrt(head_dim), cdt)
    k = _linear(_f(key, cdt), w[d:2 * d], bias[d:2 * d])
    v = _linear(_f(value, cdt), w[2 * d:], bias[2 * d:])
    q, k, v = _heads(q, num_heads), _heads(k, num_heads), _heads(v, num_heads)
    scores = np.matmul(q, k.transpose(0, 1, 3, 2))
    if mask is not None:
        mask = _mask(op, mask, mask_type, scores.shape)
    weights = _masked_softmax(scores, mask)
    ctx = np.matmul(weights, v)
    b, _, t, _ = ctx.shape
    ctx = ctx.transpose(0, 2, 1, 3).reshape(b, t, d)
    out = _linear(ctx, _f(proj_weight, cdt), _f(proj_bias, cdt))
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.sum(axis=1) / num_heads
    return out, weights


def _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                 proj_weight, proj_bias, mask=None, need_weights=True,
                                 average_attn_weights=True, mask_type=None):
    op = "_native_multi_head_attention"
    dtype, cdt = _compute_dtype(op, query)
    if query.size == 0:
        return np.empty(query.shape, dtype), None
    out, weights = _attention(op, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                              proj_weight, proj_bias, mask, need_weights,
                              average_attn_weights, mask_type, cdt)
    return _out(out, dtype), None if weights is None else _out(weights, dtype)


def _layer_norm(x, weight, bias, eps, dtype):
    """CPU's layer norm over the last axis, rounded to ``dtype`` as CPU's result is."""
    y, _, _ = _native_layer_norm(_out(x, dtype), (x.shape[-1],), weight, bias, eps)
    return y


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                   proj_bias, use_gelu, norm_first, eps, norm_weight_1,
                                   norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                                   ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                   mask_type=None):
    op = "_transformer_encoder_layer_fwd"
    dtype, cdt = _compute_dtype(op, src)
    if src.size == 0:
        return src.copy()
    x = _layer_norm(src, norm_weight_1, norm_bias_1, eps, dtype) if norm_first else src
    x, _ = _attention(op, x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                      proj_bias, mask, False, True, mask_type, cdt)
    x = _out(_out(x, dtype) + src, dtype)
    if not norm_first:
        x = _layer_norm(x, norm_weight_1, norm_bias_1, eps, dtype)
    residual = x
    if norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps, dtype)
    # Each step's result rounded to the layer's dtype, as CPU's linear and activation give it.
    h = _out(_linear(_f(x, cdt), _f(ffn_weight_1, cdt), _f(ffn_bias_1, cdt)), dtype)
    h = _f(h, cdt)
    h = _out(_gelu(h) if use_gelu else np.maximum(h, np.zeros((), cdt)), dtype)
    h = _out(_linear(_f(h, cdt), _f(ffn_weight_2, cdt), _f(ffn_bias_2, cdt)), dtype)
    x = _out(h + residual, dtype)
    if not norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps, dtype)
    return _out(x, dtype)


KERNELS = {
    "_native_multi_head_attention": _native_multi_head_attention,
    "_transformer_encoder_layer_fwd": _transformer_encoder_layer_fwd,
}
