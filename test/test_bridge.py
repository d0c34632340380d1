# Owner(s): ["module: PrivateUse1"]
"""The kernel bridge: payload kernels, argument conversion, results, tensor-level kernels."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import library
from torch_acc.backends import reference
from torch_acc.payload import payload, wrap

reference.setup()

SEEN = []


@library.impl("aten::addcmul")
def _addcmul(self, tensor1, tensor2, *, value=1):
    SEEN.append((type(self), type(tensor1), value))
    return self + value * tensor1 * tensor2


@torch.library.impl("aten::frac", "privateuseone")
def _frac(t):
    # A tensor-level kernel (the seed PR's style) beside payload kernels.
    return wrap(torch.frac(payload(t)))


class TestBridge(TestCase):
    def setUp(self):
        SEEN.clear()

    def test_kernels_get_payloads_and_python_values(self):
        a, b, c = (torch.randn(3) for _ in range(3))
        out = torch.addcmul(a.to("ref"), b.to("ref"), c.to("ref"), value=0.5)
        self.assertEqual(SEEN, [(torch.Tensor, torch.Tensor, 0.5)])
        self.assertIs(type(out), torch.Tensor)
        self.assertEqual(out.cpu(), torch.addcmul(a, b, c, value=0.5))

    def test_cpu_scalars_become_python_numbers(self):
        t = torch.ones(2, device="ref")
        self.assertEqual((t * 3).cpu(), torch.full((2,), 3.0))
        self.assertEqual((t + torch.tensor(2.5)).cpu(), torch.full((2,), 3.5))

    def test_cpu_zero_dim_tensors_keep_their_dtype(self):
        # A 0-dim tensor takes part in type promotion with its dtype; a Python number does not.
        ints = torch.ones(2, dtype=torch.int32)
        for other in (torch.tensor(2.5, dtype=torch.float64), 2.5, torch.tensor(3)):
            with self.subTest(other=other):
                expected = ints + other
                out = ints.to("ref") + other
                self.assertEqual(out.dtype, expected.dtype)
                self.assertEqual(out.cpu(), expected)

    def test_promotion_follows_the_default_dtype(self):
        # An integer tensor and a Python float give the default dtype, read on every call.
        ints = torch.arange(3, dtype=torch.int32)
        before = torch.get_default_dtype()
        try:
            for default in (torch.float32, torch.float64, torch.float32):
                torch.set_default_dtype(default)
                with self.subTest(default=default):
                    self.assertEqual((ints.to("ref") * 1.5).dtype, default)
                    self.assertEqual((ints.to("ref") * 1.5).cpu(), ints * 1.5)
        finally:
            torch.set_default_dtype(before)

    def test_undefined_results(self):
        # A kernel returns None for an output that output_mask leaves out: an undefined tensor.
        x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
        gy = torch.randn(1, 3, 3, 3)
        args = ([0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, False, False])
        gx, gw, gb = torch.ops.aten.convolution_backward(
            gy.to("ref"), x.to("ref"), w.to("ref"), *args
        )
        self.assertIsNone(gw)
        self.assertIsNone(gb)
        expected = torch.ops.aten.convolution_backward(gy, x, w, *args)[0]
        self.assertEqual(gx.cpu(), expected, atol=1e-5, rtol=1e-5)

    def test_results_keep_device_index_and_dtype(self):
        t = torch.arange(4, device="ref")
        self.assertEqual(t.dtype, torch.int64)
        r = t * 2
        self.assertEqual((r.dtype, r.device), (torch.int64, torch.device("ref:0")))
        self.assertEqual((t / 2).dtype, torch.float32)
        self.assertEqual((t + 1.5).dtype, torch.float32)
        # A 0-dim float64 operand does not promote a float32 tensor, as on CPU.
        ones = torch.ones(2, dtype=torch.float32, device="ref")
        self.assertEqual((ones + torch.tensor(1.0, dtype=torch.float64)).dtype, torch.float32)

    def test_factory_kernels(self):
        e = torch.empty(2, 3, device="ref", dtype=torch.float64)
        self.assertEqual((e.shape, e.dtype), ((2, 3), torch.float64))
        z = torch.zeros(2, 2, device="ref")
        self.assertEqual(z.cpu(), torch.zeros(2, 2))
        f = torch.full((3,), 7, device="ref")
        self.assertEqual(f.cpu(), torch.full((3,), 7))
        s = torch.empty_strided((2, 3), (1, 2), device="ref")
        self.assertEqual(s.stride(), (1, 2))

    def test_tensor_level_kernels_side_by_side(self):
        t = torch.tensor([1.25, -2.5], device="ref")
        self.assertEqual(torch.frac(t).cpu(), torch.tensor([0.25, -0.5]))

    def test_autograd_through_payload_kernels(self):
        a_cpu = torch.randn(3, 3)
        a = a_cpu.to("ref").requires_grad_()
        (a.exp() * a).relu().sum().backward()
        ac = a_cpu.clone().requires_grad_()
        (ac.exp() * ac).relu().sum().backward()
        self.assertEqual(a.grad.cpu(), ac.grad)

    def test_item_and_printing(self):
        t = torch.tensor([[1.0, 2.0], [3.0, 4.5]], device="ref")
        self.assertEqual(t.sum().item(), 10.5)
        self.assertExpectedInline(
            repr(t),
            """\
