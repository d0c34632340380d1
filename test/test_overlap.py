# Owner(s): ["module: PrivateUse1"]
"""Writes into a tensor that shares elements with an input: CPU's answer or CPU's error.

TensorIterator's operators refuse a partial overlap between the written tensor and an input;
mm accepts it and, where its BLAS reads the inputs first, computes what a payload kernel does; a
reduction accepts it but clears its output first, so that its result depends on the order it
writes: the device refuses that one, with an error that says why. The bridge asks CPU's
kernel, on stand-ins that overlap as the payloads do, which applies.
"""

import itertools
import warnings

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference

reference.setup()

OVERLAP = "some elements of the input tensor .* refer to a single memory location"
ORDER = OVERLAP + r" \(CPU computes this, but its result depends on the order"
RESIZED = OVERLAP.replace(" refer", r"( \(as resized to fit the result\))? refer") + (
    r" \(CPU computes this, but its result (depends|can depend) on the order"
)

ALLOWED, REFUSED, ORDER_DEPENDENT = "allowed", "refused", "order-dependent"
#: Allowed where CPU's answer equals its answer on clones of the inputs, else order-dependent.
CPU_DECIDES = "as CPU decides"


def _sum_partial(dev):
    x = torch.arange(12.0, device=dev).reshape(3, 4)
    return x, lambda: torch.sum(x, 0, out=x[0])


def _sum_full(dev):
    x = torch.arange(12.0, device=dev).reshape(3, 4)
    return x, lambda: torch.sum(x, 0, keepdim=True, out=x[:1])


# mm reads its inputs as a whole, through BLAS: whether CPU's answer depends on the order it
# writes is BLAS's (one that packs its inputs first reads them as they were; one that clears
# its output first does not), so these cases take CPU's answer on clones of the inputs as the
# order-independent one. ``fresh`` clones them.


def _mm_into_self(dev, fresh=False):
    a = torch.arange(4.0, device=dev).reshape(2, 2)
    x = a.clone() if fresh else a
    return a, lambda: torch.mm(x, x, out=a)


def _mm_into_other(dev, fresh=False):
    a = torch.arange(4.0, device=dev).reshape(2, 2)
    b = torch.ones(2, 2, device=dev)
    x = b.clone() if fresh else b
    return b, lambda: torch.mm(a, x, out=b)


def _mm_partial(dev, fresh=False):
    a = torch.arange(8.0, device=dev)
    ones = torch.ones(2, 2, device=dev)
    x = a[:4].clone() if fresh else a[:4]
    return a, lambda: torch.mm(x.view(2, 2), ones, out=a[2:6].view(2, 2))


def _mm_into_transpose(dev, fresh=False):
    a = torch.arange(4.0, device=dev).reshape(2, 2)
    ones = torch.ones(2, 2, device=dev)
    x = a.clone() if fresh else a
    return a, lambda: torch.mm(x, ones, out=a.t())


def _add_partial(dev):
    x = torch.arange(6.0, device=dev)
    return x, lambda: torch.add(x[:4], 1, out=x[2:])


def _add_full(dev):
    x = torch.arange(6.0, device=dev)
    return x, lambda: torch.add(x, 1, out=x)


def _add_transposed(dev):
    x = torch.arange(4.0, device=dev).reshape(2, 2)
    return x, lambda: torch.add(x, 1, out=x.t())


def _mul_inplace_partial(dev):
    x = torch.arange(6.0, device=dev)
    return x, lambda: x[:4].mul_(x[2:])


def _mul_inplace_self(dev):
    x = torch.arange(6.0, device=dev)
    return x, lambda: x.mul_(x)


def _masked_fill_mask_overlaps(dev):
    x = torch.tensor([True, False, False], device=dev)
    return x, lambda: x.masked_fill_(x[:1], True)  # fuzz seed 173


def _copy_partial(dev):
    x = torch.arange(6, device=dev).reshape(3, 2)
    return x, lambda: x.copy_(x[2:])  # broadcast from its own last row (fuzz seed 1267)


def _copy_interleaved(dev):
    x = torch.arange(8.0, device=dev)
    return x, lambda: x[::2].copy_(x[1::2])


