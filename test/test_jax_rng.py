# Owner(s): ["module: PrivateUse1"]
"""Random numbers on ``jax``: a ``torch.Generator`` over JAX PRNG keys."""

import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

try:
    import jax
except ImportError:
    jax = None

if jax is not None:
    from torch_acc.backends import jax as jax_backend

    jax_backend.setup()


@unittest.skipIf(jax is None, "JAX is not installed (pip install torch_acc[jax])")
class TestJaxRandom(TestCase):
    def test_manual_seed_repeats(self):
        torch.manual_seed(3)
        a = torch.rand(5, device="jax")
        b = torch.randn(5, device="jax")
        torch.manual_seed(3)
        self.assertEqual(torch.rand(5, device="jax").cpu(), a.cpu(), atol=0, rtol=0)
        self.assertEqual(torch.randn(5, device="jax").cpu(), b.cpu(), atol=0, rtol=0)
        self.assertNotEqual(a.cpu(), torch.rand(5, device="jax").cpu())

    def test_get_and_set_state(self):
        state = torch.jax.get_rng_state()
        self.assertEqual(state.dtype, torch.uint8)
        a = torch.rand(4, device="jax")
        torch.jax.set_rng_state(state)
        self.assertEqual(torch.rand(4, device="jax").cpu(), a.cpu(), atol=0, rtol=0)

    def test_fork_rng(self):
        torch.manual_seed(0)
        with torch.random.fork_rng(device_type="jax"):
            inside = torch.rand(3, device="jax")
        after = torch.rand(3, device="jax")
        self.assertEqual(inside.cpu(), after.cpu(), atol=0, rtol=0)

    def test_explicit_generator(self):
        g = torch.Generator(device="jax")
        g.manual_seed(11)
        self.assertEqual(g.initial_seed(), 11)
        a = torch.empty(6, device="jax").uniform_(generator=g)
        g.manual_seed(11)
        b = torch.empty(6, device="jax").uniform_(generator=g)
        self.assertEqual(a.cpu(), b.cpu(), atol=0, rtol=0)

    def test_distributions(self):
        torch.manual_seed(1)
        u = torch.empty(20000, device="jax").uniform_(2.0, 4.0).cpu()
        self.assertTrue(bool(((u >= 2) & (u < 4)).all()))
        self.assertEqual(u.mean().item(), 3.0, atol=0.05, rtol=0)
        n = torch.empty(20000, dtype=torch.float64, device="jax").normal_(1.0, 2.0).cpu()
        self.assertEqual(n.dtype, torch.float64)
        self.assertEqual(n.std().item(), 2.0, atol=0.05, rtol=0)
        b = torch.empty(20000, device="jax").bernoulli_(0.25).cpu()
        self.assertEqual(b.mean().item(), 0.25, atol=0.02, rtol=0)
        r = torch.randint(3, 7, (1000,), device="jax").cpu()
        self.assertEqual(set(r.tolist()), {3, 4, 5, 6})
        p = torch.randperm(10, device="jax").cpu()
        self.assertEqual(sorted(p.tolist()), list(range(10)))

    def test_random_into_a_view_writes_the_base(self):
        a = torch.zeros(4, 4, device="jax")
        a[1].normal_()
        cpu = a.cpu()
        self.assertTrue(bool((cpu[1] != 0).all()))
        self.assertTrue(bool((cpu[[0, 2, 3]] == 0).all()))

    def test_dropout(self):
        torch.manual_seed(0)
        x = torch.ones(1000, device="jax")
        y = torch.nn.functional.dropout(x, 0.5).cpu()
        self.assertEqual(set(y.unique().tolist()), {0.0, 2.0})
        self.assertEqual((y == 0).float().mean().item(), 0.5, atol=0.06, rtol=0)


if __name__ == "__main__":
    run_tests()
