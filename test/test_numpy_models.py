# Owner(s): ["module: PrivateUse1"]
"""The models people train run on ``npy`` as on the CPU: recurrent layers, transformer
encoders (training and the inference fast path), mixed precision with ``GradScaler``,
``weight_norm``, forward-mode AD and scaled dot-product attention.

Each test builds its module once, copies it to both devices (same initial weights), runs the
same inputs and compares outputs and gradients with the CPU's.
"""

import copy
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    TestCase,
)

from torch_acc.backends import numpy as npy_backend

DEVICE = npy_backend.setup()


def _on(module, device: str) -> nn.Module:
    r"""A copy of ``module`` on ``device``; ``module`` may also be a function of the device
    that builds one (same weights on every device)."""
    if not isinstance(module, nn.Module):
        return module(device)
    return copy.deepcopy(module).to(device)


def _grads(module: nn.Module) -> dict:
    return {name: p.grad for name, p in module.named_parameters()}


class TestNumpyModels(TestCase):
    def assertMatchesCpu(self, actual, expected, **kwargs):
        r"""``actual`` (on npy, or a structure of such) equals ``expected`` (on CPU)."""
        if isinstance(actual, dict):
            self.assertEqual(actual.keys(), expected.keys())
            for key in actual:
                self.assertMatchesCpu(actual[key], expected[key], msg=key, **kwargs)
            return
        if isinstance(actual, tuple | list):
            self.assertEqual(len(actual), len(expected))
            for a, e in zip(actual, expected, strict=True):
                self.assertMatchesCpu(a, e, **kwargs)
            return
        if actual is None or expected is None:
            self.assertIs(actual, expected)
            return
        self.assertEqual(actual.device.type, DEVICE)
        self.assertEqual(actual.cpu(), expected, **kwargs)

    def _train_step(self, module, make_inputs, loss_fn=lambda out: out.square().sum()):
        r"""Run ``module`` forward and backward on both devices; compare output, input
        gradients and parameter gradients."""
        results = {}
        cpu_inputs = make_inputs()
        for device in (DEVICE, "cpu"):
            m = _on(module, device)
            inputs = [x.detach().to(device).requires_grad_(x.is_floating_point())
                      for x in cpu_inputs]
            out = m(*inputs)
            loss_fn(out).backward()
            results[device] = (out, [x.grad for x in inputs], _grads(m))
        npy, cpu = results[DEVICE], results["cpu"]
        self.assertMatchesCpu(npy[0], cpu[0], atol=1e-5, rtol=1e-4)
        self.assertMatchesCpu(npy[1], cpu[1], atol=1e-5, rtol=1e-4)
        self.assertMatchesCpu(npy[2], cpu[2], atol=1e-5, rtol=1e-4)

    # --- recurrent layers -----------------------------------------------------------------

    @parametrize("bidirectional", [False, True])
    @parametrize("batch_first", [False, True])
    def test_lstm(self, bidirectional, batch_first):
        torch.manual_seed(0)
        lstm = nn.LSTM(5, 7, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
        x = torch.randn(3, 4, 5)
        h0 = torch.randn(2 * (1 + bidirectional), 3 if batch_first else 4, 7)
        c0 = torch.randn_like(h0)

        def loss(out):
            y, (h, c) = out
            return y.square().sum() + h.sum() + c.mul(2).sum()

        results = {}
        for device in (DEVICE, "cpu"):
            m = _on(lstm, device)
            inputs = [t.detach().to(device).requires_grad_() for t in (x, h0, c0)]
            out = m(inputs[0], (inputs[1], inputs[2]))
            loss(out).backward()
            results[device] = (out, [t.grad for t in inputs], _grads(m))
        for npy, cpu in zip(results[DEVICE], results["cpu"], strict=True):
            self.assertMatchesCpu(npy, cpu, atol=1e-5, rtol=1e-4)

    def test_lstm_no_bias_and_proj(self):
        torch.manual_seed(0)
        lstm = nn.LSTM(4, 6, bias=False, proj_size=3)
        self._train_step(lstm, lambda: (torch.randn(5, 2, 4),),
                         lambda out: out[0].square().sum() + out[1][1].sum())

    def test_lstm_only_output_used(self):
        # Only the outputs are used: the last step's backward gets None for the cell state.
        torch.manual_seed(0)
        self._train_step(nn.LSTM(3, 4), lambda: (torch.randn(6, 2, 3),),
                         lambda out: out[0].sum())

    @parametrize("bidirectional", [False, True])
    @parametrize("batch_first", [False, True])
    def test_gru(self, bidirectional, batch_first):
        # batch_first: ATen transposes the stacked outputs in place (transpose_), which needs
        # stack's result to be a whole array of its own.
        torch.manual_seed(0)
        gru = nn.GRU(5, 6, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
        self._train_step(gru, lambda: (torch.randn(4, 3, 5), torch.randn(
            2 * (1 + bidirectional), 4 if batch_first else 3, 6)),
            lambda out: out[0].square().sum() + out[1].sum())

    def test_stack_then_inplace_transpose(self):
        parts = [torch.randn(2, 3, generator=torch.Generator().manual_seed(i)) for i in range(4)]
        for dim in (0, 1, -1):
            expected = torch.stack(parts, dim).transpose_(0, 1)
            actual = torch.stack([p.to(DEVICE) for p in parts], dim).transpose_(0, 1)
            self.assertEqual(actual.stride(), expected.stride())
            self.assertMatchesCpu(actual, expected)
        with self.assertRaisesRegex(RuntimeError, "stack expects each tensor to be equal size"):
            torch.stack([torch.ones(2, device=DEVICE), torch.ones(3, device=DEVICE)])

    def test_gru_no_bias_packed_sequence(self):
        torch.manual_seed(0)
        gru = nn.GRU(3, 4, bias=False)
        x = torch.randn(5, 3, 3)
        lengths = torch.tensor([5, 3, 2])
        results = {}
        for device in (DEVICE, "cpu"):
            m = _on(gru, device)
            xd = x.detach().to(device).requires_grad_()
            packed = nn.utils.rnn.pack_padded_sequence(xd, lengths)
            out, h = m(packed)
            y, _ = nn.utils.rnn.pad_packed_sequence(out)
            (y.square().sum() + h.sum()).backward()
            results[device] = (y, h, xd.grad, _grads(m))
        for npy, cpu in zip(results[DEVICE], results["cpu"], strict=True):
            self.assertMatchesCpu(npy, cpu, atol=1e-5, rtol=1e-4)

    def test_cells(self):
        torch.manual_seed(0)
        for cell in (nn.LSTMCell(3, 5), nn.GRUCell(3, 5)):
            self._train_step(cell, lambda: (torch.randn(2, 3),),
                             lambda out: sum(o.square().sum() for o in (
                                 out if isinstance(out, tuple) else (out,))))

    def test_gru_double_backward(self):
        # With create_graph the cells' backward is differentiable (PyTorch's own composite).
        torch.manual_seed(0)
        cell = nn.GRUCell(2, 3)
        x = torch.randn(4, 2)
        results = {}
        for device in (DEVICE, "cpu"):
            m = _on(cell, device)
            xd = x.detach().to(device).requires_grad_()
            (g,) = torch.autograd.grad(m(xd).square().sum(), xd, create_graph=True)
            g.sum().backward()
            results[device] = (g, xd.grad)
        self.assertMatchesCpu(results[DEVICE], results["cpu"], atol=1e-5, rtol=1e-4)

    def test_lstm_bfloat16(self):
        torch.manual_seed(0)
        lstm = nn.LSTM(4, 4).to(torch.bfloat16)
        x = torch.randn(3, 2, 4, dtype=torch.bfloat16)
        with torch.no_grad():
            y, _ = _on(lstm, DEVICE)(x.to(DEVICE))
            expected, _ = lstm(x)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertMatchesCpu(y, expected, atol=2e-2, rtol=2e-2)

    # --- transformers ---------------------------------------------------------------------

    @parametrize("norm_first", [False, True])
    @parametrize("activation", ["relu", "gelu"])
    def test_transformer_encoder_layer_train(self, norm_first, activation):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                           norm_first=norm_first, batch_first=True)
        mask = nn.Transformer.generate_square_subsequent_mask(5)
        results = {}
        for device in (DEVICE, "cpu"):
            m = _on(layer, device)
            x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1)).to(device)
            x.requires_grad_()
            out = m(x, src_mask=mask.to(device))
            out.square().sum().backward()
            results[device] = (out, x.grad, _grads(m))
        for npy, cpu in zip(results[DEVICE], results["cpu"], strict=True):
            self.assertMatchesCpu(npy, cpu, atol=1e-5, rtol=1e-4)

    @parametrize("norm_first", [False, True])
    @parametrize("activation", ["relu", "gelu"])
    def test_transformer_encoder_layer_eval_fast_path(self, norm_first, activation):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, activation=activation,
                                           norm_first=norm_first, batch_first=True).eval()
        x = torch.randn(3, 5, 8)
        padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
        for kwargs in ({}, {"src_key_padding_mask": padding}):
            with torch.no_grad():
                expected = layer(x, **kwargs)
                on_npy = _on(layer, DEVICE)
                kwargs = {k: v.to(DEVICE) for k, v in kwargs.items()}
                actual = on_npy(x.to(DEVICE), **kwargs)
            self.assertMatchesCpu(actual, expected, atol=1e-5, rtol=1e-4)

    @parametrize("dtype", [torch.float16, torch.bfloat16])
    def test_transformer_encoder_layer_eval_low_precision(self, dtype):
        # Computed in float32, each step rounded to the layer's dtype as on the CPU.
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", batch_first=True)
        layer = layer.to(dtype).eval()
        x = torch.randn(2, 5, 8, dtype=dtype)
        with torch.no_grad():
            expected = layer(x)
            actual = _on(layer, DEVICE)(x.to(DEVICE))
        self.assertEqual(actual.dtype, dtype)
        self.assertMatchesCpu(actual, expected, atol=2e-2, rtol=2e-2)

    def test_transformer_encoder_eval(self):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # enable_nested_tensor with norm_first
            encoder = nn.TransformerEncoder(layer, num_layers=2).eval()
        x = torch.randn(2, 6, 16)
        with torch.no_grad():
            expected = encoder(x)
            actual = _on(encoder, DEVICE)(x.to(DEVICE))
        self.assertMatchesCpu(actual, expected, atol=1e-5, rtol=1e-4)

    def test_transformer_encoder_padding_mask_eval(self):
        # In eval mode with a padding mask, nn.TransformerEncoder converts its input to a
        # nested tensor, which npy has no kernels for: a clear error, not a wrong result...
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        x = torch.randn(2, 4, 8)
        padding = torch.tensor([[False, False, True, True], [False] * 4])
        encoder = nn.TransformerEncoder(layer, num_layers=2).eval()
        with torch.no_grad(), self.assertRaisesRegex(NotImplementedError, "nested_tensor"):
            _on(encoder, DEVICE)(x.to(DEVICE), src_key_padding_mask=padding.to(DEVICE))
        # ... and without nested tensors, CPU's answer (each layer's fast path).
        encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
        with torch.no_grad():
            expected = encoder(x, src_key_padding_mask=padding)
            actual = _on(encoder, DEVICE)(x.to(DEVICE), src_key_padding_mask=padding.to(DEVICE))
        self.assertMatchesCpu(actual, expected, atol=1e-5, rtol=1e-4)

    @parametrize("need_weights", [False, True])
    def test_multihead_attention_eval_fast_path(self, need_weights):
        torch.manual_seed(0)
        mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
        x = torch.randn(2, 4, 8)
        padding = torch.tensor([[False, False, True, True], [False] * 4])
        with torch.no_grad():
            expected = mha(x, x, x, key_padding_mask=padding, need_weights=need_weights)
            xd = x.to(DEVICE)
            actual = _on(mha, DEVICE)(xd, xd, xd, key_padding_mask=padding.to(DEVICE),
                                      need_weights=need_weights)
        self.assertMatchesCpu(actual, expected, atol=1e-5, rtol=1e-4)

    def test_native_multi_head_attention_masks(self):
        # The fast path's operator directly, with each kind of mask CPU takes and a row
        # whose every position is masked (NaN, as on the CPU).
        torch.manual_seed(0)
        b, t, d, h = 2, 3, 4, 2
        q = torch.randn(b, t, d)
        weights = [torch.randn(3 * d, d), torch.randn(3 * d), torch.randn(d, d), torch.randn(d)]
        masks = [
            (torch.tensor([[False, True, True], [False, False, True], [True, True, True]]), 0),
            (torch.tensor([[False, False, True], [True, True, True]]), 1),
            (torch.rand(b, h, t, t) > 0.5, 2),
            (torch.rand(b, h, t, t), 2),  # not boolean: nonzero is masked, as on the CPU
        ]
        for mask, mask_type in masks:
            args = (d, h, *weights, mask, True, False, mask_type)
            expected = torch._native_multi_head_attention(q, q, q, *args)
            on_npy = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
            qd = q.to(DEVICE)
            actual = torch._native_multi_head_attention(qd, qd, qd, *on_npy)
            self.assertMatchesCpu(actual, expected, atol=1e-5, rtol=1e-4, equal_nan=True)
        qd = q.to(DEVICE)
        for mask, mask_type, message in [
            (torch.zeros(t, t, dtype=torch.bool), None, "Mask Type should be defined"),
            (torch.zeros(b, t, dtype=torch.bool), 0, r"mask_type == 0 mask shape should be"),
            (torch.zeros(t, t + 1, dtype=torch.bool), 1, r"mask_type == 1 mask shape should be"),
            (torch.zeros(1, h, t, t, dtype=torch.bool), 2, "mask shape should match input"),
        ]:
            args = (d, h, *weights, mask, True, False, mask_type)
            with self.assertRaisesRegex(RuntimeError, message):
                torch._native_multi_head_attention(q, q, q, *args)
            on_npy = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
            with self.assertRaisesRegex(RuntimeError, message):
                torch._native_multi_head_attention(qd, qd, qd, *on_npy)

    @parametrize("is_causal", [False, True])
    def test_scaled_dot_product_attention(self, is_causal):
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 3, 5, 4, generator=gen) for _ in range(3))
        mask = None if is_causal else torch.randn(5, 5, generator=gen)
        results = {}
        for device in (DEVICE, "cpu"):
            qkv = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
            out = F.scaled_dot_product_attention(
                *qkv, attn_mask=None if mask is None else mask.to(device), is_causal=is_causal)
            out.square().sum().backward()
            results[device] = (out, [t.grad for t in qkv])
        self.assertMatchesCpu(results[DEVICE], results["cpu"], atol=1e-5, rtol=1e-4)

    def test_attention_without_a_choice_kernel_takes_the_math_path(self):
        # npy has no kernel of aten::_fused_sdp_choice: the choice stub answers "math", and
        # attention decomposes into the operators npy has.
        q = torch.randn(2, 3, 5, 4, device=DEVICE, requires_grad=True)
        out = F.scaled_dot_product_attention(q, q, q)
        self.assertNotIn("FlashAttention", type(out.grad_fn).__name__)
        self.assertEqual(out.cpu(), F.scaled_dot_product_attention(*[q.detach().cpu()] * 3),
                         atol=1e-5, rtol=1e-4)

    # --- training utilities ---------------------------------------------------------------

    def test_grad_scaler(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
        results = {}
        for device in (DEVICE, "cpu"):
            m = _on(model, device)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
            losses, scales = [], []
            for step in range(5):
                opt.zero_grad()
                with torch.autocast(device, dtype=torch.bfloat16):
                    loss = F.cross_entropy(m(x.to(device)).float(), y.to(device))
                scaled = scaler.scale(loss)
                if step == 2:
                    scaled = scaled * float("inf")  # an overflow: the step is skipped
                scaled.backward()
                scaler.step(opt)
                scaler.update()
                losses.append(loss.detach())
                scales.append(scaler.get_scale())
            results[device] = (torch.stack(losses), scales, dict(m.state_dict()))
        npy, cpu = results[DEVICE], results["cpu"]
        self.assertMatchesCpu(npy[0], cpu[0], atol=1e-5, rtol=1e-4)
        self.assertEqual(npy[1], cpu[1])
        self.assertEqual(cpu[1], [1024.0, 2048.0, 1024.0, 1024.0, 2048.0])
        self.assertMatchesCpu(npy[2], cpu[2], atol=1e-5, rtol=1e-4)

    def test_amp_unscale_kernels(self):
        grads = [torch.tensor([2.0, 4.0]), torch.tensor([1.0, float("nan")], dtype=torch.half)]
        results = {}
        for device in (DEVICE, "cpu"):
            gs = [g.to(device) for g in grads]
            found = torch.zeros(1, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(
                gs[:1], found, torch.full((1,), 0.5, device=device))
            first = found.clone()
            torch._amp_foreach_non_finite_check_and_unscale_(
                gs, found, torch.full((1,), 0.5, device=device))
            results[device] = (gs, first, found)
        self.assertMatchesCpu(results[DEVICE], results["cpu"])
        self.assertEqual(results["cpu"][1].item(), 0.0)
        self.assertEqual(results["cpu"][2].item(), 1.0)

    def test_amp_update_scale_kernel(self):
        # Factors that float32 does not hold exactly: the product is rounded once, as on the CPU.
        for found_inf, tracker in ((0.0, 0), (0.0, 2), (1.0, 2)):
            results = {}
            for device in (DEVICE, "cpu"):
                scale = torch.full((1,), 4.1, device=device)
                growth = torch.full((1,), tracker, dtype=torch.int32, device=device)
                out = torch._amp_update_scale_(scale, growth,
                                               torch.full((1,), found_inf, device=device),
                                               2.3, 0.3, 3)
                self.assertIs(out, scale)
                results[device] = (scale, growth)
            self.assertMatchesCpu(results[DEVICE], results["cpu"], atol=0, rtol=0)

    def test_amp_kernels_reject_bad_arguments(self):
        grads = [torch.ones(2, device=DEVICE)]
        with self.assertRaisesRegex(RuntimeError, "found_inf must be a 1-element tensor"):
            torch._amp_foreach_non_finite_check_and_unscale_(
                grads, torch.zeros(2, device=DEVICE), torch.ones(1, device=DEVICE))
        with self.assertRaisesRegex(RuntimeError, "refers to a single memory location"):
            torch._amp_foreach_non_finite_check_and_unscale_(
                [torch.ones(1, device=DEVICE).expand(3)], torch.zeros(1, device=DEVICE),
                torch.ones(1, device=DEVICE))
        with self.assertRaisesRegex(RuntimeError, "growth_tracker must be a 1-element tensor "
                                                  "of dtype torch.int32"):
            torch._amp_update_scale_(torch.ones(1, device=DEVICE),
                                     torch.zeros(1, device=DEVICE),
                                     torch.zeros(1, device=DEVICE), 2.0, 0.5, 3)

    @parametrize("dim", [0, 1])
    @parametrize("api", ["parametrizations", "legacy"])
    def test_weight_norm(self, dim, api):
        torch.manual_seed(0)
        linear = nn.Linear(5, 4)

        def layer(device):
            # The legacy weight_norm's module cannot be deep-copied: applied on each device.
            on_device = copy.deepcopy(linear).to(device)
            if api == "parametrizations":
                return nn.utils.parametrizations.weight_norm(on_device, dim=dim)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in favour of parametrizations
                return nn.utils.weight_norm(on_device, dim=dim)

        self._train_step(layer, lambda: (torch.randn(3, 5),))

    @parametrize("dim", [0, 1, 2])
    def test_weight_norm_conv(self, dim):
        # A middle dim takes PyTorch's composite (norm_except_dim), the others the fused
        # _weight_norm_interface.
        torch.manual_seed(0)
        layer = nn.utils.parametrizations.weight_norm(nn.Conv1d(2, 3, 3), dim=dim)
        self._train_step(layer, lambda: (torch.randn(2, 2, 7),))

    def test_weight_norm_interface_half(self):
        # As on the CPU, the norms of a float16 weight are float32.
        gen = torch.Generator().manual_seed(0)
        v = torch.randn(4, 3, generator=gen).half()
        g = torch.rand(4, 1, generator=gen).half()
        # CPU's answer, computed in float32 as CPU's kernel does (torch 2.6's CPU has no
        # float16 kernel to ask).
        w, norms = torch._weight_norm_interface(v.float(), g.float(), 0)
        expected = (w.half(), norms)
        actual = torch._weight_norm_interface(v.to(DEVICE), g.to(DEVICE), 0)
        self.assertEqual([t.dtype for t in actual], [torch.float16, torch.float32])
        self.assertMatchesCpu(actual, expected, atol=1e-3, rtol=1e-3)
        grad = torch.ones_like(expected[0])
        expected = tuple(t.half() for t in torch.ops.aten._weight_norm_interface_backward(
            grad.float(), v.float(), g.float(), norms, 0))
        actual = torch.ops.aten._weight_norm_interface_backward(
            grad.to(DEVICE), v.to(DEVICE), g.to(DEVICE), actual[1], 0)
        self.assertMatchesCpu(actual, expected, atol=1e-3, rtol=1e-3)

    def test_weight_norm_backward_rejects_middle_dim(self):
        w = torch.randn(2, 3, 4, device=DEVICE)
        g = torch.randn(1, 3, 1, device=DEVICE)
        with self.assertRaisesRegex(RuntimeError, "first or last dim"):
            torch.ops.aten._weight_norm_interface_backward(w, w, g, g, 1)

    # --- forward-mode AD and zero gradients -----------------------------------------------

    def test_sgn_backward(self):
        results = {}
        x = torch.tensor([-2.0, 0.0, 3.0])
        for device in (DEVICE, "cpu"):
            xd = x.detach().to(device).requires_grad_()
            (torch.sgn(xd) * 3 + xd.sign() + xd).sum().backward()
            results[device] = xd.grad
        self.assertMatchesCpu(results[DEVICE], results["cpu"])
        xd = x.to(DEVICE).requires_grad_()
        torch.sgn(xd).sum().backward()
        self.assertMatchesCpu(xd.grad, torch.zeros(3))

    def test_jvp(self):
        def f(x, w):
            return (x[1:] @ w).tanh().sgn() * x[1:].exp() + x[:-1] @ w

        gen = torch.Generator().manual_seed(0)
        primals = (torch.randn(4, 3, generator=gen), torch.randn(3, 3, generator=gen))
        tangents = (torch.randn(4, 3, generator=gen), torch.randn(3, 3, generator=gen))
        expected = torch.func.jvp(f, primals, tangents)
        actual = torch.func.jvp(f, tuple(p.to(DEVICE) for p in primals),
                                tuple(t.to(DEVICE) for t in tangents))
        self.assertMatchesCpu(actual, expected, atol=1e-5, rtol=1e-4)

    def test_jvp_view_primal(self):
        # A primal that is a view of a larger tensor: its tangent is laid out over a storage
        # as large as the primal's (the storage-describing kernels).
        import torch.autograd.forward_ad as fwAD

        base = torch.randn(5, 4)
        tangent = torch.randn(3, 4)
        results = {}
        for device in (DEVICE, "cpu"):
            with fwAD.dual_level():
                dual = fwAD.make_dual(base.to(device)[1:4], tangent.to(device))
                out = fwAD.unpack_dual((dual.sin() * dual).sum(0))
                results[device] = (out.primal, out.tangent)
        self.assertMatchesCpu(results[DEVICE], results["cpu"], atol=1e-5, rtol=1e-4)

    def test_jacfwd_and_hessian(self):
        def f(x):
            return (x.sin() * x).sum() + x.prod()

        x = torch.randn(4, generator=torch.Generator().manual_seed(0))
        for transform in (torch.func.jacfwd, torch.func.jacrev):
            self.assertMatchesCpu(transform(f)(x.to(DEVICE)), transform(f)(x),
                                  atol=1e-5, rtol=1e-4)
        self.assertMatchesCpu(torch.func.hessian(f)(x.to(DEVICE)), torch.func.hessian(f)(x),
                              atol=1e-5, rtol=1e-4)


instantiate_parametrized_tests(TestNumpyModels)


if __name__ == "__main__":
    run_tests()