def _copy_shifted_columns(dev, fresh=False):
    x = torch.arange(6.0, device=dev).reshape(2, 3)
    src = x[:, :2].clone() if fresh else x[:, :2]
    return x, lambda: x[:, 1:].copy_(src)  # neither layout is dense: CPU copies in its order


def _mul_into_an_expanded_input(dev, fresh=False):
    x = torch.arange(1.0, 5.0, device=dev)
    src = x[:2].clone() if fresh else x[:2]
    return x, lambda: torch.mul(src.expand(2, 2).t(), 3, out=x.view(2, 2))


CASES = {
    "sum.out partial": (_sum_partial, ORDER_DEPENDENT),
    "sum.out full": (_sum_full, ORDER_DEPENDENT),
    "mm.out into self": (_mm_into_self, CPU_DECIDES),
    "mm.out into other": (_mm_into_other, CPU_DECIDES),
    "mm.out partial": (_mm_partial, CPU_DECIDES),
    "mm.out into a transpose": (_mm_into_transpose, CPU_DECIDES),
    "add.out partial": (_add_partial, REFUSED),
    "add.out full": (_add_full, ALLOWED),
    "add.out into a transpose": (_add_transposed, REFUSED),
    "mul_ partial": (_mul_inplace_partial, REFUSED),
    "mul_ self": (_mul_inplace_self, ALLOWED),
    "masked_fill_ with a mask in self": (_masked_fill_mask_overlaps, REFUSED),
    "copy_ partial": (_copy_partial, REFUSED),
    "copy_ interleaved": (_copy_interleaved, ALLOWED),
    "copy_ between layouts CPU cannot compare": (_copy_shifted_columns, CPU_DECIDES),
    "mul.out from an expanded view of out": (_mul_into_an_expanded_input, CPU_DECIDES),
}

#: CPU's overlap check sees the out= tensor before it is resized; the elements it then writes
#: are read too, in the order CPU's loops write them (fuzz seeds 376, 989, 1711, 2616).
RESIZED_CASES = {
    "neg.out into a view that grows over self": lambda x: torch.neg(
        x, out=x[None, ..., -1]
    ),
    "mul.out into the base of an expanded input": lambda x: torch.mul(
        x[0, 0].expand(3, 2), 2, out=x[0, 0]
    ),
    "sum.out into an unfolded view of self": lambda x: torch.sum(
        x, 0, out=x.unfold(0, 1, 2)
    ),
    "neg.out into an as_strided view of self": lambda x: torch.neg(
        x, out=x.as_strided((2, 1), (2, 2), 1)
    ),
}


