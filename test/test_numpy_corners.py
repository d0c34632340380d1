# Owner(s): ["module: PrivateUse1"]
"""The NumPy reference backend gives CPU's answer in the corners (issue 14, items 1-8): type
promotion of comparisons, results that never alias their inputs, invalid in-place requests
refused, edge values, memory formats, and checkpointing with dropout."""

import itertools
import math
import unittest
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import run_tests, TestCase
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import checkpoint

from torch_acc import _compat
from torch_acc.backends import numpy as npy_backend
from torch_acc.payload import payload

npy_backend.setup()

INF, NAN = float("inf"), float("nan")


def _outcome(f, device):
    """(result on the CPU, or the exception's type) of ``f(device)``."""
    try:
        result = f(device)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e)
    if isinstance(result, torch.Tensor):
        return result.cpu()
    return tuple(r.cpu() if isinstance(r, torch.Tensor) else r for r in result)


@unittest.skipIf(
    _compat.TORCH_VERSION < (2, 13),
    "the npy backend gives torch 2.13's CPU answers in these corners; torch 2.6's CPU raises "
    "other error types (NotImplementedError for RuntimeError) and lacks overflow checks",
)
class CornersTestCase(TestCase):
    def assertSameAsCpu(self, f, *, strides=False):
        """``f(device)`` gives on npy what it gives on the CPU: values, dtype (and strides
        where asked), or an exception of the same type."""
        cpu, npy = _outcome(f, "cpu"), _outcome(f, "npy")
        if isinstance(cpu, type):
            self.assertIs(npy, cpu)
            return
        self.assertNotIsInstance(npy, type, msg=f"npy raised {npy}, the CPU gave {cpu}")
        self.assertEqual(npy, cpu, exact_dtype=True, equal_nan=True, atol=0, rtol=0)
        if strides:
            self.assertEqual(f("npy").stride(), f("cpu").stride())


class TestArithmeticOutKernels(TestCase):
    """``add``/``sub``/``mul``/``div`` with ``out=`` (kernels that write into the out
    tensor's payload; DDP's reducer fills its buckets with ``mul.out``) give CPU's values,
    dtypes, strides and warnings, and refuse what CPU refuses."""

    def _into_view(self, d):
        bucket = torch.zeros(8, device=d)
        torch.mul(torch.arange(4.0, device=d), 0.5, out=bucket[2:6])
        return bucket

    def _into_transpose(self, d):
        out = torch.zeros(2, 3, device=d).t()
        torch.sub(torch.ones(3, 2, device=d), torch.arange(2.0, device=d), alpha=2, out=out)
        return out

    def test_as_cpu(self):
        def empty(d, *shape, dtype=torch.float32):
            return torch.empty(*shape, dtype=dtype, device=d)

        cases = {
            "into a view": self._into_view,
            "into a transpose": self._into_transpose,
            "float64 out": lambda d: torch.mul(
                torch.arange(4.0, device=d), torch.full((4,), 3.0, device=d),
                out=empty(d, 4, dtype=torch.float64)),
            "float out of int64": lambda d: torch.div(
                torch.arange(4, device=d), 2, out=empty(d, 4)),
            "int64 out of float": lambda d: torch.mul(
                torch.arange(4.0, device=d), 2, out=empty(d, 4, dtype=torch.int64)),
            "true division into int64": lambda d: torch.div(
                torch.arange(4, device=d), 2, out=empty(d, 4, dtype=torch.int64)),
            "resized from empty": lambda d: torch.sub(
                torch.ones(2, 3, device=d), torch.ones(3, device=d), alpha=2, out=empty(d, 0)),
            "out is an input": lambda d: (lambda a: torch.div(a, 2, out=a))(
                torch.arange(4.0, device=d)),
            "bool": lambda d: torch.mul(
                torch.tensor([True, False], device=d), True, out=empty(d, 2, dtype=torch.bool)),
            "complex128 out": lambda d: torch.mul(
                torch.ones(2, dtype=torch.complex64, device=d), 1j,
                out=empty(d, 2, dtype=torch.complex128)),
            "float16 with alpha into float32": lambda d: torch.add(
                torch.ones(2, dtype=torch.half, device=d),
                torch.ones(2, dtype=torch.half, device=d), alpha=0.5, out=empty(d, 2)),
            "out overlaps an input": lambda d: (lambda a: torch.mul(a[:3], 2, out=a[1:]))(
                torch.arange(4.0, device=d)),
            "expanded out": lambda d: torch.mul(
                torch.ones(3, device=d), 2, out=torch.zeros(1, device=d).expand(3)),
        }
        for name, f in cases.items():
            with self.subTest(name):
                cpu, npy = _outcome(f, "cpu"), _outcome(f, "npy")
                if isinstance(cpu, type):
                    self.assertIs(npy, cpu)
                    continue
                self.assertNotIsInstance(npy, type, msg=f"npy raised {npy}, the CPU gave {cpu}")
                self.assertEqual(npy, cpu, exact_dtype=True, atol=0, rtol=0)
                self.assertEqual(npy.stride(), cpu.stride())

    def test_resizing_a_nonempty_out_warns_as_cpu(self):
        for d in ("cpu", "npy"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = torch.add(torch.ones(2, 3, device=d), 1, out=torch.empty(5, device=d))
            self.assertEqual(out.cpu(), torch.full((2, 3), 2.0))
            self.assertEqual(len(caught), 1, d)
            self.assertIn("An output with one or more elements was resized", str(caught[0].message))


class TestPromotion(CornersTestCase):
    """Item 1: operands are promoted as torch.result_type says, and rounded to that dtype
    before they compare (a Python scalar and a 0-dim tensor do not raise the category)."""

    def test_issue_reproducers(self):
        self.assertSameAsCpu(lambda d: torch.tensor([0.1], dtype=torch.float16, device=d) == 0.1)
        for op in (torch.eq, torch.ne, torch.gt):
            self.assertSameAsCpu(lambda d, op=op: op(
                torch.tensor([0.1, 0.3], dtype=torch.bfloat16, device=d),
                torch.tensor(0.1, dtype=torch.float64, device=d)))

    def test_binary_ops_against_scalars_and_0dim(self):
        ops = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge, torch.maximum,
               torch.minimum, torch.fmax, torch.fmin, torch.logical_and, torch.logical_or,
               torch.logical_xor, torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor,
               lambda a, b: torch.where(a > 0, a, b), lambda a, b: torch.where(a > 0, b, a)]
        dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.uint8,
                  torch.bool]
        values = [0.1, 0.3, 1e-9, 1.0, -3.0, 300.0, 65519.0, 1 / 3]
        others = [0.1, 1e-9, 65519.0, 300, -3, True,
                  lambda d: torch.tensor(0.1, dtype=torch.float64, device=d),
                  lambda d: torch.tensor(1 / 3, dtype=torch.float64, device=d),
                  lambda d: torch.tensor(300, device=d),
                  lambda d: torch.tensor([0.1, 1e-9], dtype=torch.float32, device=d)[:, None]]
        for op, dtype, other in itertools.product(ops, dtypes, others):
            def f(d, op=op, dtype=dtype, other=other):
                a = torch.tensor(values, device=d).to(dtype)
                b = other(d) if callable(other) else other
                if not isinstance(b, torch.Tensor) and op in (torch.maximum, torch.minimum,
                                                              torch.fmax, torch.fmin):
                    b = torch.tensor(b, device=d)
                return op(a, b)
            with self.subTest(op=op, dtype=dtype, other=other):
                self.assertSameAsCpu(f)


class TestNoAliasing(CornersTestCase):
    """Item 2: a result that is not a view never shares memory with an input, and is
    writeable."""

    def test_issue_reproducers(self):
        def flip(d):
            x = torch.tensor(1.0, device=d)
            x.flip(()).add_(1)
            return x

        def max_dim(d):
            x = torch.tensor(1.0, device=d)
            x.max(0).values.add_(1)
            return x

        def addmm(d):
            c = torch.tensor([1.0, 2.0], device=d).expand(2, 2)
            a = torch.ones(2, 2, device=d)
            return torch.addmm(c, a, a, beta=0).zero_()

        for f in (flip, max_dim, addmm):
            self.assertSameAsCpu(f)
        x = torch.arange(6.0, device="npy").view(2, 3)
        y = x.flip(())
        self.assertFalse(np.shares_memory(payload(x), payload(y)))

    def test_opinfo_results_are_fresh(self):
        # unsafe_split/unsafe_chunk share memory on the CPU too (that is what unsafe means).
        skip = {"unsafe_split", "unsafe_chunk"}
        problems = set()
        for op in op_db:
            if op.name in skip:
                continue
            for dtype in (torch.float32, torch.int64):
                if dtype not in op.supported_dtypes("cpu"):
                    continue
                try:
                    samples = list(itertools.islice(op.sample_inputs("cpu", dtype), 3))
                except Exception:  # noqa: BLE001 - entries whose samples need more than a CPU
                    continue
                for s in samples:
                    try:
                        with torch.no_grad(), warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            s = s.transform(
                                lambda t: t.to("npy") if isinstance(t, torch.Tensor) else t)
                            result = op(s.input, *s.args, **s.kwargs)
                    except Exception:  # noqa: BLE001 - failures are the OpInfo test's subject
                        continue
                    inputs = [t for t in tree_flatten((s.input, s.args, s.kwargs))[0]
                              if isinstance(t, torch.Tensor) and t.device.type == "npy"
                              and t.numel()]
                    for out in tree_flatten(result)[0]:
                        if (not isinstance(out, torch.Tensor) or out.device.type != "npy"
                                or out._is_view() or not out.numel()
                                or any(out is t for t in inputs)):
                            continue
                        p = payload(out)
                        if not p.flags.writeable:
                            problems.add(f"{op.name} ({dtype}): read-only result")
                        if any(np.shares_memory(p, payload(t)) for t in inputs):
                            problems.add(f"{op.name} ({dtype}): result shares an input's memory")
        if problems:
            self.fail("\n".join(sorted(problems)))


    def test_0dim_results_are_writeable_arrays(self):
        # A 0-d result must be an array (NumPy's ufuncs give scalars): written to and through
        # a view of it, the tensor changes.
        problems = set()
        for op in op_db:
            for shapes in ([()], [(), ()], [(), (), ()]):
                try:
                    with torch.no_grad(), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        result = op(*[torch.rand(s, device="npy") + 0.5 for s in shapes])
                except Exception:  # noqa: BLE001 - ops that take other arguments
                    continue
                for out in tree_flatten(result)[0]:
                    if (isinstance(out, torch.Tensor) and out.device.type == "npy"
                            and not out._is_view()):
                        p = payload(out)
                        if type(p) is not np.ndarray or not p.flags.writeable:
                            problems.add(f"{op.name}: {type(p).__name__}")
        if problems:
            self.fail("\n".join(sorted(problems)))
        x = torch.tensor(1.0, device="npy")
        y = x + x
        y.unsqueeze(0).add_(5)
        self.assertEqual(y.cpu(), torch.tensor(7.0))
        self.assertEqual((x * x).zero_().cpu(), torch.tensor(0.0))


