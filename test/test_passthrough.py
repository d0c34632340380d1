# Owner(s): ["module: PrivateUse1"]
"""The passthrough backend ``ref`` (``torch_acc.backends.reference``): every operator runs
CPU's kernel on CPU payloads, so any difference from CPU is the framework's (issue 18, item 5).
Random programs, a training step and random operators give CPU's answers exactly."""

import subprocess
import sys

import torch
from torch.testing._internal.common_utils import run_tests, TestCase
from torch.utils._python_dispatch import TorchDispatchMode

from torch_acc import demo
from torch_acc.backends import reference
from torch_acc.testing import fuzz

reference.setup()

#: Fuzzer seeds whose programs run on ``ref`` and on CPU in lock step.
CAMPAIGN_SEEDS = range(150)


class TestPassthroughOps(TestCase):
    def test_which_operators_pass_through(self):
        def registered(name):
            return torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")

        # Functional overloads with a CPU kernel pass through, and out= ones whose functional
        # overload has none (arange's is composite); other out= overloads, views and resize_
        # stay the framework's, and composite operators that would read a storage pass
        # through.
        for name in ("aten::mm", "aten::add.Tensor", "aten::add_.Tensor",
                     "aten::arange.start_out", "aten::slice_scatter", "aten::convolution"):
            self.assertTrue(registered(name), name)
        self.assertFalse(registered("aten::add.out"))
        self.assertFalse(registered("aten::_to_copy"))
        self.assertTrue(set(reference.passthrough_ops()) <= {
            n.removeprefix("aten::") for n in torch._C._dispatch_get_all_op_names()
            if registered(n)
        })
        self.assertEqual(torch.arange(1, 7, 2, device="ref").cpu(), torch.arange(1, 7, 2))
        x = torch.arange(6.0, device="ref").view(2, 3)
        self.assertEqual(torch.slice_scatter(x, torch.zeros(2, 1, device="ref"), 1, 0, 1).cpu(),
                         torch.slice_scatter(x.cpu(), torch.zeros(2, 1), 1, 0, 1))

    def test_out_resized_by_cpus_kernel_keeps_cpus_layout(self):
        # Also the regression test of a use after free on torch 2.6 (found under
        # AddressSanitizer): boxed, linalg_lstsq.out's CPU kernel dropped its out= stand-ins
        # before pushing the references it returned (redispatchOnStandIns, Bridge.cpp).
        a, b = torch.randn(4, 3), torch.randn(4, 3)
        got = torch.linalg.lstsq(a.to("ref"), b.to("ref"))
        want = torch.linalg.lstsq(a, b)
        self.assertEqual(got.solution.cpu(), want.solution)
        self.assertEqual(got.solution.stride(), want.solution.stride())

    def test_cpu_scalars_promote_as_on_cpu(self):
        i = torch.tensor([3, -7], dtype=torch.int32)
        for other in (torch.tensor(2.5), 2, torch.tensor(True)):
            with self.subTest(other=other):
                self.assertEqual(torch.remainder(i.to("ref"), other).cpu(),
                                 torch.remainder(i, other), exact_dtype=True)
                self.assertEqual(torch.copysign(i.to("ref"), other).cpu(),
                                 torch.copysign(i, other), exact_dtype=True)

    def test_element_size_views(self):
        c = torch.tensor([1 + 2j, 3 - 1j, 5j])
        r = c.to("ref")
        self.assertEqual(torch.view_as_real(r[1:]).cpu(), torch.view_as_real(c[1:]))
        self.assertEqual(torch.view_as_real(r[1:]).storage_offset(), 2)
        torch.view_as_real(r)[0, 0] = 9  # a view: writes through
        self.assertEqual(r[0].item(), 9 + 2j)
        f = torch.arange(8.0)
        self.assertEqual(torch.view_as_complex(f.to("ref").view(4, 2)[1:]).cpu(),
                         torch.view_as_complex(f.view(4, 2)[1:]))

    def test_dispatch_modes_see_each_operator_once(self):
        seen = []

        class Record(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                seen.append(func)
                return func(*args, **(kwargs or {}))

        x = torch.ones(3, device="ref")
        with Record():
            torch.mul(x, 2)
        self.assertEqual(seen, [torch.ops.aten.mul.Tensor])


_CPU_PASSTHROUGH = """
import torch
import torch_acc
from torch_acc import library, PrivateUse1Hooks
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import reference


class Hooks(PrivateUse1Hooks):
    def get_new_generator(self, device_index):
        return reference.CpuGenerator()


setup_privateuseone_for_python_backend("cpt", hook=Hooks())
library.impl_payload(**reference.PAYLOAD_FUNCTIONS)
calls = []


def recording(name):
    kernel = reference.passthrough_kernel(name)

    def record(*args, **kwargs):
        calls.append(name)
        return kernel(*args, **kwargs)

    return record


for name in ("empty_strided", "empty.memory_format", "add.Tensor", "add_.Tensor",
             "bernoulli.p"):
    library.impl(name, recording(name), cpu_passthrough=True)
library.impl("mul.Tensor", lambda a, b: a * b, cpu_passthrough=True)
a = torch.arange(6.0).reshape(2, 3)
x = a.to("cpt")
print((x + x[:1]).cpu().equal(a + a[:1]), torch.add(x, 2).cpu().equal(a + 2))
x.add_(x)
print(x.cpu().equal(2 * a))
torch.manual_seed(0)
print(torch.bernoulli(x, 0.5).shape)
print(calls)
n = torch_acc.wrap(a.numpy(), device="cpt")
try:
    n * x
except RuntimeError as e:
    print(e)
"""


class TestCpuPassthroughKernels(TestCase):
    def test_the_bridge_runs_cpus_kernel_itself(self):
        # Kernels registered with cpu_passthrough are not called: the bridge runs CPU's
        # kernel on the payloads, in place and with a CPU scalar too. An operator that takes a
        # generator calls its kernel; a payload that is not a CPU tensor is an error naming
        # the operator.
        proc = subprocess.run(
            [sys.executable, "-c", _CPU_PASSTHROUGH], capture_output=True, text=True
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertEqual(lines[:4], ["True True", "True", "torch.Size([2, 3])", "['bernoulli.p']"])
        self.assertIn(
            "the cpt kernel for aten::mul.Tensor (<lambda>) runs CPU's kernel on payloads that "
            "are CPU tensors, but got numpy.ndarray for argument 'self'",
            lines[4],
        )


class TestPassthroughAgreesWithCpu(TestCase):
    def test_random_programs(self):
        findings = []
        for seed in CAMPAIGN_SEEDS:
            program = fuzz.generate(seed)
            finding = fuzz.check(program, "ref", seed)
            if finding is not None:
                findings.append(f"seed {seed}: {finding}")
        self.assertEqual(findings, [])

    def test_random_operators_draw_cpus_numbers(self):
        for draw in (
            lambda d: torch.randn(5, device=d),
            lambda d: torch.rand(2, 3, device=d, dtype=torch.float64),
            lambda d: torch.randint(0, 10, (6,), device=d),
            lambda d: torch.empty(4, device=d).normal_(2.0, 3.0),
            lambda d: torch.nn.functional.dropout(torch.ones(8, device=d), 0.5),
        ):
            torch.manual_seed(7)
            got = draw("ref").cpu()
            torch.manual_seed(7)
            self.assertEqual(got, draw("cpu"), atol=0, rtol=0)

    def test_training_steps_are_cpus_bit_for_bit(self):
        gen = torch.Generator().manual_seed(0)
        x, y = demo.make_blobs(gen, 32, 16, 4)
        losses = {}
        for dev in ("cpu", "ref"):
            torch.manual_seed(0)
            model = demo.mlp(16, 64, 4).to(dev)
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            xs, ys = x.to(dev), y.to(dev)
            losses[dev] = []
            for _ in range(5):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xs), ys)
                loss.backward()
                opt.step()
                losses[dev].append(loss.item())
        self.assertEqual(losses["ref"], losses["cpu"], atol=0, rtol=0)

    def test_attention_takes_cpus_path(self):
        # scaled_dot_product_attention chooses its kernel through a DispatchStub, not the
        # dispatcher: ref's kernel of aten::_fused_sdp_choice (CPU's, on the payloads) makes
        # the choice, so ref runs CPU's flash-attention kernel, gradients laid out as CPU's.
        gen = torch.Generator().manual_seed(0)
        qkv = [torch.randn(4, 4, 3, 8, generator=gen) for _ in range(3)]
        mask = torch.randn(3, 3, generator=gen)
        # A mask that requires grad takes the math path on CPU (flash has no gradient for
        # it), which ref's kernel, seeing payloads without autograd state, cannot tell.
        for case in ("plain", "causal", "mask", "mask requiring grad"):
            results = {}
            for dev in ("cpu", "ref"):
                inputs = [t.detach().to(dev).requires_grad_() for t in qkv]
                kwargs = {"is_causal": case == "causal"}
                if case.startswith("mask"):
                    inputs.append(mask.detach().to(dev).requires_grad_(case != "mask"))
                    kwargs["attn_mask"] = inputs[-1]
                out = torch.nn.functional.scaled_dot_product_attention(*inputs[:3], **kwargs)
                out.square().sum().backward()
                results[dev] = (type(out.grad_fn).__name__, out, [t.grad for t in inputs])
            with self.subTest(case):
                self.assertEqual(results["ref"][0], results["cpu"][0])
                self.assertEqual(results["ref"][1], results["cpu"][1], atol=0, rtol=0)
                for got, want in zip(results["ref"][2], results["cpu"][2], strict=True):
                    if want is None:
                        self.assertIsNone(got)
                        continue
                    self.assertEqual(got.stride(), want.stride())
                    self.assertEqual(got, want, atol=0, rtol=0)


if __name__ == "__main__":
    run_tests()
