# Owner(s): ["module: PrivateUse1"]
"""In-place and out= overloads: the mutated tensor's payload is rebound (and resized)."""

import warnings

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference
from torch_acc.payload import payload

reference.setup()


class TestInplaceOut(TestCase):
    def test_inplace_kernels(self):
        a_cpu, b_cpu = torch.randn(3, 3), torch.randn(3, 3)
        a = a_cpu.to("ref")
        version = a._version
        same = a.add_(b_cpu.to("ref"), alpha=2)
        self.assertIs(same, a)
        self.assertGreater(a._version, version)
        a.mul_(3).sub_(1)
        self.assertEqual(a.cpu(), (a_cpu + 2 * b_cpu) * 3 - 1)

    def test_inplace_from_functional_kernel(self):
        a_cpu = torch.randn(4).abs() + 0.5
        a = a_cpu.to("ref")
        a.div_(2).exp_().log_()  # div_, exp_, log_ have no kernel: functional + copy
        self.assertEqual(a.cpu(), (a_cpu / 2).exp().log())

    def test_fill_zero_copy(self):
        a = torch.empty(2, 3, device="ref")
        a.fill_(4)
        self.assertEqual(a.cpu(), torch.full((2, 3), 4.0))
        a.zero_()
        self.assertEqual(a.cpu(), torch.zeros(2, 3))
        a.copy_(torch.arange(6.0).reshape(2, 3))
        self.assertEqual(a.cpu(), torch.arange(6.0).reshape(2, 3))
        b = torch.empty(2, 3, device="ref", dtype=torch.float64)
        b.copy_(a)  # device to device, with dtype conversion
        self.assertEqual(b.cpu(), torch.arange(6.0, dtype=torch.float64).reshape(2, 3))
        self.assertIsNot(payload(b), payload(a))

    def test_out_same_shape(self):
        a, b = torch.randn(2, 2), torch.randn(2, 2)
        out = torch.empty(2, 2, device="ref")
        r = torch.add(a.to("ref"), b.to("ref"), out=out)
        self.assertIs(r, out)
        self.assertEqual(out.cpu(), a + b)

    def test_out_resizes(self):
        a, b = torch.randn(3, 4), torch.randn(4, 5)
        out = torch.empty(0, device="ref")
        torch.mm(a.to("ref"), b.to("ref"), out=out)
        self.assertEqual(out.shape, (3, 5))
        self.assertEqual(out.stride(), (5, 1))
        self.assertEqual(out.cpu(), a @ b)

    def test_arange_out_kernel(self):
        self.assertEqual(torch.arange(2, 11, 3, device="ref").cpu(), torch.arange(2, 11, 3))

    def test_writing_to_a_broadcast_view_is_an_error(self):
        # As on CPU: in-place arithmetic into an expanded tensor raises; fill_ may write it.
        for op, args in (("add_", (2.0,)), ("mul_", (2.0,)), ("sub_", (torch.ones(3),))):
            with self.subTest(op=op):
                for device in ("cpu", "ref"):
                    x = torch.ones(3, device=device).expand(2, 3)
                    a = [t.to(device) if isinstance(t, torch.Tensor) else t for t in args]
                    with self.assertRaisesRegex(
                        RuntimeError, "more than one element of the written-to tensor"
                    ):
                        getattr(x, op)(*a)
        x = torch.ones(3, device="ref").expand(2, 3)
        x.fill_(2.0)
        self.assertEqual(x.cpu(), torch.full((2, 3), 2.0))

    def test_writing_to_an_empty_broadcast_view(self):
        # No element to share memory: CPU writes (nothing), and so does ref. (Backward
        # formulas do this with the gradients of empty inputs: mish, aminmax, group_norm.)
        for device in ("cpu", "ref"):
            with self.subTest(device=device):
                x = torch.zeros(1, 0, 3, device=device).expand(2, 0, 3)
                self.assertEqual(x.stride()[0], 0)
                x.add_(1)
                x.sub_(torch.ones(3, device=device))
                self.assertEqual(x.shape, (2, 0, 3))

    def test_inplace_through_view(self):
        base = torch.zeros(3, 4, device="ref")
        base[1].add_(torch.ones(4, device="ref"))
        base[:, 2].fill_(7)
        expected = torch.zeros(3, 4)
        expected[1] += 1
        expected[:, 2] = 7
        self.assertEqual(base.cpu(), expected)