class TestInvalidRequests(CornersTestCase):
    """Item 3: what the CPU refuses, npy refuses with the same type of error."""

    def test_inplace_broadcast_larger_than_self(self):
        for op in ("add_", "mul_", "div_", "sub_"):
            self.assertSameAsCpu(lambda d, op=op: getattr(torch.tensor(1.0, device=d), op)(
                torch.ones(1, device=d)))
        self.assertSameAsCpu(lambda d: torch.tensor(1.0, device=d).lerp_(
            torch.ones(1, device=d), 0.5))
        self.assertSameAsCpu(lambda d: torch.tensor(1, device=d).add_(torch.ones(2, 1, device=d,
                                                                              dtype=torch.long)))
        for op in ("logical_and_", "logical_or_", "floor_divide_", "copy_"):
            self.assertSameAsCpu(lambda d, op=op: getattr(torch.tensor(1.0, device=d), op)(
                torch.ones(2, device=d)))
        self.assertSameAsCpu(lambda d: torch.tensor(1.0, device=d).masked_fill_(
            torch.tensor([True, False], device=d), 1.0))
        self.assertSameAsCpu(lambda d: torch.tensor([1.0, 0.0], device=d).logical_or_(
            torch.tensor([0.0, 0.0], device=d)))

    def test_write_into_expanded(self):
        def expanded(d):
            return torch.tensor([1.0, 2.0, 3.0], device=d).expand(2, 3)

        cases = [
            lambda d: expanded(d).copy_(torch.ones(2, 3, device=d)),
            lambda d: expanded(d).fill_(torch.tensor(2.0, device=d)),
            lambda d: expanded(d).abs_(),
            lambda d: expanded(d).relu_(),
            lambda d: expanded(d).add_(1),
            lambda d: expanded(d).put_(torch.tensor([0], device=d),
                                       torch.tensor([5.0], device=d)),
            lambda d: expanded(d).masked_scatter_(
                torch.tensor([True, False, True], device=d), torch.ones(6, device=d)),
            lambda d: expanded(d).uniform_(),
            lambda d: expanded(d).normal_(),
            lambda d: expanded(d).bernoulli_(0.5),
            lambda d: expanded(d).random_(),
            lambda d: expanded(d).exponential_(),
            lambda d: expanded(d).geometric_(0.5),
            lambda d: expanded(d).cauchy_(),
            lambda d: expanded(d).log_normal_(),
        ]
        for f in cases:
            with self.assertRaisesRegex(RuntimeError, "more than one element of the written"):
                f("cpu")
            with self.assertRaisesRegex(RuntimeError, "more than one element of the written"):
                f("npy")

    def test_index_fill_into_expanded_writes_once(self):
        # The CPU only warns here, and writes each shared element once.
        def f(d):
            x = torch.tensor([1.0, 2.0, 3.0], device=d)
            x.expand(2, 3).index_fill_(1, torch.tensor([0], device=d), 5.0)
            x.expand(2, 3).index_fill_(0, torch.tensor([1], device=d), 7.0)
            return x

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.assertSameAsCpu(f)
            self.assertSameAsCpu(lambda d: torch.tensor([1.0, 2.0, 3.0], device=d).expand(
                1, 3).index_fill_(1, torch.tensor([0], device=d), 5.0))

    def test_view_as_complex_odd_offset(self):
        self.assertSameAsCpu(lambda d: torch.view_as_complex(
            torch.arange(7.0, device=d)[1:].view(3, 2)))
        self.assertSameAsCpu(lambda d: torch.view_as_complex(
            torch.arange(8.0, device=d)[2:].view(3, 2)))

    def test_fill_values_that_overflow(self):
        mask = [True, False]
        for dtype, value in [(torch.float16, 1e6), (torch.int8, 1000), (torch.uint8, -300),
                             (torch.uint8, 256), (torch.int32, INF), (torch.int64, NAN),
                             (torch.float32, 1e39), (torch.bfloat16, 1e39),
                             (torch.float32, 1 + 1j), (torch.float16, 65504.0),
                             (torch.uint8, -3), (torch.uint8, -255), (torch.int8, 2.7),
                             (torch.bool, 5), (torch.float16, INF), (torch.int64, 2.0**63),
                             (torch.int64, -2.0**63), (torch.int64, 2.0**63 + 4096),
                             (torch.int64, -2.0**63 - 4096)]:
            with self.subTest(dtype=dtype, value=value):
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.full(
                    (2,), v, dtype=t, device=d))
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.zeros(
                    2, dtype=t, device=d).masked_fill(torch.tensor(mask, device=d), v))
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.zeros(
                    3, dtype=t, device=d).fill_(v))
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.zeros(
                    1, dtype=t, device=d).fill_(v))
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.zeros(
                    3, dtype=t, device=d).index_fill(0, torch.tensor([1], device=d), v))
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.zeros(
                    3, dtype=t, device=d).new_full((2,), v))
                self.assertSameAsCpu(lambda d, t=dtype, v=value: torch.full_like(
                    torch.zeros(3, dtype=t, device=d), v))

    def test_other_values_that_overflow(self):
        """Value tensors of masked_fill and index_fill, clamp's bounds and scatter's value are
        converted to the dtype as the CPU converts them: refused where they overflow."""

        def zeros(d, dtype=torch.int8):
            return torch.zeros(2, dtype=dtype, device=d)

        def index(d):
            return torch.tensor([0], device=d)

        cases = [
            lambda d: zeros(d).masked_fill(torch.tensor([True, False], device=d),
                                           torch.tensor(128, device=d)),
            lambda d: zeros(d, torch.float16).masked_fill(torch.tensor([True, False], device=d),
                                                          torch.tensor(1e5, device=d)),
            lambda d: zeros(d, torch.uint8).masked_fill(torch.tensor([True, False], device=d),
                                                        torch.tensor(-1, device=d)),
            lambda d: zeros(d).index_fill(0, index(d), torch.tensor(128, device=d)),
            lambda d: zeros(d).index_fill_(0, index(d), torch.tensor(128, device=d)),
            lambda d: zeros(d).index_fill(0, index(d), torch.tensor([5], device=d)),
            lambda d: zeros(d).scatter(0, index(d), 128),
            lambda d: zeros(d).scatter(0, index(d), 128, reduce="add"),
            lambda d: zeros(d).scatter(0, torch.tensor([], dtype=torch.long, device=d), 128),
            lambda d: zeros(d, torch.uint8).scatter(0, index(d), -1),
            lambda d: zeros(d, torch.int64).scatter(0, index(d), 2.0**63),
            lambda d: zeros(d, torch.float16).scatter(0, index(d), 1e5, reduce="multiply"),
        ]
        for dtype, bounds in [(torch.int8, dict(max=128)), (torch.int8, dict(min=-129)),
                              (torch.int8, dict(max=127.5)), (torch.float16, dict(max=1e5)),
                              (torch.float16, dict(min=-INF)), (torch.uint8, dict(min=-256)),
                              (torch.uint8, dict(min=-255)), (torch.uint8, dict(max=256)),
                              (torch.int64, dict(max=2.0**63))]:
            cases.append(lambda d, t=dtype, b=bounds: zeros(d, t).clamp(**b))
            cases.append(lambda d, t=dtype, b=bounds: zeros(d, t).clamp_(**b))
        cases.append(lambda d: zeros(d).clamp_max(128))
        for f in cases:
            self.assertSameAsCpu(f)
        with self.assertRaisesRegex(RuntimeError, "int8_t without overflow"):
            zeros("npy").clamp(max=128)
        with self.assertRaisesRegex(RuntimeError, "c10::Half without overflow"):
            zeros("npy", torch.float16).masked_fill(torch.tensor([True, False], device="npy"),
                                                    torch.tensor(1e5, device="npy"))

    def test_addr_needs_1d_vectors(self):
        def ones(d, *shape):
            return torch.ones(shape, device=d)

        cases = [
            lambda d: torch.addr(ones(d, 2, 2), ones(d, 2, 1), ones(d, 2)),
            lambda d: torch.addr(ones(d, 2, 2), ones(d, 2), ones(d, 1, 2)),
            lambda d: torch.addr(ones(d, 2, 2), ones(d), ones(d, 2)),
            lambda d: torch.addr(ones(d, 2, 2).bool(), ones(d, 2, 1).bool(), ones(d, 2).bool()),
            lambda d: torch.addr(ones(d, 3, 2), ones(d, 2), ones(d, 2)),
            lambda d: torch.addr(ones(d, 1, 2, 2), ones(d, 2), ones(d, 2)),
            lambda d: torch.addr(ones(d, 3), ones(d, 2), ones(d, 3)),
            lambda d: torch.addr(ones(d, 2), ones(d, 2), ones(d, 3), beta=0),
        ]
        for f in cases:
            self.assertSameAsCpu(f)
        with self.assertRaisesRegex(RuntimeError, "Expected 1-D argument vec1, but got 2-D"):
            cases[0]("npy")

    def test_addr_in_place_needs_the_products_shape(self):
        # addr_ does not broadcast self (nor resize it, as addr's out= does); functional addr
        # broadcasts it, and lays its result out as self is.
        def addr_(d, *shape, **kwargs):
            return torch.zeros(shape, device=d).addr_(
                torch.ones(2, device=d), torch.arange(3.0, device=d), **kwargs)

        cases = [
            lambda d: addr_(d, 3),
            lambda d: addr_(d, 1, 3),
            lambda d: addr_(d, 2, 1),
            lambda d: addr_(d),
            lambda d: addr_(d, 2, 3, beta=2),
            lambda d: torch.zeros(3, 2, device=d).t().addr_(
                torch.ones(2, device=d), torch.arange(3.0, device=d)),
            lambda d: torch.zeros(2, 3, device=d).addr_(torch.ones(2, 1, device=d),
                                                        torch.ones(3, device=d)),
            lambda d: torch.addr(torch.arange(3.0, device=d), torch.ones(2, device=d),
                                 torch.arange(3.0, device=d)),
            lambda d: torch.addr(torch.arange(6.0, device=d).view(3, 2).t(),
                                 torch.ones(2, device=d), torch.arange(3.0, device=d)),
        ]
        for f in cases:
            self.assertSameAsCpu(f, strides=not isinstance(_outcome(f, "cpu"), type))
        with self.assertRaisesRegex(RuntimeError, "2D tensor expected, got 1D tensor"):
            cases[0]("npy")

    def test_baddbmm_needs_3d_batches(self):
        for d in ("cpu", "npy"):
            with self.assertRaises((RuntimeError, IndexError)):
                torch.baddbmm(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d),
                              torch.ones(2, 2, device=d))


