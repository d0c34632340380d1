# Owner(s): ["module: PrivateUse1"]
"""View operators on payload tensors: same values and metadata as CPU, writes shared."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference

reference.setup()

VIEWS = {
    "view": lambda t: t.view(4, 6),
    "t": lambda t: t[0].t(),
    "transpose": lambda t: t.transpose(0, 2),
    "permute": lambda t: t.permute(2, 0, 1),
    "slice": lambda t: t[:, 1:3, ::2],
    "select": lambda t: t[1],
    "select_last_dim": lambda t: t[..., 2],
    "expand": lambda t: t[:, :1].expand(2, 5, 4),
    "as_strided": lambda t: t.as_strided((3, 2), (4, 5), 2),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "squeeze": lambda t: t[:, :1].squeeze(1),
    "diagonal": lambda t: t.diagonal(0, 1, 2),
    "view_of_view": lambda t: t.transpose(1, 2)[1:, 2:].unsqueeze(0),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "narrow": lambda t: t.narrow(1, 1, 2),
}


def _base():
    return torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)


class TestViews(TestCase):
    def test_metadata_and_values(self):
        for name, fn in VIEWS.items():
            with self.subTest(view=name):
                cpu = fn(_base())
                dev = fn(_base().to("ref"))
                self.assertIs(type(dev), torch.Tensor)
                self.assertEqual(dev.shape, cpu.shape)
                self.assertEqual(dev.stride(), cpu.stride())
                self.assertEqual(dev.storage_offset(), cpu.storage_offset())
                self.assertTrue(dev._is_view())
                self.assertEqual(dev.cpu(), cpu)

    def test_multi_output_views(self):
        base = _base()
        for name, fn in {
            "split": lambda t: t.split(1, dim=1),
            "unbind": lambda t: t.unbind(2),
            "chunk": lambda t: t.chunk(2, dim=2),
        }.items():
            with self.subTest(view=name):
                for cpu, dev in zip(fn(base), fn(base.to("ref")), strict=True):
                    self.assertEqual(dev.stride(), cpu.stride())
                    self.assertEqual(dev.storage_offset(), cpu.storage_offset())
                    self.assertEqual(dev.cpu(), cpu)

    def test_write_through_view_shows_in_base(self):
        for name, fn in VIEWS.items():
            if name in ("expand", "unfold"):
                continue  # overlapping elements: in-place writes are not defined on CPU either
            with self.subTest(view=name):
                cpu_base, dev_base = _base(), _base().to("ref")
                fn(cpu_base).mul_(10)
                fn(dev_base).mul_(10)
                self.assertEqual(dev_base.cpu(), cpu_base)

    def test_write_to_base_shows_in_view(self):
        dev_base = _base().to("ref")
        view = dev_base.transpose(0, 2)[1]
        dev_base.add_(1)
        self.assertEqual(view.cpu(), (_base() + 1).transpose(0, 2)[1])
        dev_base.zero_()
        self.assertEqual(view.cpu(), torch.zeros(3, 2))

    def test_ops_on_views(self):
        cpu = _base()
        dev = cpu.to("ref")
        self.assertEqual((dev.transpose(1, 2) + 1).cpu(), cpu.transpose(1, 2) + 1)
        self.assertEqual((dev[0] @ dev[1].t()).cpu(), cpu[0] @ cpu[1].t())
        self.assertEqual(dev[:, 1].sum(1).cpu(), cpu[:, 1].sum(1))

    def test_direct_metadata_edge_cases(self):
        # The common view operators compute their metadata in C++ without the meta kernel;
        # these are the arguments where that computation could drift from torch's.
        cases = {
            "view_infer": lambda t: t.view(-1, 4),
            "view_of_slice": lambda t: t[:, 1:].view(2, 8),
            "view_scalar": lambda t: t[0, 0, 0].view(1, 1),
            "t_1d": lambda t: t[0, 0].t(),
            "transpose_negative": lambda t: t.transpose(-1, 0),
            "transpose_same": lambda t: t.transpose(1, 1),
            "permute_negative": lambda t: t.permute(-1, 0, -2),
            "select_negative": lambda t: t.select(-1, -1),
            "slice_clamped": lambda t: t[:, -10:10],
            "slice_empty": lambda t: t[:, 2:1],
            "slice_step": lambda t: t[..., 1::3],
            "slice_of_select": lambda t: t[1][:, 1:][1:],
            "expand_keep": lambda t: t[:, :1].expand(-1, 3, -1),
            "expand_new_dims": lambda t: t[0, 0].expand(2, 3, 4),
            "unsqueeze_end": lambda t: t.unsqueeze(-1),
            "unsqueeze_negative": lambda t: t[0].unsqueeze(-3),
            "squeeze_all": lambda t: t[:1, :, :1].squeeze(),
            "squeeze_noop": lambda t: t.squeeze(1),
            "squeeze_scalar": lambda t: t[0, 0, 0].squeeze(),
            "as_strided_offset": lambda t: t[1].as_strided((2, 2), (1, 3)),
            "as_strided_empty": lambda t: t.as_strided((0, 3), (1, 1), 30),
            "diagonal_offset": lambda t: t.diagonal(1, 1, 2),
            "diagonal_negative": lambda t: t.diagonal(-1, -1, 1),
            "diagonal_out_of_range": lambda t: t.diagonal(5),
            "detach": lambda t: t[1].detach(),
            "alias": lambda t: torch.ops.aten.alias(t[:, 1]),
        }
        for name, fn in cases.items():
            with self.subTest(view=name):
                cpu = fn(_base())
                dev = fn(_base().to("ref"))
                self.assertEqual(
                    (dev.shape, dev.stride(), dev.storage_offset()),
                    (cpu.shape, cpu.stride(), cpu.storage_offset()),
                )
                self.assertEqual(dev.cpu(), cpu)

    def test_direct_metadata_errors_match_cpu(self):
        # Invalid arguments take the meta kernel's path, which raises torch's own errors.
        cases = {
            "view_incompatible": lambda t: t.transpose(0, 2).view(-1),
            "view_bad_size": lambda t: t.view(5, 5),
            "transpose_dim": lambda t: t.transpose(0, 3),
            "permute_repeated": lambda t: t.permute(0, 0, 1),
            "permute_length": lambda t: t.permute(0, 1),
            "select_index": lambda t: t.select(1, 3),
            "select_scalar": lambda t: t[0, 0, 0].select(0, 0),
            "slice_step": lambda t: torch.ops.aten.slice(t, 0, 0, 2, 0),
            "expand_shrink": lambda t: t.expand(2, 2, 4),
            "unsqueeze_dim": lambda t: t.unsqueeze(4),
            "diagonal_same_dims": lambda t: t.diagonal(0, 1, 1),
            "t_3d": lambda t: t.t(),
        }
        for name, fn in cases.items():
            with self.subTest(view=name):
                with self.assertRaises(Exception) as cpu_error:
                    fn(_base())
                with self.assertRaises(type(cpu_error.exception)):
                    fn(_base().to("ref"))

    def test_views_keep_conjugate_and_negative_bits(self):
        x = torch.tensor([[1 + 2j, 3 - 4j], [5 + 6j, -7j]])
        cases = {
            "conj": lambda t: t.conj(),
            "conj, slice": lambda t: t.conj()[1:],
            "conj, t": lambda t: t.conj().t(),
            "conj, detach": lambda t: t.conj().detach(),
            "conj, view": lambda t: t.conj().view(4),
            "conj, imag": lambda t: t.conj().imag,
            "neg view, select": lambda t: torch._neg_view(t.real)[0],
        }
        for name, fn in cases.items():
            with self.subTest(name):
                expected, out = fn(x), fn(x.to("ref"))
                self.assertEqual(out.is_conj(), expected.is_conj())
                self.assertEqual(out.is_neg(), expected.is_neg())
                self.assertEqual(out.cpu(), expected)

    def test_negative_view_of_an_empty_bool_tensor_reads_as_on_cpu(self):
        # CPU resolves an empty bool negative view without negating (fuzz seed 260); a
        # non-empty one raises CPU's error.
        for shape in ((0, 2), (2,)):
            with self.subTest(shape):
                x = torch.zeros(shape, dtype=torch.bool)
                view, out = torch._neg_view(x), torch._neg_view(x.to("ref"))
                if x.numel():  # NotImplementedError from torch 2.7, RuntimeError before
                    with self.assertRaisesRegex(RuntimeError, "neg_cpu"):
                        view.resolve_neg()
                    with self.assertRaisesRegex(RuntimeError, "neg_cpu"):
                        out.cpu()
                else:
                    self.assertEqual(out.cpu().resolve_neg(), view.resolve_neg())

    def test_composite_views_keep_autograd(self):
        # narrow and chunk decompose (to slice, split) under autograd, as on CPU.
        x = torch.randn(6, 4)
        for name, fn in {
            "narrow": lambda t: t.narrow(0, 1, 3),
            "chunk": lambda t: t.chunk(3, 1)[1],
        }.items():
            with self.subTest(name):
                xd = x.to("ref").requires_grad_()
                xc = x.clone().requires_grad_()
                (fn(xd) * 2).sum().backward()
                (fn(xc) * 2).sum().backward()
                self.assertEqual(xd.grad.cpu(), xc.grad)

    def test_reshape_and_contiguous(self):
        cpu = _base().transpose(0, 2)
        dev = _base().to("ref").transpose(0, 2)
        self.assertEqual(dev.reshape(-1).cpu(), cpu.reshape(-1))
        c = dev.contiguous()
        self.assertTrue(c.is_contiguous())
        self.assertEqual(c.stride(), cpu.contiguous().stride())
        self.assertEqual(c.cpu(), cpu)


class TestAliasesAndResize(TestCase):
    """out= and resize_ on a tensor that shares its payload, as on CPU (issue 13)."""

    def test_out_on_an_alias_keeps_the_other_alias(self):
        for n in (6, 4_000_000):
            with self.subTest(n=n):
                a = torch.arange(n, dtype=torch.float32, device="ref")
                b = a.detach()
                torch.neg(torch.ones(0, device="ref"), out=b)
                self.assertEqual(b.shape, (0,))
                self.assertEqual(a.shape, (n,))
                self.assertEqual(a.sum().item(), torch.arange(n, dtype=torch.float32).sum().item())

    def test_out_that_grows_an_alias(self):
        for device in ("cpu", "ref"):
            with self.subTest(device=device):
                a = torch.arange(3.0, device=device)
                b = a.detach()
                with self.assertWarnsRegex(UserWarning, "resized"):
                    torch.add(torch.ones(5, device=device), 1, out=b)
                self.assertEqual(b.cpu(), torch.full((5,), 2.0))
                # The elements a reads are those of the grown data, as on CPU.
                self.assertEqual(a.cpu(), torch.full((3,), 2.0))

    def test_resize_keeps_data_and_aliases(self):
        for device in ("cpu", "ref"):
            with self.subTest(device=device):
                x = torch.tensor([1.0, 2.0, 3.0], device=device)
                alias = x.view(3)
                x.resize_(2)
                self.assertEqual(x.cpu(), torch.tensor([1.0, 2.0]))
                self.assertEqual(alias.cpu(), torch.tensor([1.0, 2.0, 3.0]))
                x.resize_(3)
                self.assertEqual(x.cpu(), torch.tensor([1.0, 2.0, 3.0]))
                x.resize_(2, 2)
                self.assertEqual(x.stride(), (2, 1))
                self.assertEqual(x.flatten()[:3].cpu(), torch.tensor([1.0, 2.0, 3.0]))
                x.fill_(7.0)
                self.assertEqual(alias.cpu(), torch.full((3,), 7.0))
                b = x.detach()
                b.resize_(0)
                self.assertEqual(x.sum().item(), 28.0)

    def test_resize_errors(self):
        x = torch.ones(3, device="ref")
        with self.assertRaisesRegex(RuntimeError, "negative dimension -1"):
            x.resize_(-1)

    def test_element_size_view_and_base_do_not_grow_apart(self):
        """CPU grows the storage a complex tensor and its real view share; a payload that
        grows is a new one, which would end the sharing: refused while both live (fuzz
        seed 5189, a sum.out into a resized .real view)."""
        shared = (
            r"cannot resize a tensor on ref:0 from \[\] to \[2, 2\]: its payload shares "
            r"memory with another tensor's \(an element-size view and its base: .*\), and a "
            r"grown payload would no longer share it \(CPU grows the storage both read\). "
            r"Expected a tensor that has room for 4 elements, but this one has room for 2"
        )
        z = torch.tensor(1 + 2j, dtype=torch.complex64, device="ref")
        x = torch.arange(12.0).view(2, 3, 2).to("ref")
        with self.assertRaisesRegex(RuntimeError, shared):
            torch.sum(x, 1, out=z.real)
        self.assertEqual(z.cpu(), torch.tensor(1 + 2j))
        c = torch.zeros(2, dtype=torch.complex64, device="ref")
        r = torch.view_as_real(c)
        with self.assertRaisesRegex(RuntimeError, "cannot resize a tensor on ref:0 from"):
            c.resize_(4)
        # Where the elements fit, the view writes into its base, as on CPU.
        torch.sum(x, (0, 1, 2), out=z.real)
        self.assertEqual(z.cpu(), torch.tensor(66 + 2j))
        # Sharing is transitive: a view of a view reads the first base's memory, also where
        # nothing keeps the view in between alive (inference mode tracks no view bases).
        with torch.inference_mode():
            w = torch.zeros(2, dtype=torch.complex64, device="ref")
            again = torch.view_as_complex(torch.view_as_real(w))
            with self.assertRaisesRegex(RuntimeError, "cannot resize a tensor on ref:0 from"):
                again.resize_(4)
        # Once the view is gone, the base grows as CPU's does, keeping its elements.
        r[0, 0] = 5.0
        del r
        c.resize_(4)
        self.assertEqual(c[:2].cpu(), torch.tensor([5 + 0j, 0j]))


class TestInplaceViews(TestCase):
    """In-place view operators change metadata only, with CPU's checks (issue 13)."""

    def test_on_views_and_bases(self):
        cases = {
            "unsqueeze_": lambda t: t[0].unsqueeze_(0),
            "t_": lambda t: t[1:].t_(),
            "transpose_": lambda t: t[:, 1:].transpose_(0, 1),
            "squeeze_": lambda t: t[0:1].squeeze_(),
            "squeeze_dim": lambda t: t[0:1].squeeze_(0),
            "swapdims_": lambda t: t[1:].swapdims_(0, 1),
            "as_strided_": lambda t: t[1:].as_strided_((2, 2), (1, 2), 1),
        }
        for name, fn in cases.items():
            with self.subTest(name):
                cpu = torch.arange(12.0).reshape(3, 4)
                dev = cpu.to("ref")
                expected, got = fn(cpu), fn(dev)
                self.assertEqual(got.shape, expected.shape)
                self.assertEqual(got.stride(), expected.stride())
                self.assertEqual(got.storage_offset(), expected.storage_offset())
                self.assertEqual(got.cpu(), expected)
                got.mul_(-1)  # still a view of the base
                expected.mul_(-1)
                self.assertEqual(dev.cpu(), cpu)

    def test_invalid_requests_raise(self):
        for device in ("cpu", "ref"):
            with self.subTest(device=device):
                with self.assertRaisesRegex(Exception, "t_.* expects a tensor with <= 2 dim"):
                    torch.zeros(1, 5, 3, device=device).t_()
                with self.assertRaisesRegex(
                    RuntimeError, r"number of sizes provided \(2\) must be greater or equal"
                ):
                    torch.zeros(1, 5, 3, device=device).expand(5, 3)
                with self.assertRaisesRegex(Exception, "out of bounds for storage"):
                    torch.zeros(4, device=device).as_strided_((3,), (2,))

    def test_view_as_another_dtype_is_an_error(self):
        x = torch.ones(4, device="ref")
        self.assertEqual(x.view(torch.float32).cpu(), torch.ones(4))
        with self.assertRaisesRegex(
            RuntimeError,
            r"aten::view.dtype: cannot view a tensor on ref:0 of dtype Float as Int: its data "
            r"is a Python payload",
        ):
            x.view(torch.int32)


if __name__ == "__main__":
    run_tests()
