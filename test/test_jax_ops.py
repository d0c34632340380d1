# Owner(s): ["module: PrivateUse1"]
"""The ``jax`` backend's kernels against CPU: OpInfo samples of the core families, a training
step eager and compiled (``per_device`` lowers graphs to ``jax.jit``)."""

import contextlib
import copy
import io
import unittest
import warnings

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

try:
    import jax
except ImportError:
    jax = None

if jax is not None:
    import torch_acc
    from torch_acc.backends import jax as jax_backend
    from torch_acc.backends.jax import _compile

    jax_backend.setup()

# One or two entries of every family the backend has kernels for; the OpInfo report
# (docs/opinfo_jax.md) covers the whole op_db.
ENTRIES = """
    abs neg exp log sin tanh sigmoid sqrt floor sign reciprocal erf clamp
    add sub mul div.no_rounding_mode div.floor_rounding div.trunc_rounding pow maximum eq lt
    remainder fmod where logical_and
    sum mean prod amax argmax max.reduction_with_dim var cumsum any all
    cat flip roll tril index_select gather scatter scatter_add scatter_reduce.sum index_put
    masked_fill sort topk nonzero __getitem__ constant_pad_nd
    mm bmm addmm matmul nn.functional.linear
    softmax log_softmax nn.functional.cross_entropy nn.functional.layer_norm
    nn.functional.conv2d nn.functional.conv_transpose2d nn.functional.max_pool2d
    nn.functional.avg_pool2d nn.functional.embedding
    addbmm median nanmedian masked_select masked_scatter cdist complex equal diagonal_scatter
    nn.functional.avg_pool3d nn.functional.adaptive_avg_pool3d
    fft.fft fft.ifft fft.rfft fft.irfft fft.fftn fft.hfft fft.ihfft
""".split()


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, list | tuple):
        return type(x)(_to(i, device) for i in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _cpu(x):
    return _to(x, "cpu")


@unittest.skipIf(jax is None, "JAX is not installed (pip install torch_acc[jax])")
class TestJaxOps(TestCase):
    def test_opinfo_samples_match_cpu(self):
        from torch.testing._internal.common_methods_invocations import op_db

        entries = {
            (o.name if not o.variant_test_name else f"{o.name}.{o.variant_test_name}"): o
            for o in op_db
        }
        for name in ENTRIES:
            op = entries[name]
            for i, sample in enumerate(op.sample_inputs("cpu", torch.float32)):
                if i >= 3:
                    break
                with self.subTest(entry=name, sample=i):
                    expected = op(sample.input, *sample.args, **sample.kwargs)
                    got = op(
                        _to(sample.input, "jax"),
                        *_to(sample.args, "jax"),
                        **_to(sample.kwargs, "jax"),
                    )
                    self.assertEqual(_cpu(got), expected, exact_device=False)

    def test_float64_and_integer_dtypes(self):
        for dtype in (
            torch.float64,
            torch.int64,
            torch.int32,
            torch.uint8,
            torch.bool,
            torch.bfloat16,
            torch.complex64,
        ):
            x = (torch.arange(12) % 5).reshape(3, 4).to(dtype)
            a = x.to("jax")
            with self.subTest(dtype=dtype):
                if not dtype.is_floating_point and not dtype.is_complex:
                    self.assertEqual((a & a.flip(0)).cpu(), x & x.flip(0))
                self.assertEqual((a * a).cpu(), x * x)
                self.assertEqual(a.sum(0).cpu(), x.sum(0))
                self.assertEqual((a == 2).cpu(), x == 2)
                self.assertEqual(a.t().contiguous().cpu(), x.t().contiguous())

    def test_in_place_and_out(self):
        x = torch.randn(3, 4)
        a = x.to("jax")
        a.mul_(2).add_(1).clamp_(-1, 1)
        self.assertEqual(a.cpu(), x.mul(2).add(1).clamp(-1, 1))
        out = torch.empty(0, device="jax")
        torch.add(a, a, out=out)
        self.assertEqual(out.cpu(), a.cpu() * 2)

    def test_median_corners(self):
        """NaNs (``median`` takes the first, ``nanmedian`` skips them), empty inputs and an
        empty reduced dimension as on the CPU; an empty integer tensor, whose median CPU
        answers with an undefined value, is an error."""
        nan = float("nan")
        cases = [
            lambda d: torch.tensor([[1.0, nan, 3.0], [2.0, 2.0, 2.0]], device=d).median(1),
            lambda d: torch.tensor([[nan] * 3, [2.0, nan, 1.0]], device=d).nanmedian(1),
            lambda d: torch.tensor([3.0, nan, 1.0], device=d).nanmedian(),
            lambda d: torch.empty(0, device=d).median(),
            lambda d: torch.empty(0, 3, device=d).median(1),
            lambda d: torch.tensor(5.0, device=d).median(0),
        ]
        for i, f in enumerate(cases):
            with self.subTest(case=i):
                self.assertEqual(_cpu(f("jax")), f("cpu"), equal_nan=True)
        for f in (lambda d: torch.empty(2, 0, device=d).median(1),
                  lambda d: torch.empty(0, 0, device=d).nanmedian(1)):
            with self.assertRaisesRegex(IndexError, "Expected reduction dim 1 to have non-zero"):
                f("cpu")
            with self.assertRaisesRegex(IndexError, "Expected reduction dim 1 to have non-zero"):
                f("jax")
        with self.assertRaisesRegex(RuntimeError, "empty integer tensor has no value"):
            torch.empty(0, dtype=torch.int64, device="jax").median()

    def test_masked_scatter_with_too_few_source_elements_is_cpus_error(self):
        for d in ("cpu", "jax"):
            with self.assertRaisesRegex(RuntimeError, "Number of elements of source < number"):
                torch.zeros(3, device=d).masked_scatter(
                    torch.ones(3, dtype=torch.bool, device=d), torch.ones(2, device=d))

    def test_diagonal_scatter_of_a_wrong_size_is_cpus_error(self):
        for d in ("cpu", "jax"):
            with self.assertRaisesRegex(RuntimeError, "expected src to have a size equal"):
                torch.diagonal_scatter(torch.zeros(3, 3, device=d), torch.ones(1, device=d))

    def test_fill_and_the_like_factories(self):
        """``fill_``/``zero_`` (new payloads the bridge binds) reach the base of a view, and
        ``ones_like``/``full_like`` (which fill a fresh tensor) keep CPU's layout, dtype and
        ``device=``; a value that is not 0-d is CPU's error."""

        def cases(d):
            a = torch.zeros(4, device=d)
            a[1:3].fill_(5)
            b = torch.zeros(2, 3, device=d)
            b.t()[1].fill_(torch.tensor(2.0))
            c = torch.ones(2, 2, dtype=torch.int32, device=d)
            c.zero_()
            ones = torch.ones_like(torch.empty(2, 3, device=d).t())
            full = torch.full_like(torch.empty(2, 3, device=d), 2.5, dtype=torch.float64)
            return a, b, c, ones, full

        for cpu, got in zip(cases("cpu"), cases("jax"), strict=True):
            self.assertEqual(got.cpu(), cpu, exact_dtype=True)
            self.assertEqual(got.stride(), cpu.stride())
        self.assertEqual(torch.ones_like(torch.empty(2, device="jax"), device="cpu").device.type,
                         "cpu")
        with self.assertRaisesRegex(RuntimeError, "0-dimension value tensor"):
            torch.zeros(2, device="jax").fill_(torch.ones(2, device="jax"))

    def test_kernels_get_conjugate_and_negative_views_resolved(self):
        """A backend's ``clone`` kernel gets conjugate and negative views through PyTorch's
        fallbacks with their bits set; the bridge resolves them by a copy. It used to resolve
        them by ``resolve_conj``, which clones: the same kernel again, without end (a stack
        overflow, found by the OpInfo run through ``fft.hfft``, which conjugates)."""
        x = torch.randn(3, dtype=torch.cfloat)
        y = x.to("jax")
        self.assertEqual(y.conj().clone().cpu(), x.conj())
        self.assertEqual(y.conj().neg().clone().cpu(), x.conj().neg())
        self.assertEqual((y.conj() * 2).cpu(), x.conj() * 2)
        got = torch.fft.hfft(y.conj(), n=4)
        self.assertEqual(got.cpu(), torch.fft.hfft(x.conj(), n=4))


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _train(model, device, steps, compile_step=False, optimizer=None):
    model = model.to(device)
    if optimizer is None:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = optimizer(model.parameters())
    gen = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(32, 8, generator=gen), torch.randint(0, 3, (32,), generator=gen))
        for _ in range(steps)
    ]

    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = torch.compile(step, backend="per_device") if compile_step else step
    losses = [run(x.to(device), y.to(device)).item() for x, y in batches]
    return losses, [p.detach().cpu() for p in model.parameters()]