class TestFailedInplaceWrites(CornersTestCase):
    """Item 4: an in-place op that fails raises CPU's type of error. Unlike the CPU (which
    on torch 2.13 writes the elements before the bad index, then raises), npy validates
    first and leaves ``self`` as it was."""

    def test_out_of_range_index(self):
        def idx(d):
            return torch.tensor([0, 5], device=d)

        def src(d):
            return torch.tensor([1.0, 2.0], device=d)

        cases = [
            lambda x, d: x.index_copy_(0, idx(d), src(d)),
            lambda x, d: x.index_fill_(0, idx(d), 1.0),
            lambda x, d: x.index_add_(0, idx(d), src(d)),
            lambda x, d: x.put_(idx(d), src(d)),
            lambda x, d: x.index_put_((idx(d),), src(d)),
        ]
        for f in cases:
            x = torch.zeros(3)
            with self.assertRaises(IndexError):
                f(x, "cpu")
            y = torch.zeros(3, device="npy")
            with self.assertRaises(IndexError):
                f(y, "npy")
            self.assertEqual(y.cpu(), torch.zeros(3))

    def test_negative_index_fill(self):
        self.assertSameAsCpu(lambda d: torch.zeros(3, device=d).index_fill_(
            0, torch.tensor([0, -1], device=d), 1.0))

    def test_integer_remainder_by_zero(self):
        for d in ("cpu", "npy"):
            x = torch.tensor([5, 6, 7], device=d)
            with self.assertRaisesRegex(RuntimeError, "ZeroDivisionError"):
                x.remainder_(torch.tensor([2, 0, 3], device=d))
        self.assertEqual(x.cpu(), torch.tensor([5, 6, 7]))


