# Owner(s): ["module: PrivateUse1"]
"""Meta and fake conversion of payload tensors (the meta_utils patch of the series)."""

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference

reference.setup()


class TestFake(TestCase):
    def test_from_tensor(self):
        t = torch.randn(3, 4).to("ref")
        mode = FakeTensorMode()
        f = mode.from_tensor(t)
        self.assertIsInstance(f, FakeTensor)
        self.assertEqual(f.device, torch.device("ref:0"))
        self.assertEqual((f.shape, f.stride(), f.dtype), (t.shape, t.stride(), t.dtype))

    def test_views_share_a_fake_storage(self):
        t = torch.randn(3, 4).to("ref")
        v = t.transpose(0, 1)[1:]
        mode = FakeTensorMode()
        ft, fv = mode.from_tensor(t), mode.from_tensor(v)
        self.assertEqual((fv.shape, fv.stride(), fv.storage_offset()), (v.shape, v.stride(), 1))
        self.assertTrue(fv._is_view())
        self.assertEqual(ft.untyped_storage()._cdata, fv.untyped_storage()._cdata)
        other = mode.from_tensor(torch.randn(3, 4).to("ref"))
        self.assertNotEqual(other.untyped_storage()._cdata, ft.untyped_storage()._cdata)

    def test_ops_on_fake_tensors(self):
        t = torch.randn(3, 4).to("ref").requires_grad_()
        with FakeTensorMode(allow_non_fake_inputs=False) as mode:
            f = mode.from_tensor(t)
            out = (f @ f.t()).relu().sum(1)
        self.assertEqual(out.shape, (3,))
        self.assertEqual(out.device, torch.device("ref:0"))
        self.assertTrue(out.requires_grad)


if __name__ == "__main__":
    run_tests()