tensor([[1.0000, 2.0000],
        [3.0000, 4.5000]], device='ref:0')""",
        )

    def test_registering_unknown_operator(self):
        with self.assertRaisesRegex(ValueError, "expected the name of an aten operator overload"):
            library.impl("aten::no_such_op", lambda x: x)



def _convention(op: torch._ops.OpOverload) -> str:
    """How the PrivateUse1 kernel of an operator overload is registered: "boxed unboxed" or
    "boxed" (torch's dispatcher table dump)."""
    for line in torch._C._dispatch_dump(op._name).splitlines():
        if line.startswith("PrivateUse1:"):
            return line[line.rindex("[") + 1 : line.rindex("]")].strip()
    raise AssertionError(f"no PrivateUse1 kernel for {op}")


class TestCallingConventions(TestCase):
    """Kernels of functional operators with a common signature take the unboxed calling
    convention (no tensor copied onto a stack); boxed callers reach them through torch's
    unboxing wrapper. Both paths give the CPU result."""

    def _check(self, convention, op, fn, *args, **kwargs):
        """``fn``, a Python function of torch that calls ``op`` from C++, and ``op`` itself
        (an OpOverload: a boxed call), on ref copies of ``args``' tensors, against ``fn`` on
        CPU."""
        self.assertEqual(_convention(op), convention)

        def on(device, f):
            moved = [a.to(device, copy=True) if isinstance(a, torch.Tensor) else a for a in args]
            out = f(*moved, **kwargs)
            return (out[0] if isinstance(out, tuple) else out).cpu()

        expected = on("cpu", fn)
        self.assertEqual(on("ref", fn), expected)
        self.assertEqual(on("ref", op), expected)

    def test_unboxed_signatures(self):
        x, y, z = torch.randn(3, 4), torch.randn(3, 4), torch.randn(4, 5)
        aten = torch.ops.aten
        cases = [
            (aten.relu.default, torch.relu, x),
            (aten.mm.default, torch.mm, x, z),
            (aten.pow.Tensor_Scalar, torch.pow, x.abs(), 1.5),
            (aten.add.Tensor, torch.add, x, y, {"alpha": 2}),
            (aten.threshold.default, torch.threshold, x, 0.1, 20.0),
            (aten.where.self, torch.where, x > 0, x, y),
            (aten.addmm.default, torch.addmm, torch.randn(3, 5), x, z,
             {"beta": 0.5, "alpha": 2}),
            (aten._log_softmax.default, torch._log_softmax, x, 1, False),
            (aten._log_softmax_backward_data.default, torch._log_softmax_backward_data,
             y, x, 1, torch.float32),
            (aten.prod.default, torch.prod, x, {"dtype": torch.float64}),
            (aten.sum.dim_IntList, torch.sum, x, [0], True),
        ]
        for op, fn, *args in cases:
            kwargs = args.pop() if isinstance(args[-1], dict) else {}
            with self.subTest(op=str(op)):
                self._check("boxed unboxed", op, fn, *args, **kwargs)

    def test_other_signatures_stay_boxed(self):
        x = torch.randn(3, 4)
        aten = torch.ops.aten
        cases = [
            # SymInt? is not ScalarType? (both are ints to a schema's type()).
            (aten.repeat_interleave.Tensor, torch.repeat_interleave, torch.tensor([1, 2, 0, 3])),
            # SymInt[]: its C++ type is not int[]'s.
            (aten.roll.default, torch.roll, x, [1], [0]),
            # Aliasing: an in-place overload.
            (aten.add_.Tensor, torch.Tensor.add_, x, x),
            # Two results.
            (aten.max.dim, torch.max, x, 1),
        ]
        for op, fn, *args in cases:
            with self.subTest(op=str(op)):
                self._check("boxed", op, fn, *args)

    def test_unboxed_argument_errors(self):
        # The unboxed path checks devices as the boxed one does.
        with self.assertRaisesRegex(RuntimeError, "Expected all tensors to be on the same"):
            torch.mm(torch.randn(2, 2, device="ref"), torch.randn(2, 2))

class TestFrameworkCorrectness(TestCase):
    """Issue 13: conj/neg bits, Scalar in-place overloads, CPU index tensors."""

    def test_conjugate_and_negative_views_in_conj_aware_operators(self):
        a = torch.tensor([[1 + 2j, 2 - 1j], [0.5j, 3]], dtype=torch.complex64)
        b = torch.tensor([[3 + 1j, 1j], [2, 1 - 1j]], dtype=torch.complex64)
        cases = {
            "mm": lambda x, y: x.conj() @ y,
            "mm_rhs": lambda x, y: x @ y.conj(),
            "neg": lambda x, y: torch._neg_view(x) @ y,
            "bmm": lambda x, y: torch.bmm(x.conj()[None], y[None]),
            "addmm": lambda x, y: torch.addmm(y, x.conj(), y.conj()),
            "dot": lambda x, y: torch.dot(x[0].conj(), y[0]),
            "vdot": lambda x, y: torch.vdot(x[0], y[0].conj()),
            "matmul": lambda x, y: torch.matmul(x.conj(), y),
            "conj_physical": lambda x, y: torch.conj_physical(x.conj()),
            "mm_out_conj": lambda x, y: torch.mm(x, y, out=torch.zeros_like(x).conj()),
        }
        for name, fn in cases.items():
            with self.subTest(name):
                expected = fn(a, b)
                got = fn(a.to("ref"), b.to("ref"))
                self.assertEqual(got.cpu().resolve_conj(), expected.resolve_conj())

    def test_scalar_inplace_overloads_through_the_fallback(self):
        for name, fn in {
            "remainder_": lambda t: t.float().remainder_(2.0),
            "bitwise_and_": lambda t: t.bitwise_and_(3),
            "fmod_": lambda t: t.float().fmod_(1.5),
        }.items():
            with self.subTest(name):
                x = torch.arange(6)
                self.assertEqual(fn(x.to("ref")).cpu(), fn(x.clone()))

    def test_cpu_index_tensors(self):
        x = torch.arange(10.0).reshape(5, 2)
        i = torch.tensor([0, 2, 4])
        self.assertEqual(x.to("ref")[i].cpu(), x[i])
        j = torch.tensor([1, 0, 1])
        self.assertEqual(x.to("ref")[i, j].cpu(), x[i, j])
        y, yd = x.clone(), x.to("ref")
        y[i] = 0.0
        yd[i] = 0.0
        self.assertEqual(yd.cpu(), y)
        yd.index_put_((i,), torch.ones(2, device="ref"), accumulate=True)
        y.index_put_((i,), torch.ones(2), accumulate=True)
        self.assertEqual(yd.cpu(), y)


    def test_operator_without_an_autograd_kernel_under_autograd(self):
        # As on CPU: an operator with no autograd kernel of its own runs on inputs that
        # require grad through torch's autograd fallback, which warns in backward (torch 2.6
        # registers none for PrivateUse1: "Could not run ... from the 'Autogradnpy' backend").
        lib = torch.library.Library("acc_test_bridge", "DEF")
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
        for device in ("cpu", "ref"):
            with self.subTest(device):
                x = torch.ones(3, device=device, requires_grad=True)
                y = torch.ops.acc_test_bridge.twice(x)
                self.assertEqual(y.cpu(), torch.full((3,), 2.0))
                with self.assertWarnsRegex(UserWarning, "autograd kernel was not registered"):
                    y.sum().backward()
                self.assertEqual(x.grad.cpu(), torch.full((3,), 2.0))

if __name__ == "__main__":
    run_tests()