class TestEdgeValues(CornersTestCase):
    """Item 5."""

    def test_special_functions(self):
        self.assertSameAsCpu(lambda d: torch.lgamma(torch.tensor([-INF, INF, -0.0, 0.0, -2.0],
                                                                 device=d)))
        self.assertSameAsCpu(lambda d: torch.digamma(torch.tensor([-0.0, 0.0, -2.0, INF, -INF],
                                                                  device=d)))

    def test_softmax_with_inf(self):
        x = [[1.0, INF], [-INF, -INF], [1.0, -INF], [INF, 1.0], [NAN, 1.0], [INF, INF],
             [-INF, INF]]
        for f in (torch.softmax, torch.log_softmax):
            for dtype in (torch.float32, torch.float64, torch.float16):
                self.assertSameAsCpu(lambda d, f=f, t=dtype: f(torch.tensor(x, device=d,
                                                                            dtype=t), 1))
            self.assertSameAsCpu(lambda d, f=f: f(torch.tensor(x, device=d).t(), 0))

    def test_var_mean_with_inf(self):
        # CPU's Welford mean is infinite only where the one infinite element comes last.
        rows = [[1.0, INF], [INF, 1.0], [1.0, INF, 2.0], [1.0, 2.0, -INF], [1.0] * 40 + [INF],
                [INF] + [1.0] * 40, [1.0, INF, -INF], [INF, INF], [1.0, INF, INF], [INF],
                [INF, NAN, 1.0]]
        for row in rows:
            for dtype in (torch.float32, torch.bfloat16):
                self.assertSameAsCpu(lambda d, r=row, t=dtype: torch.var_mean(
                    torch.tensor(r, dtype=t, device=d)))
            self.assertSameAsCpu(lambda d, r=row: torch.std_mean(torch.tensor(r, device=d)))
            self.assertSameAsCpu(lambda d, r=row: torch.var_mean(
                torch.tensor(r, device=d) * (1 + 1j)))
        x = torch.tensor([[1.0, INF, 2.0], [INF, 1.0, 2.0], [3.0, 2.0, INF], [1.0, 2.0, 3.0]])
        for dim in (0, 1, (0, 1), None):
            for layout in (x, x.t().contiguous().t()):
                self.assertSameAsCpu(lambda d, v=layout, m=dim: torch.var_mean(
                    v.to(d), dim=m)[1])
                self.assertSameAsCpu(lambda d, v=layout, m=dim: torch.std_mean(
                    v.to(d), dim=m, keepdim=True)[1])

    def test_complex_inf_nan(self):
        def x(d):
            return torch.tensor([complex(INF, 0), complex(NAN, 1), complex(1, INF), 0j],
                                device=d)

        def y(d):
            return torch.tensor([0j, 1, complex(INF, INF), 2], device=d)

        self.assertSameAsCpu(lambda d: torch.pow(x(d), 0))
        self.assertSameAsCpu(lambda d: torch.addcdiv(x(d), x(d), y(d)))
        self.assertSameAsCpu(lambda d: torch.true_divide(x(d), y(d)))
        self.assertSameAsCpu(lambda d: torch.logcumsumexp(x(d), 0))
        self.assertSameAsCpu(lambda d: torch.logcumsumexp(
            torch.tensor([complex(-INF, 1), complex(-INF, 2), 1j, complex(INF, 0),
                          complex(INF, 3)], device=d), 0))

    def test_low_precision_division_and_remainder(self):
        a, b = [7.3, -201.7, 1000.1, 5.0], [0.7, 3.1, 0.3, -0.0]
        for dtype in (torch.bfloat16, torch.float16):
            for mode in ("floor", "trunc"):
                self.assertSameAsCpu(lambda d, t=dtype, m=mode: torch.div(
                    torch.tensor(a, dtype=t, device=d), torch.tensor(b, dtype=t, device=d),
                    rounding_mode=m))
            self.assertSameAsCpu(lambda d, t=dtype: torch.remainder(
                torch.tensor(a, dtype=t, device=d), torch.tensor(b, dtype=t, device=d)))
            # A scalar divisor (a number, or a tensor of one value for the whole result) is
            # divided by in float32, unrounded to the dtype.
            for mode, divisor in itertools.product(("trunc", "floor"), (0.7, 0.3, -3.1)):
                self.assertSameAsCpu(lambda d, t=dtype, m=mode, v=divisor: torch.div(
                    torch.tensor(a, dtype=t, device=d), v, rounding_mode=m))
                self.assertSameAsCpu(lambda d, t=dtype, m=mode, v=divisor: torch.div(
                    torch.tensor(a, dtype=t, device=d), torch.tensor(v, device=d),
                    rounding_mode=m))
                self.assertSameAsCpu(lambda d, t=dtype, m=mode, v=divisor: torch.div(
                    torch.tensor(a, dtype=t, device=d), torch.tensor([v], device=d).expand(4),
                    rounding_mode=m))
            self.assertSameAsCpu(lambda d, t=dtype: torch.zeros(2, dtype=t, device=d).put_(
                torch.zeros(1000, dtype=torch.long, device=d),
                torch.full((1000,), 0.1, dtype=t, device=d), accumulate=True))

    def test_uint8_negative_values_wrap(self):
        def u8(d):
            return torch.zeros(2, dtype=torch.uint8, device=d)

        mask = [True, False]
        self.assertSameAsCpu(lambda d: u8(d).fill_(-3))
        self.assertSameAsCpu(lambda d: u8(d).masked_fill(torch.tensor(mask, device=d), -3))
        self.assertSameAsCpu(lambda d: torch.where(torch.tensor(mask, device=d), u8(d), -3))
        self.assertSameAsCpu(lambda d: torch.where(torch.tensor(mask, device=d), -3, u8(d)))

    def test_floats_that_overflow_integer_dtypes(self):
        """A float out of an integer dtype's range is refused, as c10's checked conversion
        refuses it: only integers wrap into unsigned dtypes (fuzz seed 92)."""
        for dtype, value in itertools.product(
            (torch.uint8, torch.int8), (-1.5, -0.5, -1, 255.5, 127.5, -128.5, 1.5, -255, -256)
        ):
            def masked_setitem(d, dtype=dtype, value=value):
                t = torch.ones(2, 1, dtype=dtype, device=d)
                t[t != 0] = value
                return t

            self.assertSameAsCpu(masked_setitem)
            self.assertSameAsCpu(
                lambda d, t=dtype, v=value: torch.ones(2, dtype=t, device=d).fill_(v)
            )

    def test_bfloat16_converts_to_integers_as_float(self):
        # bfloat16 converts to an integer dtype as the float it is (200 is -56 in int8), by
        # fill_ with a value tensor, copy_ and to; float32 too, and complex to real.
        values = [200.0, -200.0, 300.0, -3.5, 128.0, 70000.0, 3e9, INF, NAN]
        for (vd, td), v in itertools.product(
            itertools.product((torch.bfloat16, torch.float32),
                              (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                               torch.bool)), values):
            with self.subTest(value=v, source=vd, target=td):
                self.assertSameAsCpu(lambda d, v=v, vd=vd, td=td: torch.zeros(
                    2, dtype=td, device=d).fill_(torch.tensor(v, dtype=vd, device=d)))
                self.assertSameAsCpu(lambda d, v=v, vd=vd, td=td: torch.zeros(
                    2, dtype=td, device=d).copy_(torch.full((2,), v, dtype=vd, device=d)))
                self.assertSameAsCpu(lambda d, v=v, vd=vd, td=td: torch.full(
                    (20,), v, dtype=vd, device=d).to(td))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPU: casting complex to real discards the imaginary
            self.assertSameAsCpu(lambda d: torch.zeros(2, device=d).fill_(
                torch.tensor(1 + 2j, device=d)))

    def test_strides_of_reduction_results(self):
        """A reduction's result (keepdim's size-1 dimensions too) is contiguous, as CPU makes
        it, whatever the input's layout."""

        def inputs(d):
            return [torch.arange(12.0, device=d).view(3, 4).t(),
                    torch.arange(24.0, device=d).view(2, 3, 4).permute(2, 0, 1),
                    torch.arange(120.0, device=d).view(2, 4, 3, 5).to(
                        memory_format=torch.channels_last)]

        reductions = [torch.sum, torch.mean, torch.amax, torch.var, torch.std, torch.nansum,
                      lambda x, dim, keepdim: torch.prod(x, dim[0], keepdim=keepdim),
                      lambda x, dim, keepdim: torch.var_mean(x, dim, keepdim=keepdim)[1],
                      lambda x, dim, keepdim: torch.all(x, dim[0], keepdim=keepdim),
                      lambda x, dim, keepdim: torch.aminmax(x, dim=dim[0], keepdim=keepdim)[0]]
        for (i, f), n in itertools.product(enumerate(reductions), range(3)):
            for dim in [(0,), (1,), (0, 2)][:3 if n else 2]:
                with self.subTest(reduction=i, input=n, dim=dim):
                    self.assertSameAsCpu(lambda d, f=f, n=n, dim=dim: f(
                        inputs(d)[n], dim, keepdim=True), strides=True)

    def test_strides_of_results(self):
        cases = [
            lambda d: torch.arange(6.0, device=d).view(2, 3).t() + 1,
            lambda d: torch.arange(24.0, device=d).view(2, 3, 4).permute(2, 0, 1) * 2,
            lambda d: torch.arange(24.0, device=d).view(2, 3, 4).permute(2, 0, 1).neg(),
            lambda d: torch.arange(3.0, device=d).expand(2, 3) + 1,
            lambda d: torch.where(torch.arange(6.0, device=d).view(2, 3).t() > 2, 1.0, 0.0),
            lambda d: torch.arange(6.0, device=d).view(2, 3).t().masked_fill(
                torch.ones(3, 2, dtype=torch.bool, device=d), 1),
        ]
        for f in cases:
            self.assertSameAsCpu(f, strides=True)

    def test_strides_of_mixed_layout_results(self):
        """Every stride (size-one dimensions' too, which views of the result keep) is CPU's
        TensorIterator's: its fast setups and its order of dimensions for broadcasts of
        permuted, expanded and zero-dimensional operands (fuzz seed 84)."""

        def t(d):
            return torch.arange(6.0, dtype=torch.float64, device=d).view(2, 3).t().unsqueeze(0)

        def cl(d):
            return torch.ones(1, 3, 1, 3, device=d).to(memory_format=torch.channels_last)

        cases = [
            lambda d: torch.floor_divide(torch.tensor(-1, device=d), t(d)),
            lambda d: t(d) + 1,
            lambda d: t(d) * torch.ones(2, device=d),
            lambda d: torch.ones(1, 3, device=d) + torch.tensor(2.0, device=d),
            lambda d: torch.ones(3, 1, device=d).expand(3, 2) - t(d)[0].float(),
            lambda d: cl(d) + cl(d),
            lambda d: cl(d).neg(),
            lambda d: torch.where(t(d) > 2, t(d), 0.0),
            lambda d: t(d).clamp(1, 4),
        ]
        for f in cases:
            self.assertSameAsCpu(f, strides=True)

    def test_complex_views_of_negative_views(self):
        # A negative view's real, imag and view_as_real read negated values, as on CPU (fuzz
        # seed 5950); view_as_complex of a negative view too.
        def neg(d):
            return torch._neg_view(torch.tensor([1 + 2j, 3 - 1j], device=d))

        self.assertSameAsCpu(lambda d: neg(d).real)
        self.assertSameAsCpu(lambda d: neg(d).imag)
        self.assertSameAsCpu(lambda d: torch.view_as_real(neg(d)))
        self.assertSameAsCpu(lambda d: torch.view_as_complex(
            torch._neg_view(torch.arange(4.0, device=d).view(2, 2))))
        self.assertTrue(neg("npy").real.is_neg())

    def test_complex_views_of_offset_tensors(self):
        for view in (lambda t: t.real, lambda t: t.imag, torch.view_as_real):
            z = torch.arange(6.0).to(torch.complex64).to("npy")
            v = view(z[2:])
            self.assertEqual(v.cpu(), view(torch.arange(6.0).to(torch.complex64)[2:]))
            v.add_(100)
            self.assertEqual(z[:2].cpu(), torch.arange(2.0).to(torch.complex64))

    def test_offsets_of_complex_views(self):
        """Views that change the element size count their offset and strides in the new
        dtype's elements, as on CPU, and keep writing through to their base."""

        def z(d):
            return torch.arange(12.0).to(torch.complex64).to(d)

        def f(d):
            return torch.arange(24.0, device=d).view(4, 3, 2)

        views = [
            lambda d: z(d)[2:].real,
            lambda d: z(d)[3:].imag,
            lambda d: torch.view_as_real(z(d)[2:]),
            lambda d: torch.view_as_real(z(d).view(3, 4)[1:, ::2]),
            lambda d: torch.view_as_complex(f(d)[1:]),
            lambda d: torch.view_as_complex(f(d)[:, 1:]),
        ]
        for view in views:
            npy, cpu = view("npy"), view("cpu")
            self.assertEqual((npy.stride(), npy.storage_offset()),
                             (cpu.stride(), cpu.storage_offset()))
            self.assertEqual(npy.cpu(), cpu)
        self.assertSameAsCpu(lambda d: torch.view_as_real(z(d).conj()))
        self.assertSameAsCpu(lambda d: torch.view_as_complex(f(d)[:, :, :1]))
        base = z("npy")
        base[2:].imag.add_(100)
        self.assertEqual(base.imag.cpu(), torch.tensor([0.0, 0] + [100.0] * 10))


