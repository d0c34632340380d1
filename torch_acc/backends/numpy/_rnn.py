"""Recurrent-cell kernels of the ``npy`` backend: the fused LSTM and GRU cells and their
gradients, which ``nn.LSTM``, ``nn.GRU``, ``nn.LSTMCell`` and ``nn.GRUCell`` reach on an
accelerator.

On a device other than the CPU, PyTorch's recurrent layers compute the gate products
(``input @ w_ih.T``, ``hidden @ w_hh.T``) with ordinary matrix products and hand them, with
the biases, to ``_thnn_fused_lstm_cell`` or ``_thnn_fused_gru_cell``, which apply the gate
nonlinearities. These have no decomposition. The ``workspace`` they return is what their
backward reads; its layout is the backend's own (here CUDA's: the LSTM's activated gates
``[i, f, g, o]``, the GRU's ``[r, z, n, hx, hn]``). The formulas are CPU's (its unfused cell),
in float32 for float16 and bfloat16 inputs.
"""

import numpy as np

from ._common import DEVICE
from ._nn import _compute_dtype, _f, _out


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gates(op, input_gates, hidden_gates, input_bias, hidden_bias, n):
    """(result dtype, compute dtype, the two gate products with their biases added)."""
    dtype, cdt = _compute_dtype(op, input_gates)
    if input_gates.shape != hidden_gates.shape or input_gates.shape[-1] % n:
        raise RuntimeError(
            f"{op}: the {DEVICE} backend expected input and hidden gates of one shape "
            f"[batch, {n} * hidden_size], but got {list(input_gates.shape)} and "
            f"{list(hidden_gates.shape)}")
    ig, hg = _f(input_gates, cdt), _f(hidden_gates, cdt)
    if input_bias is not None:
        ig = ig + _f(input_bias, cdt)
    if hidden_bias is not None:
        hg = hg + _f(hidden_bias, cdt)
    return dtype, cdt, ig, hg


def _bias_grad(grad_gates, dtype):
    """The gradient of a gate bias: the gates' gradient summed over the batch."""
    return _out(grad_gates.reshape(-1, grad_gates.shape[-1]).sum(0), dtype)


def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    op = "_thnn_fused_lstm_cell"
    dtype, cdt, ig, hg = _gates(op, input_gates, hidden_gates, input_bias, hidden_bias, 4)
    i, f, g, o = np.split(ig + hg, 4, axis=-1)
    i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
    cy = f * _f(cx, cdt) + i * g
    hy = o * np.tanh(cy)
    workspace = np.concatenate([i, f, g, o], axis=-1)
    return _out(hy, dtype), _out(cy, dtype), _out(workspace, dtype)


def _thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    dtype, cdt = _compute_dtype("_thnn_fused_lstm_cell_backward_impl", workspace)
    i, f, g, o = np.split(_f(workspace, cdt), 4, axis=-1)
    cxc, cyc = _f(cx, cdt), _f(cy, cdt)
    tanh_cy = np.tanh(cyc)
    zero = np.zeros(cyc.shape, cdt)
    ghy = zero if grad_hy is None else _f(grad_hy, cdt)
    gcy = zero if grad_cy is None else _f(grad_cy, cdt)
    gc = ghy * o * (1 - tanh_cy * tanh_cy) + gcy
    grad_gates = np.concatenate([
        gc * g * (1 - i) * i,
        gc * cxc * (1 - f) * f,
        gc * i * (1 - g * g),
        ghy * tanh_cy * (1 - o) * o,
    ], axis=-1)
    grad_bias = _bias_grad(grad_gates, dtype) if has_bias else None
    return _out(grad_gates, dtype), _out(gc * f, dtype), grad_bias


def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    op = "_thnn_fused_gru_cell"
    dtype, cdt, ig, hg = _gates(op, input_gates, hidden_gates, input_bias, hidden_bias, 3)
    ir, ii, in_ = np.split(ig, 3, axis=-1)
    hr, hi, hn = np.split(hg, 3, axis=-1)
    hxc = _f(hx, cdt)
    r = _sigmoid(ir + hr)
    z = _sigmoid(ii + hi)
    n = np.tanh(in_ + r * hn)
    hy = (hxc - n) * z + n
    workspace = np.concatenate([r, z, n, np.broadcast_to(hxc, n.shape), hn], axis=-1)
    return _out(hy, dtype), _out(workspace, dtype)


def _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias):
    dtype, cdt = _compute_dtype("_thnn_fused_gru_cell_backward", workspace)
    r, z, n, hx, hn = np.split(_f(workspace, cdt), 5, axis=-1)
    g = _f(grad_hy, cdt)
    gz = g * (hx - n) * (1 - z) * z
    gn = g * (1 - z) * (1 - n * n)
    gr = gn * hn * (1 - r) * r
    grad_input_gates = np.concatenate([gr, gz, gn], axis=-1)
    grad_hidden_gates = np.concatenate([gr, gz, gn * r], axis=-1)
    if has_bias:
        gib, ghb = _bias_grad(grad_input_gates, dtype), _bias_grad(grad_hidden_gates, dtype)
    else:
        gib = ghb = None
    return (_out(grad_input_gates, dtype), _out(grad_hidden_gates, dtype), _out(g * z, dtype),
            gib, ghb)


KERNELS = {
    "_thnn_fused_lstm_cell": _thnn_fused_lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": _thnn_fused_lstm_cell_backward_impl,
    "_thnn_fused_gru_cell": _thnn_fused_gru_cell,
    "_thnn_fused_gru_cell_backward": _thnn_fused_gru_cell_backward,
}