@unittest.skipIf(jax is None, "JAX is not installed (pip install torch_acc[jax])")
class TestJaxTraining(TestCase):
    def test_training_step_matches_cpu(self):
        model = _mlp()
        cpu_losses, cpu_params = _train(copy.deepcopy(model), "cpu", 4)
        jax_losses, jax_params = _train(model, "jax", 4)
        self.assertEqual(jax_losses, cpu_losses, atol=1e-5, rtol=1e-4)
        self.assertEqual(jax_params, cpu_params, atol=1e-5, rtol=1e-4)

    def test_compiled_step_is_one_jit_per_graph_and_matches_cpu(self):
        lowered = []

        def spy(gm, example_inputs):
            compiled = _compile.compile_graph(gm, example_inputs)
            lowered.append(compiled is not gm.forward)
            return compiled

        torch_acc.register_compile_backend("jax", spy)
        try:
            torch._dynamo.reset()
            model = _mlp()
            cpu_losses, cpu_params = _train(copy.deepcopy(model), "cpu", 4)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                jax_losses, jax_params = _train(model, "jax", 4, compile_step=True)
        finally:
            torch_acc.register_compile_backend("jax", _compile.compile_graph)
            torch._dynamo.reset()
        self.assertTrue(lowered)
        self.assertTrue(all(lowered), lowered)
        # Each graph was traced as one jax.jit when it first ran, not run op by op.
        fallbacks = [str(w.message) for w in caught if "runs op by op" in str(w.message)]
        self.assertEqual(fallbacks, [])
        self.assertEqual(jax_losses, cpu_losses, atol=1e-5, rtol=1e-4)
        self.assertEqual(jax_params, cpu_params, atol=1e-5, rtol=1e-4)

    def test_demo_trains_on_jax(self):
        from torch_acc import demo

        with contextlib.redirect_stdout(io.StringIO()) as out:
            status = demo.main(
                ["--device", "jax", "--model", "mlp", "--epochs", "1", "--no-progress"]
            )
        self.assertEqual(status, 0, out.getvalue())
        self.assertIn("jax loss", out.getvalue())
        self.assertIn("losses match cpu at every step", out.getvalue())

    def test_compiled_optimizers_are_lowered_and_match_cpu(self):
        """The foreach graphs of the optimizers (``_foreach_add``, ``_foreach_addcmul``,
        ``_foreach_pow(scalar, ...)``, ``full_like``...) are lowered, not run op by op."""
        optimizers = {
            "SGD": lambda p: torch.optim.SGD(p, lr=0.1),
            "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
            "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
            "RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.01),
        }
        for name, make in optimizers.items():
            with self.subTest(optimizer=name):
                torch._dynamo.reset()
                model = _mlp()
                cpu_losses, cpu_params = _train(copy.deepcopy(model), "cpu", 3, optimizer=make)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    jax_losses, jax_params = _train(
                        model, "jax", 3, compile_step=True, optimizer=make
                    )
                fallbacks = [str(w.message) for w in caught if "op by op" in str(w.message)]
                self.assertEqual(fallbacks, [])
                self.assertEqual(jax_losses, cpu_losses, atol=1e-5, rtol=1e-4)
                self.assertEqual(jax_params, cpu_params, atol=1e-5, rtol=1e-4)
        torch._dynamo.reset()

    def test_foreach_lists_and_scalars_as_cpu(self):
        """A foreach operator's list arguments go element by element, a single tensor or
        scalar to every element. ``addcmul``'s tensor of scalars (one per element) is not
        lowered: it would be taken for one operand of every element."""

        def f(xs, ys, zs, w):
            a = torch._foreach_add(xs, ys, alpha=0.5)
            b = torch._foreach_mul(xs, w)  # one 0-d tensor for every element
            c = torch._foreach_addcmul(xs, ys, zs, [2.0, -1.0])
            d = torch._foreach_pow(2.0, ys)
            return a + b + c + d  # the lists, one after another

        gen = torch.Generator().manual_seed(0)
        xs, ys, zs = ([torch.randn(2, 2, generator=gen) for _ in range(2)] for _ in range(3))
        w = torch.tensor(3.0)
        expected = f(xs, ys, zs, w)
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(f, backend="per_device")(
                _to(xs, "jax"), _to(ys, "jax"), _to(zs, "jax"), w.to("jax")
            )
        torch._dynamo.reset()
        self.assertEqual([str(c.message) for c in caught if "op by op" in str(c.message)], [])
        self.assertEqual(_cpu(got), expected)
        with self.assertRaises(_compile._Unsupported):
            _compile._lowering(torch.ops.aten._foreach_addcmul.Tensor)

    def test_full_like_onto_another_device_in_a_graph_runs_op_by_op(self):
        """``full_like(x, device="cpu")`` of a jax tensor in a graph is a CPU tensor: the
        lowering refuses it, and the graph runs op by op (with the warning) as eagerly."""

        def f(x):
            return torch.full_like(x, 2.0, device="cpu") + 1, torch.full_like(x, 3.0) * x

        torch._dynamo.reset()
        x = torch.arange(4.0)
        with self.assertWarnsRegex(UserWarning, "full_like on cpu.*runs op by op"):
            on_cpu, on_jax = torch.compile(f, backend="per_device")(x.to("jax"))
        torch._dynamo.reset()
        self.assertEqual(on_cpu.device.type, "cpu")
        self.assertEqual(on_jax.device.type, "jax")
        self.assertEqual(on_cpu, torch.full((4,), 3.0))
        self.assertEqual(on_jax.cpu(), x * 3)

    def test_graph_with_an_op_without_lowering_runs_op_by_op(self):
        def f(x):
            return torch.nn.functional.dropout(x, 0.5, training=True).sum()

        torch._dynamo.reset()
        x = torch.ones(100, device="jax")
        with self.assertWarnsRegex(UserWarning, "runs op by op"):
            y = torch.compile(f, backend="per_device")(x)
        self.assertEqual(y.device.type, "jax")
        self.assertIn(y.item() % 2, (0.0,))


if __name__ == "__main__":
    run_tests()