class TestMemoryFormat(CornersTestCase):
    """Item 6: conv and batch_norm keep a channels-last input's memory format."""

    def test_conv2d_and_batch_norm(self):
        torch.manual_seed(0)
        x, w = torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3)
        for x_cl, w_cl in itertools.product((False, True), repeat=2):
            def run(d, x_cl=x_cl, w_cl=w_cl):
                xi = x.to(memory_format=torch.channels_last) if x_cl else x
                wi = w.to(memory_format=torch.channels_last) if w_cl else w
                xi = xi.to(d).detach().requires_grad_()
                wi = wi.to(d).detach().requires_grad_()
                y = F.conv2d(xi, wi)
                y.backward(torch.ones_like(y))
                z = F.batch_norm(xi, None, None, training=True)
                z.backward(torch.ones_like(z))
                e = F.batch_norm(xi, torch.zeros(3, device=d), torch.ones(3, device=d))
                return y, xi.grad, wi.grad, z, e

            cpu, npy = run("cpu"), run("npy")
            for c, n in zip(cpu, npy, strict=True):
                self.assertEqual(n.stride(), c.stride())
                self.assertEqual(n.cpu(), c, atol=1e-5, rtol=1e-5)


    def test_activations_lay_out_results_as_cpu(self):
        # Elementwise activations: as CPU's TensorIterator (add's layout); rrelu: contiguous.
        activations = [F.gelu, F.silu, F.elu, F.leaky_relu, F.hardtanh, F.softplus,
                       F.hardswish, F.relu6, lambda x: F.threshold(x, 1.0, 0.0), F.rrelu]
        inputs = [
            lambda d: torch.arange(24.0, device=d).view(2, 3, 4).permute(2, 0, 1) - 10,
            lambda d: (torch.arange(96.0, device=d).view(2, 3, 4, 4) - 40).to(
                memory_format=torch.channels_last),
            lambda d: torch.arange(12.0, device=d).view(3, 4).t(),
            lambda d: torch.arange(4.0, device=d).expand(3, 4),
        ]
        for (i, f), x, dtype in itertools.product(enumerate(activations), inputs,
                                                  (torch.float32, torch.float64)):
            with self.subTest(activation=i, shape=x("cpu").shape, dtype=dtype):
                cpu, npy = f(x("cpu").to(dtype)), f(x("npy").to(dtype))
                self.assertEqual(npy.stride(), cpu.stride())
                self.assertEqual(npy.cpu(), cpu)

    def test_pools_and_group_norm_keep_channels_last(self):
        torch.manual_seed(0)
        x = torch.randn(2, 4, 6, 6)
        x3 = torch.randn(2, 4, 4, 4, 4)
        cases = [
            (lambda v: F.avg_pool2d(v, 2), x, torch.channels_last),
            (lambda v: F.avg_pool2d(v, 3, 2, 1), x, torch.channels_last),
            (lambda v: F.adaptive_avg_pool2d(v, 3), x, torch.channels_last),
            (lambda v: F.group_norm(v, 2), x, torch.channels_last),
            (lambda v: F.group_norm(v, 2), x3, torch.channels_last_3d),
            (lambda v: F.avg_pool3d(v, 2), x3, torch.channels_last_3d),
            (lambda v: F.adaptive_avg_pool3d(v, 3), x3, torch.channels_last_3d),
        ]
        for f, v, layout in cases:
            cpu = f(v.to(memory_format=layout))
            npy = f(v.to(memory_format=layout).to("npy"))
            self.assertEqual(npy.stride(), cpu.stride())
            self.assertEqual(npy.cpu(), cpu)
        for f, v, _ in cases[:3]:
            grads = []
            for d in ("cpu", "npy"):
                xi = v.to(memory_format=torch.channels_last).to(d).requires_grad_()
                grads.append(torch.autograd.grad(f(xi).sum(), xi)[0])
            self.assertEqual(grads[1].stride(), grads[0].stride())
            self.assertEqual(grads[1].cpu(), grads[0])


    def test_activation_gradients_lay_out_as_cpu(self):
        """The gradients of elementwise activations are laid out as CPU's TensorIterator lays
        them out for the upstream gradient and the input (or result), in its kernels' order:
        the input's layout first for leaky_relu (so rrelu) and threshold (relu)."""
        activations = [F.elu, F.celu, F.selu, torch.sigmoid, torch.tanh, F.relu,
                       F.leaky_relu, lambda x: F.rrelu(x, training=False)]
        inputs = [torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last),
                  torch.randn(2, 3, 4).permute(2, 0, 1)]
        for (i, f), x in itertools.product(enumerate(activations), inputs):
            for upstream in (torch.ones_like, lambda y: torch.ones(y.shape, device=y.device)):
                grads = []
                for d in ("cpu", "npy"):
                    xi = x.to(d).requires_grad_()
                    y = f(xi)
                    grads.append(torch.autograd.grad(y, xi, upstream(y))[0])
                with self.subTest(activation=i, shape=x.shape):
                    self.assertEqual(grads[1].stride(), grads[0].stride())
                    self.assertEqual(grads[1].cpu(), grads[0])


class TestCheckpoint(CornersTestCase):
    """Item 7: torch.utils.checkpoint restores the device's random state for the recomputed
    forward, so dropout gives the gradients of the plain run."""

    def test_checkpoint_with_dropout(self):
        self.assertTrue(torch.npy._initialized)
        for reentrant in (False, True):
            torch.manual_seed(0)
            lin = torch.nn.Linear(8, 8).to("npy")
            x = torch.randn(4, 8, device="npy", requires_grad=True)

            def f(x, lin=lin):
                return F.dropout(lin(x), 0.5, training=True).sum()

            torch.manual_seed(1)
            f(x).backward()
            plain = x.grad.cpu()
            x.grad = None
            torch.manual_seed(1)
            checkpoint(f, x, use_reentrant=reentrant).backward()
            self.assertEqual(x.grad.cpu(), plain, atol=0, rtol=0)


class TestBoolRefusals(CornersTestCase):
    """Operators CPU refuses for bool (and a bool alpha), found by the fuzzer."""

    def test_refused_as_on_cpu(self):
        b = torch.tensor([True, False])
        cases = {
            "argmax": lambda d: b.to(d).argmax(),
            "argmin": lambda d: b.to(d).argmin(0),
            "round": lambda d: b.to(d).round(),
            "floor_divide": lambda d: torch.floor_divide(b.to(d), b.to(d)),
            "div_trunc": lambda d: torch.div(b.to(d), b.to(d), rounding_mode="trunc"),
            "add_alpha": lambda d: torch.add(torch.ones(2, device=d), 1.0, alpha=True),
            "sub_alpha": lambda d: torch.sub(torch.ones(2, device=d), torch.ones(2, device=d),
                                             alpha=True),
            "bool_alpha_ok": lambda d: torch.add(b.to(d), b.to(d), alpha=True),
            "round_int": lambda d: torch.arange(3, device=d).round(),
        }
        for name, f in cases.items():
            with self.subTest(name):
                self.assertSameAsCpu(f)


def _bools(d):
    return torch.tensor([True, False, True], device=d)


def _longs(d):
    return torch.tensor([-2, 0, 3], device=d)


def _floats(d):
    return torch.tensor([-2.5, 0.0, 3.0], device=d)


def _complexes(d):
    return torch.tensor([1 + 1j, 0j, -2j], device=d)