class TestOverlap(TestCase):
    def test_cpu_answer_or_a_clear_error(self):
        for name, (case, kind) in CASES.items():
            with self.subTest(name):
                cpu_base, cpu_call = case("cpu")
                dev_base, dev_call = case("ref")
                if kind == CPU_DECIDES:
                    fresh_base, fresh_call = case("cpu", fresh=True)
                    fresh_call()
                    cpu_call()
                    kind = ALLOWED if torch.equal(cpu_base, fresh_base) else ORDER_DEPENDENT
                    cpu_base, cpu_call = case("cpu")
                if kind == ALLOWED:
                    expected = cpu_call()
                    self.assertEqual(dev_call().cpu(), expected)
                    self.assertEqual(dev_base.cpu(), cpu_base)
                    continue
                if kind == REFUSED:
                    with self.assertRaisesRegex(RuntimeError, OVERLAP):
                        cpu_call()
                else:
                    cpu_call()
                with self.assertRaisesRegex(
                    RuntimeError, ORDER if kind == ORDER_DEPENDENT else OVERLAP
                ):
                    dev_call()
                # Nothing was written before the error.
                self.assertEqual(dev_base.cpu(), case("cpu")[0])

    def test_cpu_is_asked_each_question(self):
        # The answers are remembered by operator, layouts and the other arguments' values:
        # multiplying by one reads the written elements back unchanged, by two it does not.
        for factor, kind in ((1.0, ALLOWED), (2.0, ORDER_DEPENDENT), (1.0, ALLOWED)):
            with self.subTest(factor=factor):
                results = {}
                for dev in ("cpu", "ref"):
                    x = torch.arange(1.0, 5.0, device=dev)
                    try:
                        torch.mul(x[:2].expand(2, 2), factor, out=x.view(2, 2))
                    except RuntimeError as e:
                        results[dev] = e
                    else:
                        results[dev] = x.cpu()
                if kind == ALLOWED:
                    self.assertEqual(results["ref"], results["cpu"])
                else:
                    self.assertIsInstance(results["cpu"], torch.Tensor)
                    self.assertRegex(str(results["ref"]), ORDER)

    def test_out_resized_over_its_input(self):
        for name, call in RESIZED_CASES.items():
            with self.subTest(name), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "An output ... was resized"
                call(torch.arange(18.0).reshape(3, 3, 2))  # CPU computes, in its order
                with self.assertRaisesRegex(RuntimeError, RESIZED):
                    call(torch.arange(18.0, device="ref").reshape(3, 3, 2))

    def test_inplace_into_a_view_with_an_index_of_size_one(self):
        # index_add_ into a strided view reaches the fallback as index_add.out(self, out=self);
        # CPU is asked on stand-ins whose index, filled with ones, is out of range for a
        # dimension of size 1: it is asked again with zeros, not refused (fuzz seeds 4425,
        # 5641).
        def chunk(d):
            x = torch.arange(12.0, device=d).reshape(3, 2, 2)
            x.chunk(2, -1)[0].index_add_(-1, torch.tensor([0], device=d),
                                         torch.ones(3, 2, 1, device=d))
            return x

        def diagonal(d):
            x = torch.arange(12.0, device=d).reshape(1, 4, 3)
            x.diagonal(1, -3, -1).index_add_(1, torch.tensor([0, 0], device=d),
                                             torch.ones(4, 2, device=d))
            return x

        for f in (chunk, diagonal):
            self.assertEqual(f("ref").cpu(), f("cpu"))

    def test_masked_fill_into_an_expanded_tensor(self):
        # CPU warns and writes a shared element where any of its positions is masked (fuzz
        # seed 3298); copying a functional result into it would be refused.
        masks = [torch.tensor(True), torch.tensor([True, False]),
                 torch.tensor([[True], [False], [False]]),
                 torch.tensor([[[True, False]], [[False, False]], [[False, True]]])]
        for mask, value in itertools.product(masks, (0.5, torch.tensor(0.5))):
            results = {}
            for dev in ("cpu", "ref"):
                base = torch.arange(3.0, device=dev).reshape(3, 1, 1)
                v = value.to(dev) if isinstance(value, torch.Tensor) else value
                with self.assertWarnsRegex(UserWarning, "masked_fill_ on expanded tensors"):
                    base.expand(3, 3, 2).masked_fill_(mask.to(dev), v)
                results[dev] = base.cpu()
            self.assertEqual(results["ref"], results["cpu"])

    def test_out_resized_from_an_expanded_tensor(self):
        # CPU's overlap check sees an expanded out= tensor before resizing it (fuzz seed
        # 5943): refused on both, the expanded tensor's base unchanged.
        for dev in ("cpu", "ref"):
            base = torch.arange(8, dtype=torch.uint8, device=dev).view(4, 2)
            with self.assertRaisesRegex(RuntimeError, "more than one element of the written"):
                torch.mul(base, torch.ones(4, 2, dtype=torch.int64, device=dev),
                          out=base.unsqueeze(2).expand(3, 4, 2, 3))
            self.assertEqual(base.cpu(), torch.arange(8, dtype=torch.uint8).view(4, 2))

    def test_out_resized_beside_its_input(self):
        # The resized out= tensor shares the payload but none of the elements read.
        results = {}
        for dev in ("cpu", "ref"):
            x = torch.arange(8.0, device=dev)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                torch.neg(x[:2], out=x[4:5])
            results[dev] = x.cpu()
        self.assertEqual(results["ref"], results["cpu"])
        self.assertEqual(results["cpu"][4:6], torch.tensor([-0.0, -1.0]))


if __name__ == "__main__":
    run_tests()