class TestOutCasting(TestCase):
    """out= follows ATen's casting and dtype rules (issue 13)."""

    def test_out_dtype_errors(self):
        cases = {
            "add": (lambda d, out: torch.add(torch.ones(2, device=d), 0.5, out=out),
                    torch.int64, "can't be cast|can.t be cast|not safe"),
            "mm": (lambda d, out: torch.mm(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d),
                                           out=out), torch.bool, "dtype"),
        }
        for name, (fn, dtype, message) in cases.items():
            with self.subTest(name):
                for device in ("cpu", "ref"):
                    out = torch.zeros(2, 2, dtype=dtype, device=device)
                    with self.assertRaisesRegex(RuntimeError, message):
                        fn(device, out)
                    self.assertEqual(out.cpu(), torch.zeros(2, 2, dtype=dtype))

    def test_repeated_calls_check_as_cpu_each_time(self):
        """The bridge keeps a meta function's answer per description of the arguments
        (csrc/acc/Bridge.cpp: metaAnswers). The same call again gets CPU's result, dtype
        error and resize warning again (a fallback out= overload and a kernel's)."""
        x = torch.ones(4, 4, device="ref")
        half = torch.tensor(0.5)  # a CPU scalar tensor, as DDP's reducer gives mul.out
        for _ in range(3):
            out = torch.empty(4, 4, device="ref")
            torch.mul(x, half, out=out)
            self.assertEqual(out.cpu(), torch.full((4, 4), 0.5))
            torch.add(x, out, out=out)
            self.assertEqual(out.cpu(), torch.full((4, 4), 1.5))
            with self.assertRaisesRegex(RuntimeError, "can't be cast|can.t be cast|not safe"):
                torch.mul(x, half, out=torch.empty(4, 4, dtype=torch.int64, device="ref"))
            small = torch.empty(3, device="ref")
            with self.assertWarnsRegex(UserWarning, "was resized"):
                torch.mul(x, half, out=small)
            self.assertEqual(small.cpu(), torch.full((4, 4), 0.5))

    def test_out_is_resized_before_the_kernel_refuses(self):
        # CPU's structured kernels resize out= in their meta function, before the kernel
        # refuses the dtype: the out= tensor is left resized (fuzz seed 98).
        shapes = {}
        for device in ("cpu", "ref"):
            x = torch.tensor([True, False], device=device)
            out = torch.empty(5, dtype=torch.bool, device=device)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "An output ... was resized"
                with self.assertRaisesRegex(RuntimeError, "abs"):  # NotImplementedError from 2.13
                    torch.abs(x, out=out)
            shapes[device] = out.shape
        self.assertEqual(shapes["ref"], shapes["cpu"])
        self.assertEqual(shapes["ref"], torch.Size([2]))

    def test_an_out_tensor_that_is_read_too_is_not_resized(self):
        # TensorIterator refuses to resize an output that is also an input; add's meta
        # function, written in Python, does not (fuzz seeds 203, 389, 1568).
        for device in ("cpu", "ref"):
            with self.subTest(device):
                x = torch.zeros(0, dtype=torch.float64, device=device)
                y = torch.zeros(0, 1, dtype=torch.float16, device=device)
                with self.assertRaisesRegex(
                    RuntimeError, r"output with shape \[0, 1\] doesn't match the broadcast "
                    r"shape \[0, 0\]"
                ):
                    torch.add(x, y, out=y)
                z = torch.ones(2, 1, device=device)
                with self.assertRaisesRegex(
                    RuntimeError, r"output with shape \[2, 1\]"
                ), warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # "... was resized"
                    torch.mul(torch.ones(3, 1, 1, device=device), z, out=z)
                self.assertEqual(z.shape, (2, 1))

    def test_a_resized_out_tensor_is_laid_out_as_cpu_lays_it_out(self):
        # TensorIterator gives a resized output the inputs' layout (fuzz seed 1178).
        x = torch.arange(6.0).reshape(2, 3)
        for name, fn in {
            "transposed": lambda d: torch.add(x.t().to(d), 1, out=torch.empty(0, device=d)),
            "channels last": lambda d: torch.neg(
                x.reshape(1, 2, 3, 1).to(d, memory_format=torch.channels_last),
                out=torch.empty(0, device=d),
            ),
            "into a tensor of another shape": lambda d: torch.mul(
                x.t().to(d), x.t().to(d), out=torch.empty(4, 2, device=d)
            ),
            "contiguous": lambda d: torch.mm(
                x.t().to(d), x.to(d), out=torch.empty(0, device=d)
            ),
        }.items():
            with self.subTest(name), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "An output ... was resized"
                expected, got = fn("cpu"), fn("ref")
                self.assertEqual(got.stride(), expected.stride())
                self.assertEqual(got.cpu(), expected)

    def test_reductions_compute_in_the_out_dtype(self):
        x = torch.tensor([1.5, 1.5, 1.25], dtype=torch.float64)
        for name, fn in {
            "sum": lambda t, out: torch.sum(t, 0, out=out),
            "prod": lambda t, out: torch.prod(t, 0, out=out),
            "cumsum": lambda t, out: torch.cumsum(t, 0, out=out),
        }.items():
            with self.subTest(name):
                out_cpu = torch.zeros((), dtype=torch.int64)
                out_dev = torch.zeros((), dtype=torch.int64, device="ref")
                if name == "cumsum":
                    out_cpu, out_dev = out_cpu.reshape(1).expand(3).clone(), out_dev.new_zeros(3)
                expected = fn(x, out_cpu)
                got = fn(x.to("ref"), out_dev)
                self.assertEqual(got.cpu(), expected)


if __name__ == "__main__":
    run_tests()