class TestDtypeRefusals(CornersTestCase):
    """What CPU refuses for bool, integer or complex operands (or a scalar of the wrong kind)
    npy refuses with CPU's type of error and a message that CPU's pattern matches; what CPU
    accepts, npy computes as CPU does (fuzz seeds 153, 199, 151, 743, 2753, 1234, 522, 576,
    1914 and 2985, and their siblings)."""

    def assertRefusedAsOnCpu(self, f, error, pattern):
        for d in ("cpu", "npy"):
            with self.assertRaisesRegex(error, pattern, msg=d):
                f(d)

    def test_refused_for_bool(self):
        bool_kernels = "not implemented for 'Bool'"
        cases = {
            "relu": (lambda d: torch.relu(_bools(d)), RuntimeError,
                     "Boolean inputs not supported for relu"),
            "relu_": (lambda d: _bools(d).relu_(), RuntimeError,
                      "Boolean inputs not supported for relu"),
            "hardtanh": (lambda d: F.hardtanh(_bools(d)), RuntimeError,
                         "Bool inputs not supported for hardtanh"),
            "threshold": (lambda d: F.threshold(_bools(d), 0, 1), NotImplementedError,
                          bool_kernels),
            "floor": (lambda d: torch.floor(_bools(d)), NotImplementedError, bool_kernels),
            "floor_": (lambda d: _bools(d).floor_(), NotImplementedError, bool_kernels),
            "ceil": (lambda d: torch.ceil(_bools(d)), NotImplementedError, bool_kernels),
            "trunc": (lambda d: torch.trunc(_bools(d)), NotImplementedError, bool_kernels),
            "pow.Tensor_Tensor": (lambda d: torch.pow(_bools(d), _bools(d)),
                                  NotImplementedError, bool_kernels),
            "pow 0-dim exponent": (lambda d: torch.pow(_bools(d), torch.tensor(True, device=d)),
                                   NotImplementedError, bool_kernels),
            "pow.Scalar": (lambda d: torch.pow(True, _bools(d)), NotImplementedError,
                           bool_kernels),
            "pow_": (lambda d: _bools(d).pow_(_bools(d)), NotImplementedError, bool_kernels),
            "clamp": (lambda d: torch.clamp(_bools(d), True, True), NotImplementedError,
                      bool_kernels),
            "clamp min": (lambda d: torch.clamp(_bools(d), min=False), NotImplementedError,
                          bool_kernels),
            "clamp max": (lambda d: torch.clamp(_bools(d), max=True), NotImplementedError,
                          bool_kernels),
            "clamp_": (lambda d: _bools(d).clamp_(min=True), NotImplementedError,
                       bool_kernels),
            "clamp.Tensor": (lambda d: torch.clamp(_bools(d), _bools(d), _bools(d)),
                             NotImplementedError, bool_kernels),
            "clamp_min": (lambda d: torch.clamp_min(_bools(d), True), NotImplementedError,
                          bool_kernels),
            "clamp_max": (lambda d: torch.clamp_max(_bools(d), True), NotImplementedError,
                          bool_kernels),
            "remainder.Scalar": (lambda d: torch.remainder(_bools(d), True),
                                 NotImplementedError, bool_kernels),
            "remainder.Scalar_Tensor": (lambda d: torch.remainder(True, _bools(d)),
                                        NotImplementedError, bool_kernels),
            "remainder.Tensor": (lambda d: _bools(d) % _bools(d), NotImplementedError,
                                 bool_kernels),
            "remainder_": (lambda d: _bools(d).remainder_(_bools(d)), NotImplementedError,
                           bool_kernels),
            "fmod": (lambda d: torch.fmod(_bools(d), True), NotImplementedError, bool_kernels),
            "gcd": (lambda d: torch.gcd(_bools(d), _bools(d)), NotImplementedError,
                    bool_kernels),
            "bmm": (lambda d: torch.bmm(_bools(d).view(1, 3, 1), _bools(d).view(1, 1, 3)),
                    NotImplementedError, bool_kernels),
        }
        for name, (f, error, pattern) in cases.items():
            with self.subTest(name):
                self.assertRefusedAsOnCpu(f, error, pattern)
        # The message names the operator and the backend.
        with self.assertRaisesRegex(NotImplementedError,
                                    "\"floor\" not implemented for 'Bool' by the npy backend"):
            torch.floor(_bools("npy"))

    def test_refused_for_integers_and_complex(self):
        clamp_complex = "clamp is not supported for complex types"
        cases = {
            "relu complex": (lambda d: torch.relu(_complexes(d)), NotImplementedError,
                             clamp_complex),
            "hardtanh complex": (lambda d: F.hardtanh(_complexes(d)), NotImplementedError,
                                 clamp_complex),
            "hardtanh uint8": (lambda d: F.hardtanh(_longs(d).to(torch.uint8)), RuntimeError,
                               "cannot do hardtanh on an unsigned type with negative limits"),
            "hardtanh int8 limit": (lambda d: F.hardtanh(_longs(d).to(torch.int8), -1000, 1),
                                    RuntimeError, "cannot be converted to type int8_t"),
            "leaky_relu": (lambda d: F.leaky_relu(_longs(d)), NotImplementedError,
                           "leaky_relu"),
            "leaky_relu complex slope": (lambda d: F.leaky_relu(_floats(d), 1j), RuntimeError,
                                         "cannot be converted to type float"),
            "hardsigmoid": (lambda d: F.hardsigmoid(_longs(d)), NotImplementedError,
                            "hardsigmoid"),
            "hardswish": (lambda d: F.hardswish(_complexes(d)), NotImplementedError,
                          "hardswish"),
            "hardshrink": (lambda d: F.hardshrink(_longs(d)), NotImplementedError, "hardshrink"),
            "threshold complex": (lambda d: F.threshold(_complexes(d), 0, 1),
                                  NotImplementedError, "not implemented for 'ComplexFloat'"),
            "threshold int8 overflow": (lambda d: F.threshold(_longs(d).to(torch.int8), 300, 1),
                                        RuntimeError, "cannot be converted to type int8_t"),
            "clamp complex bound": (lambda d: torch.clamp(_floats(d), min=1j), RuntimeError,
                                    "value cannot be converted to type double without overflow"),
            "clamp complex result": (lambda d: torch.clamp(_longs(d), min=1j),
                                     NotImplementedError, clamp_complex),
            "clamp complex": (lambda d: torch.clamp(_complexes(d), max=1), NotImplementedError,
                              clamp_complex),
            "clamp_min complex bound": (lambda d: torch.clamp_min(_floats(d), 1 + 0j),
                                        NotImplementedError, clamp_complex),
            "lerp integers": (lambda d: torch.lerp(_longs(d), _longs(d), 2),
                              NotImplementedError, "not implemented for 'Long'"),
            "lerp complex weight": (lambda d: torch.lerp(_floats(d), _floats(d), 1j),
                                    RuntimeError, "cannot be converted to type float"),
            "hypot": (lambda d: torch.hypot(_longs(d), _longs(d)), NotImplementedError,
                      "not implemented for 'Long'"),
            "logaddexp": (lambda d: torch.logaddexp(_longs(d), _bools(d)), NotImplementedError,
                          "not implemented for 'Long'"),
            "maximum": (lambda d: torch.maximum(_complexes(d), _complexes(d)), RuntimeError,
                        "maximum not implemented for complex tensors"),
            "fmin": (lambda d: torch.fmin(_floats(d), _complexes(d)), RuntimeError,
                     "fmin not implemented for complex tensors"),
            "heaviside": (lambda d: torch.heaviside(_complexes(d), _complexes(d)),
                          RuntimeError, "heaviside is not yet implemented for complex"),
            "deg2rad": (lambda d: torch.deg2rad(_complexes(d)), RuntimeError,
                        "deg2rad is not supported for complex tensors"),
            "signbit": (lambda d: torch.signbit(_complexes(d)), NotImplementedError,
                        "signbit is not implemented for complex tensors"),
            "amax": (lambda d: torch.amax(_complexes(d), 0), NotImplementedError,
                     "not implemented for 'ComplexFloat'"),
            "max": (lambda d: torch.max(_complexes(d)), NotImplementedError,
                    "not implemented for 'ComplexFloat'"),
            "logsigmoid": (lambda d: F.logsigmoid(_longs(d)), NotImplementedError,
                           "not implemented for 'Long'"),
            "rrelu complex": (lambda d: F.rrelu(_complexes(d)), NotImplementedError,
                              "not implemented for 'ComplexFloat'"),
            "rrelu complex training": (lambda d: F.rrelu(_complexes(d), training=True),
                                       NotImplementedError, "not implemented for 'ComplexFloat'"),
            "bmm mixed dtypes": (lambda d: torch.bmm(_floats(d).view(1, 3, 1),
                                                     _floats(d).double().view(1, 1, 3)),
                                 RuntimeError, "expected scalar type Float but found Double"),
        }
        for name, (f, error, pattern) in cases.items():
            with self.subTest(name):
                self.assertRefusedAsOnCpu(f, error, pattern)

    def test_alpha_of_add_and_sub(self):
        integral = "For integral input tensors, argument alpha must not be a floating point"
        non_complex = "For non-complex input tensors, argument alpha must not be a complex"
        boolean = "Boolean alpha only supported for Boolean results"
        cases = {
            "bool, float alpha (seed 522)": (lambda d: torch.add(_bools(d), _bools(d), alpha=0.5),
                                             integral),
            "0-dim bool (seed 2968)": (lambda d: torch.add(
                _bools(d), torch.tensor(False, device=d), alpha=0.5), integral),
            "long, alpha 1.0": (lambda d: torch.add(_longs(d), _longs(d), alpha=1.0), integral),
            "long, complex alpha": (lambda d: torch.sub(_longs(d), 1, alpha=1 + 0j), integral),
            "rsub": (lambda d: torch.rsub(_longs(d), 2, alpha=0.5), integral),
            "add_ long": (lambda d: _longs(d).add_(_longs(d), alpha=1.0), integral),
            "float, complex alpha": (lambda d: torch.add(_floats(d), _floats(d), alpha=1j),
                                     non_complex),
            "add_ float, complex alpha": (lambda d: _floats(d).add_(_floats(d), alpha=1j),
                                          non_complex),
            "add_ float, bool alpha": (lambda d: _floats(d).add_(_floats(d), alpha=True),
                                       boolean),
            "sub_ long, bool alpha": (lambda d: _longs(d).sub_(_longs(d), alpha=True), boolean),
        }
        for name, (f, pattern) in cases.items():
            with self.subTest(name):
                self.assertRefusedAsOnCpu(f, RuntimeError, pattern)
        for f in (lambda d: torch.add(_bools(d), _bools(d), alpha=2),
                  lambda d: torch.add(_longs(d), 2.5, alpha=2),
                  lambda d: torch.sub(_complexes(d), _floats(d), alpha=0.5j),
                  lambda d: _floats(d).add_(_floats(d), alpha=1.0)):
            self.assertSameAsCpu(f)

    def test_index_select_of_a_0dim_tensor(self):
        for n in (0, 2):  # fuzz seeds 576 and 1534
            self.assertRefusedAsOnCpu(
                lambda d, n=n: torch.index_select(torch.tensor(1.5, device=d), 0,
                                                  torch.zeros(n, dtype=torch.long, device=d)),
                RuntimeError, rf"Index to scalar can have only 1 value, got {n} value\(s\)")
        self.assertSameAsCpu(lambda d: torch.index_select(torch.tensor(1.5, device=d), -1,
                                                          torch.tensor([0], device=d)))

    def test_index_functions_check_shapes_as_cpu(self):
        """``index_add``, ``index_copy`` and ``index_reduce`` refuse what their CPU meta
        function refuses, with its type of error, before writing (a 0-dim ``self`` and a 1-dim
        ``source`` were accepted; mismatched slices copied one element)."""
        shapes = [(), (1,), (2,), (1, 1), (2, 3), (3, 2), (0,)]
        indices = [0, [0], [1, 0], [], [[0]]]
        ops = {
            "index_add": lambda s, i, src: s.index_add(0, i, src, alpha=2),
            "index_copy_": lambda s, i, src: s.index_copy_(-1, i, src),
            "index_reduce": lambda s, i, src: s.index_reduce(0, i, src, "amax"),
        }
        for (name, op), shape, index, source in itertools.product(
                ops.items(), shapes[:-1], indices, shapes):
            def f(d, op=op, shape=shape, index=index, source=source):
                s = torch.arange(math.prod(shape), dtype=torch.float32, device=d).view(shape)
                src = torch.arange(math.prod(source), dtype=torch.float32, device=d) + 10
                return op(s, torch.tensor(index, device=d), src.view(source))

            with self.subTest(name, shape=shape, index=index, source=source), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # index_reduce is in beta
                self.assertSameAsCpu(f)
        for d in ("cpu", "npy"):
            s, i = torch.zeros(2, 3, device=d), torch.tensor([0], device=d)
            with self.assertRaisesRegex(RuntimeError, "must have the same scalar type", msg=d):
                s.index_add(0, i, torch.zeros(1, 3, dtype=torch.float64, device=d))
            with self.assertRaisesRegex(RuntimeError, "Expected a long tensor for index", msg=d):
                s.index_copy(0, i.int(), torch.zeros(1, 3, device=d))
            with self.assertRaisesRegex(RuntimeError, "same slice shapes. Destination slice "
                                        r"shape: 2 at dimension 1", msg=d):
                s.index_copy(1, i, torch.zeros(3, 1, device=d))

    def test_accepted_as_on_cpu(self):
        cases = {
            "floor of integers": lambda d: torch.floor(_longs(d)),
            "ceil of uint8": lambda d: torch.ceil(_longs(d).abs().to(torch.uint8)),
            "trunc of integers": lambda d: torch.trunc(_longs(d)),
            "sign of bool": lambda d: torch.sign(_bools(d)),
            "pow bool, Python bool": lambda d: torch.pow(_bools(d), True),
            "pow_ bool, Python bool": lambda d: _bools(d).pow_(False),
            "pow bool, int": lambda d: torch.pow(_bools(d), 2),
            "pow int, bool": lambda d: torch.pow(2, _bools(d)),
            "pow long, bool": lambda d: torch.pow(_longs(d), _bools(d)),
            "clamp bool, int": lambda d: torch.clamp(_bools(d), min=2),
            "clamp bool, float": lambda d: torch.clamp(_bools(d), min=0.5),
            "clamp bool, one bool tensor": lambda d: torch.clamp(_bools(d), min=_bools(d)),
            "clamp_min bool tensor": lambda d: torch.clamp_max(_bools(d), _bools(d)),
            "clamp float, real complex": lambda d: torch.clamp(_floats(d), min=1 + 0j),
            "clamp long, long tensors": lambda d: torch.clamp(_bools(d), _longs(d), _longs(d)),
            "relu of integers": lambda d: torch.relu(_longs(d)),
            "hardtanh of integers": lambda d: F.hardtanh(_longs(d).to(torch.int8), -1.5, 2.5),
            "hardtanh_ of integers": lambda d: F.hardtanh(_longs(d), 0, 2, inplace=True),
            "relu6 of uint8": lambda d: F.relu6(_longs(d).abs().to(torch.uint8) * 3),
            "hardtanh of bfloat16": lambda d: F.hardtanh(_floats(d).bfloat16(), -2.0, 2.5),
            "threshold of integers": lambda d: F.threshold(_longs(d).to(torch.int8), 2.5, 7.9),
            "threshold of uint8, wrapping": lambda d: F.threshold(
                _longs(d).abs().to(torch.uint8), -1, 3),
            "threshold of float16 at 0.1": lambda d: F.threshold(
                torch.tensor([0.1, 0.2, NAN], dtype=torch.float16, device=d), 0.1, -1),
            "hardsigmoid of float16": lambda d: F.hardsigmoid(_floats(d).half() * 1.3),
            "hardswish of bfloat16": lambda d: F.hardswish(_floats(d).bfloat16() * 1.3),
            "hardshrink of float16": lambda d: F.hardshrink(_floats(d).half(), 2.5),
            "remainder bool, int": lambda d: torch.remainder(_bools(d), 2),
            "lerp float, real complex": lambda d: torch.lerp(_floats(d), _floats(d) * 2, 0.5 + 0j),
            "hypot long, float": lambda d: torch.hypot(_longs(d), _floats(d)),
            "gcd": lambda d: torch.gcd(_longs(d), _bools(d)),
            "silu of complex": lambda d: F.silu(_complexes(d)),
            "silu_backward of complex": lambda d: torch.ops.aten.silu_backward(
                _complexes(d), _complexes(d) * 2),
            "logsigmoid of bfloat16": lambda d: F.logsigmoid(_floats(d).bfloat16() * 3),
            # An empty result, or an empty sum, runs no kernel on CPU: a complex amin/amax,
            # a bmm of mixed dtypes (in batch2's) or of bool are accepted.
            "amin empty complex (seed 1914)": lambda d: torch.amin(
                torch.zeros(0, 3, dtype=torch.complex64, device=d), -1, keepdim=True),
            "amax empty complex": lambda d: torch.amax(
                torch.zeros(3, 0, dtype=torch.complex64, device=d), 0),
            "bmm empty mixed (seed 2985)": lambda d: torch.bmm(
                torch.ones(0, 4, 1, dtype=torch.bfloat16, device=d),
                torch.ones(0, 1, 1, dtype=torch.float64, device=d)),
            "bmm empty sum mixed": lambda d: torch.bmm(
                torch.ones(2, 3, 0, dtype=torch.float64, device=d),
                torch.ones(2, 0, 2, dtype=torch.bfloat16, device=d)),
            "bmm empty bool": lambda d: torch.bmm(_bools(d).view(1, 3, 1)[:0],
                                                  _bools(d).view(1, 1, 3)[:0]),
        }
        for name, f in cases.items():
            with self.subTest(name):
                self.assertSameAsCpu(f)
        for op in (torch.amin, torch.amax):  # an empty reduced dimension is still refused
            self.assertRefusedAsOnCpu(
                lambda d, op=op: op(torch.zeros(0, 3, dtype=torch.complex64, device=d), 0),
                IndexError, "Expected reduction dim 0 to have non-zero size")

    def test_complex_tanh_and_sigmoid_gradients(self):
        # CPU's tanh_backward and sigmoid_backward take complex (fuzz seeds 341, 2017).
        for f in (torch.tanh, torch.sigmoid):
            def grad(d, f=f):
                x = _complexes(d).requires_grad_()
                f(x).abs().sum().backward()
                return x.grad

            self.assertSameAsCpu(grad)

    def test_complex32_results_refused_not_swallowed(self):
        """A float16 tensor and a complex Python number make complex32 on CPU, which NumPy
        lacks: the backend's NotImplementedError reaches the caller, where torch's reflected
        operators would turn a TypeError into "unsupported operand type(s)" (fuzz seeds 182,
        635)."""
        h = torch.ones(2, dtype=torch.float16, device="npy")
        for f in (lambda: 1j * h, lambda: 1j - h, lambda: 1j + h, lambda: 1j / h):
            with self.assertRaisesRegex(NotImplementedError,
                                        "npy backend does not support dtype torch.complex32"):
                f()


class TestEmptyResults(TestCase):
    """CPU's dtype checks where the result has no elements, as this torch makes them (2.6
    skips them for argmax/argmin and mv; 2.13 and 2.14 refuse; fuzz seeds 13 and 574 on
    2.6): run on every release."""

    assertSameAsCpu = CornersTestCase.assertSameAsCpu

    def test_arg_reductions_of_complex_and_bool(self):
        cases = (((3, 0, 1), 0), ((3, 0, 1), 2), ((0, 2), 1), ((3, 2), 0), ((3, 1), 1),
                 ((1,), 0), ((1,), None), ((), None), ((), 0), ((3, 2), 1))
        for shape, dim in cases:
            for op, dtype in itertools.product(
                    (torch.argmax, torch.argmin), (torch.complex64, torch.bool)):
                with self.subTest(op=op.__name__, shape=shape, dim=dim, dtype=dtype):
                    self.assertSameAsCpu(lambda d, op=op, shape=shape, dim=dim, dtype=dtype: op(
                        torch.zeros(shape, dtype=dtype, device=d), dim))

    def test_mv_of_empty_mixed_dtypes(self):
        for m, v in (((4, 0), (0,)), ((0, 3), (3,)), ((2, 3), (3,))):
            for a, b in ((torch.float16, torch.complex64), (torch.complex64, torch.float16),
                         (torch.float64, torch.float32)):
                with self.subTest(m=m, a=a, b=b):
                    self.assertSameAsCpu(lambda d, m=m, v=v, a=a, b=b: torch.mv(
                        torch.zeros(m, dtype=a, device=d), torch.zeros(v, dtype=b, device=d)))


class TestCpuFormulas(CornersTestCase):
    """Values at the edges (inf, nan, signed zeros) where CPU's answer is its formula's: npy
    computes the same formula (fuzz seeds 625, 2192, 2312, 2394, 2481). Complex results are
    compared part by part: ``assertEqual`` takes any two complex nans as equal."""

    def assertSameParts(self, f):
        cpu, npy = f("cpu"), f("npy").cpu()
        self.assertEqual(npy.dtype, cpu.dtype)
        if cpu.is_complex():
            cpu, npy = torch.view_as_real(cpu), torch.view_as_real(npy)
        self.assertEqual(npy, cpu, equal_nan=True, atol=1e-6, rtol=1e-6)
        finite_zeros = cpu == 0
        self.assertEqual(npy.signbit()[finite_zeros], cpu.signbit()[finite_zeros])

    def test_remainder_keeps_the_sign_of_a_zero(self):
        x = [-2.0, 2.0, -0.0, 0.0, 3.0, -3.5, INF, 1.0]
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            for divisor in (2.0, -2.0, INF, -INF):
                with self.subTest(dtype=dtype, divisor=divisor):
                    self.assertSameParts(lambda d, t=dtype, v=divisor: torch.remainder(
                        torch.tensor(x, dtype=t, device=d), v))
        # The operands are rounded to the result's dtype first (fuzz seed 2600).
        for op in (torch.remainder, torch.fmod):
            for dtype in (torch.float16, torch.bfloat16):
                self.assertSameParts(lambda d, op=op, t=dtype: op(
                    torch.tensor(x[:6], dtype=t, device=d), torch.tensor(0.1, device=d)))
                self.assertSameParts(lambda d, op=op, t=dtype: op(
                    torch.tensor(x[:6], dtype=t, device=d), 0.1))
        # seed 2394: floor_divide by the signed zeros remainder_ leaves.
        self.assertSameParts(lambda d: torch.floor_divide(
            torch.tensor([4, -2, -4], device=d, dtype=torch.int32),
            torch.tensor([1.0, -2.0, 2.0], dtype=torch.float16, device=d).remainder_(2.0)))
        # seed 2481: reciprocal of the zero remainder_ leaves.
        self.assertSameParts(lambda d: torch.reciprocal(
            torch.tensor([0.0, 1.0], device=d).remainder_(-2)))

    def _complexes(self, d, dtype=torch.complex64):
        values = [0j, complex(-0.0, 0.0), 1 + 0j, 2 - 3j, complex(INF, 0), complex(-INF, 0),
                  complex(0, INF), complex(NAN, 0), complex(INF, INF), -4j]
        a, b = zip(*itertools.product(values, values), strict=True)
        return (torch.tensor(a, dtype=dtype, device=d), torch.tensor(b, dtype=dtype, device=d))

    def test_complex_add_and_sub_multiply_by_alpha(self):
        # CPU adds alpha * other, a complex product even for alpha 1: 0 * inf makes nan.
        cases = [
            lambda d: self._complexes(d)[1] + self._complexes(d)[0],
            lambda d: self._complexes(d)[1] - self._complexes(d)[0],
            lambda d: torch.add(*self._complexes(d), alpha=2),
            lambda d: self._complexes(d)[0].add_(self._complexes(d)[1]),
            lambda d: self._complexes(d)[0].sub_(self._complexes(d)[1]),
            lambda d: 1j - self._complexes(d)[0],
            lambda d: 1j - self._complexes(d)[0].real,  # seed 2192
        ]
        for f in cases:
            self.assertSameParts(f)

    def test_complex_pow(self):
        # C's cpow, exp(b * log(a)) with C's complex product, but for the exponents CPU's
        # Tensor_Scalar kernel computes otherwise.
        for dtype in (torch.complex64, torch.complex128):
            self.assertSameParts(lambda d, t=dtype: torch.pow(*self._complexes(d, t)))
        self.assertSameParts(lambda d: torch.pow(  # seed 625
            self._complexes(d)[0], torch.tensor(False, device=d)))
        self.assertSameParts(lambda d: torch.pow(  # seed 2312
            self._complexes(d)[0].real, self._complexes(d)[1]))
        for e in (0, 1, 0.5, -0.5, -1, 2, 3, -2, 4, 2.5, 1j):
            self.assertSameParts(lambda d, e=e: torch.pow(self._complexes(d)[0], e))
        for base in (1, 2, 1j, 0):
            self.assertSameParts(lambda d, b=base: torch.pow(b, self._complexes(d)[1]))

    def test_complex_reciprocal(self):
        self.assertSameParts(lambda d: torch.reciprocal(self._complexes(d)[0]))

    def test_products_accumulate_in_cpus_type(self):
        # prod of float16/bfloat16 rounds to the dtype at each step (300 * 300 is inf in
        # float16: fuzz seed 4438); scans of them accumulate in float, of float in double.
        def low(d, dtype):
            values = [300.0, 300.0, 1 / 300] if dtype == torch.float16 else [1e30, 1e30, 1e-30]
            return torch.tensor(values, dtype=dtype, device=d)

        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                self.assertSameAsCpu(lambda d, t=dtype: torch.prod(low(d, t)))
                self.assertSameAsCpu(lambda d, t=dtype: torch.prod(low(d, t).view(1, 3), 1))
                self.assertSameAsCpu(lambda d, t=dtype: torch.cumprod(low(d, t), 0))

    def test_rrelu_computes_in_float(self):
        # float16 and bfloat16: the slope is float32's (lower + upper) / 2, the result rounded
        # once; in training, zeros draw a slope too (their gradient is not 1).
        x = torch.linspace(-3, 3, 1001)
        for dtype in (torch.float16, torch.bfloat16):
            self.assertSameAsCpu(lambda d, t=dtype: F.rrelu(x.to(d, t), training=False))
        for d in ("cpu", "npy"):
            z = torch.zeros(4, device=d, requires_grad=True)
            F.rrelu(z, 0.1, 0.3, training=True).sum().backward()
            self.assertTrue(((z.grad >= 0.1) & (z.grad <= 0.3)).all())

    def test_scatter_and_index_reductions_accumulate_in_cpus_type(self):
        """float16 and bfloat16: CPU's scatter kernels accumulate in float (1000 * 0.1 is 100,
        not bfloat16's 32); its index_add adds in the dtype but for a tensor of two or more
        dimensions along its first or last (then scatter_add), and index_reduce's mean
        counts its elements as that index_add adds ones."""
        n = 1000

        def index(d, *shape):
            return torch.zeros(n, dtype=torch.long, device=d).view(shape or (n,))

        for dtype in (torch.bfloat16, torch.float16):
            def src(d, *shape, v=0.1, t=dtype):
                return torch.full(shape or (n,), v, dtype=t, device=d)

            def zeros(d, *shape, t=dtype):
                return torch.zeros(shape, dtype=t, device=d)

            cases = [
                lambda d: zeros(d, 2).scatter_add_(0, index(d), src(d)),
                lambda d: zeros(d, 2).scatter_reduce(0, index(d), src(d), "sum"),
                lambda d: zeros(d, 2).scatter_reduce(0, index(d), src(d), "mean"),
                lambda d: zeros(d, 2).scatter_reduce(0, index(d), src(d), "sum",
                                                     include_self=False),
                lambda d: (zeros(d, 2) + 1).scatter_reduce(0, index(d), src(d, v=1.001), "prod"),
                lambda d: zeros(d, 3, 2).scatter_reduce(
                    1, index(d, 1, n).expand(3, n), src(d, 3, n), "sum"),
                lambda d: zeros(d, 2).scatter_(0, index(d), src(d), reduce="add"),
                lambda d: zeros(d, 2).scatter_(0, index(d), 0.1, reduce="add"),
                lambda d: zeros(d, 2).index_reduce(0, index(d), src(d), "mean"),
                lambda d: zeros(d, 2).index_reduce(0, index(d), src(d), "mean",
                                                   include_self=False),
                lambda d: zeros(d, 2, 3).index_reduce(0, index(d), src(d, n, 3), "mean"),
                lambda d: zeros(d, 2, 2, 2).index_reduce(1, index(d), src(d, 2, n, 2), "mean"),
                lambda d: zeros(d, 2).index_add(0, index(d), src(d)),
                lambda d: zeros(d, 2, 3).index_add(0, index(d), src(d, n, 3)),
                lambda d: zeros(d, 3, 2).index_add(1, index(d), src(d, 3, n)),
                lambda d: zeros(d, 2, 3).index_add(0, index(d), src(d, n, 3), alpha=2),
                lambda d: zeros(d, 2, 3).index_add(0, index(d).int(), src(d, n, 3)),
                lambda d: zeros(d, 2, 2, 2).index_add(1, index(d), src(d, 2, n, 2)),
            ]
            for i, f in enumerate(cases):
                with self.subTest(dtype=dtype, case=i), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.assertSameAsCpu(f)
        with self.assertRaisesRegex(RuntimeError, "one of prod, mean, amax or amin"):
            torch.zeros(2, device="npy").index_reduce(0, index("npy"), torch.ones(n, device="npy"),
                                                      "sum")


class TestCpuAlgorithms(TestCase):
    """Where CPU's float32 answer carries its algorithm's error, npy computes CPU's algorithm
    (on every torch version), so results agree within float32's tolerances."""

    def test_matrix_exp_follows_cpu(self):
        # Norms across every degree of ATen's Taylor approximants and its scaling and
        # squaring; a batch (one degree for all) and single matrices (a degree each).
        # SciPy's float64 expm differed from CPU by 0.2% on the 5-matrix batch of norm ~27.
        # A 40x40 matrix is multiplied by BLAS on both sides, each summing in its own order,
        # which squarings amplify past float32's tolerances: it is taken below the norms
        # that need squaring.
        torch.manual_seed(0)
        for dtype in (torch.float32, torch.float64, torch.complex64):
            for norm in (1e-8, 1e-4, 0.03, 0.3, 1.0, 2.5, 27.0):
                shapes = [(5, 5), (5, 5, 5), (2, 1, 3, 3)] + [(40, 40)] * (norm < 3)
                for shape in shapes:
                    a = torch.randn(shape, dtype=dtype)
                    a *= norm / a.abs().sum(-2).amax(-1)[..., None, None]
                    # NumPy's complex product rounds otherwise than c10::complex's, and the
                    # squarings amplify it to a few 1e-6.
                    tol = dict(rtol=1e-4, atol=1e-5) if dtype.is_complex and norm > 3 else {}
                    with self.subTest(dtype=dtype, norm=norm, shape=shape):
                        self.assertEqual(torch.linalg.matrix_exp(a.to("npy")).cpu(),
                                         torch.linalg.matrix_exp(a), **tol)
        for a in (torch.zeros(0, 0), torch.zeros(3, 0, 0), torch.tensor([[2.0]])):
            self.assertEqual(torch.linalg.matrix_exp(a.to("npy")).cpu(),
                             torch.linalg.matrix_exp(a))
        nan = torch.tensor([[float("nan"), 0.0], [0.0, 1.0]])
        self.assertTrue(torch.linalg.matrix_exp(nan.to("npy")).isnan().all())
        with self.assertRaisesRegex(RuntimeError, "square"):
            torch.linalg.matrix_exp(torch.ones(2, 3, device="npy"))

    def test_antialiased_interpolation(self):
        # _upsample_bilinear2d_aa and _upsample_bicubic2d_aa, forward and backward, down and
        # up, with sizes and scale factors, and channels-last kept as CPU keeps it.
        torch.manual_seed(0)
        x = torch.randn(2, 3, 7, 9)
        cases = [dict(size=s) for s in ((4, 5), (12, 13), (7, 4), (1, 1))]
        cases += [dict(scale_factor=f) for f in (0.3, 1.7)]
        for mode, align, layout, case in itertools.product(
                ("bilinear", "bicubic"), (False, True),
                (torch.contiguous_format, torch.channels_last), cases):
            def run(d, mode=mode, align=align, layout=layout, case=case):
                xi = x.clone(memory_format=layout).to(d).requires_grad_()
                y = F.interpolate(xi, mode=mode, antialias=True, align_corners=align, **case)
                y.backward(torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(d))
                return y, xi.grad

            with self.subTest(mode=mode, align=align, layout=layout, **case):
                (y, g), (yn, gn) = run("cpu"), run("npy")
                self.assertEqual(yn.cpu(), y)
                self.assertEqual(yn.stride(), y.stride())
                self.assertEqual(gn.cpu(), g)
        with self.assertRaisesRegex(NotImplementedError, "floating-point"):
            F.interpolate(torch.ones(1, 1, 4, 4, dtype=torch.uint8, device="npy"), size=(2, 2),
                          mode="bilinear", antialias=True)


if __name__ == "__main__":
    run_tests()
