# Owner(s): ["module: PrivateUse1"]
"""Random numbers on a Python backend: generators, seeding, RNG state, random operators."""

import copy
import pickle
import subprocess
import sys
import textwrap

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference

reference.setup()


def _draws(generator=None):
    """One of every random operator the ref backend implements, as CPU tensors."""
    kw = {"device": "ref", "generator": generator}
    x = torch.empty(6, device="ref")
    return [
        torch.randn(2, 3, **kw),
        torch.rand(4, **kw),
        torch.randint(0, 100, (5,), **kw),
        torch.randperm(7, **kw),
        torch.bernoulli(torch.full((8,), 0.5, device="ref"), generator=generator),
        x.normal_(2.0, 0.5, generator=generator).clone(),
        x.uniform_(-1.0, 1.0, generator=generator).clone(),
        x.random_(10, generator=generator).clone(),
        x.bernoulli_(0.3, generator=generator).clone(),
    ]


class TestGenerator(TestCase):
    def test_generator_on_device(self):
        g = torch.Generator(device="ref")
        self.assertEqual(g.device, torch.device("ref:0"))
        self.assertEqual(g.initial_seed(), torch.Generator().initial_seed())
        self.assertEqual(g.manual_seed(7).initial_seed(), 7)

    def test_same_seed_same_numbers(self):
        g = torch.Generator(device="ref")
        first = [t.cpu() for t in _draws(g.manual_seed(123))]
        second = [t.cpu() for t in _draws(g.manual_seed(123))]
        third = [t.cpu() for t in _draws(g.manual_seed(124))]
        for a, b in zip(first, second, strict=True):
            self.assertEqual(a, b)
        self.assertNotEqual(first[0], third[0])

    def test_values_follow_the_operator(self):
        g = torch.Generator(device="ref").manual_seed(0)
        self.assertEqual(torch.randint(3, 5, (100,), device="ref", generator=g).cpu().unique(),
                         torch.tensor([3, 4]))
        self.assertEqual(torch.randperm(10, device="ref", generator=g).cpu().sort().values,
                         torch.arange(10))
        u = torch.rand(1000, device="ref", generator=g).cpu()
        self.assertTrue(((u >= 0) & (u < 1)).all())
        n = torch.randn(10000, device="ref", generator=g, dtype=torch.float64).cpu()
        self.assertLess(abs(n.mean().item()), 0.05)
        self.assertLess(abs(n.std().item() - 1), 0.05)
        self.assertEqual(torch.randn(3, device="ref", dtype=torch.float16, generator=g).dtype,
                         torch.float16)

    def test_generator_is_independent_of_default(self):
        torch.manual_seed(5)
        expected = torch.rand(3, device="ref").cpu()
        torch.manual_seed(5)
        torch.rand(3, device="ref", generator=torch.Generator(device="ref"))
        self.assertEqual(torch.rand(3, device="ref").cpu(), expected)

    def test_generator_of_another_device(self):
        with self.assertRaisesRegex(
            ValueError, r"expected a generator of ref for aten::normal_, but got a generator of cpu"
        ):
            torch.randn(2, device="ref", generator=torch.Generator())

    def test_state_round_trip(self):
        g = torch.Generator(device="ref").manual_seed(9)
        torch.rand(5, device="ref", generator=g)
        state = g.get_state()
        self.assertEqual((state.dtype, state.device), (torch.uint8, torch.device("cpu")))
        self.assertEqual(state.numel(), torch.Generator().get_state().numel())
        expected = torch.rand(5, device="ref", generator=g).cpu()
        other = torch.Generator(device="ref").set_state(state)
        self.assertEqual(other.initial_seed(), 9)
        self.assertEqual(torch.rand(5, device="ref", generator=other).cpu(), expected)

    def test_bad_state(self):
        g = torch.Generator(device="ref")
        with self.assertRaisesRegex(TypeError, "RNG state must be a torch.ByteTensor"):
            g.set_state(torch.zeros(3))
        with self.assertRaisesRegex(
            RuntimeError,
            # CPU's own message, named by the generator method that raised it.
            r"CpuGenerator.set_state\(\) raised RuntimeError: .*input RNG state size to be 3",
        ):
            g.set_state(torch.zeros(3, dtype=torch.uint8))

    def test_copy_and_pickle(self):
        g = torch.Generator(device="ref").manual_seed(11)
        torch.rand(2, device="ref", generator=g)
        for other in (copy.deepcopy(g), pickle.loads(pickle.dumps(g)), g.clone_state()):
            self.assertEqual(other.device, g.device)
            self.assertEqual(other.initial_seed(), 11)
            self.assertEqual(other.get_state(), g.get_state())
        self.assertEqual(g.get_offset(), 0)
        with self.assertRaisesRegex(ValueError, "has no offset"):
            g.set_offset(3)

    def test_dropout(self):
        x = torch.ones(1000, device="ref", requires_grad=True)
        torch.manual_seed(3)
        y = torch.nn.functional.dropout(x, 0.25)
        y.sum().backward()
        torch.manual_seed(3)
        self.assertEqual(torch.nn.functional.dropout(x, 0.25).cpu(), y.cpu())
        kept = y.detach().cpu() != 0
        self.assertEqual(y.detach().cpu()[kept], torch.full((int(kept.sum()),), 4 / 3))
        self.assertTrue(0.6 < kept.float().mean().item() < 0.9)
        self.assertEqual(x.grad.cpu(), y.detach().cpu())


class TestSeeding(TestCase):
    def test_manual_seed_seeds_the_device(self):
        torch.manual_seed(42)
        self.assertEqual(torch.ref.initial_seed(), 42)
        a = [t.cpu() for t in _draws()]
        torch.manual_seed(42)
        b = [t.cpu() for t in _draws()]
        for x, y in zip(a, b, strict=True):
            self.assertEqual(x, y)

    def test_device_module_seeding(self):
        torch.ref.manual_seed(17)
        self.assertEqual(torch.ref.initial_seed(), 17)
        self.assertEqual(torch._C._get_privateuse1_backend_name(), "ref")
        torch.ref.manual_seed_all(18)
        self.assertEqual(torch.ref.initial_seed(), 18)
        torch.ref.seed()
        seeded = torch.ref.initial_seed()
        self.assertNotEqual(seeded, 18)
        torch.ref.seed_all()
        self.assertNotEqual(torch.ref.initial_seed(), seeded)

    def test_get_set_rng_state(self):
        torch.ref.manual_seed(1)
        state = torch.ref.get_rng_state()
        self.assertEqual(torch.ref.get_rng_state("ref:0"), state)
        self.assertEqual(torch.ref.get_rng_state_all(), [state])
        expected = torch.randn(4, device="ref").cpu()
        torch.ref.set_rng_state(state)
        self.assertEqual(torch.randn(4, device="ref").cpu(), expected)
        torch.ref.set_rng_state_all([state])
        self.assertEqual(torch.randn(4, device="ref").cpu(), expected)

    def test_fork_rng_restores_state(self):
        torch.manual_seed(2)
        expected = torch.rand(3, device="ref").cpu()
        torch.manual_seed(2)
        with torch.random.fork_rng(device_type="ref"):
            torch.rand(10, device="ref")
        self.assertEqual(torch.rand(3, device="ref").cpu(), expected)


class TestBackendWithoutGenerator(TestCase):
    def test_errors_name_the_method(self):
        code = textwrap.dedent(
            """
            import torch
            from torch_acc.backend_registration import setup_privateuseone_for_python_backend
            setup_privateuseone_for_python_backend("nogen")
            torch.manual_seed(1)  # seeds every device module; nothing to seed here
            try:
                torch.Generator(device="nogen")
            except NotImplementedError as e:
                print(e.args[0].splitlines()[0])
            try:
                torch.nogen.get_rng_state()
            except NotImplementedError as e:
                print(e.args[0].splitlines()[0])
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        message = (
            "the nogen backend has no random number generator: its hooks (_DefaultHooks) "
            "define no get_new_generator(device_index)"
        )
        self.assertEqual(proc.stdout.splitlines(), [message, message])

    def test_generator_object_lacking_methods(self):
        code = textwrap.dedent(
            """
            import torch
            from torch_acc import PrivateUse1Hooks
            from torch_acc.backend_registration import setup_privateuseone_for_python_backend

            class Hooks(PrivateUse1Hooks):
                def get_new_generator(self, device_index):
                    return object()

            setup_privateuseone_for_python_backend("badgen", hook=Hooks())
            try:
                torch.Generator(device="badgen")
            except TypeError as e:
                print(e.args[0].splitlines()[0])
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(
            proc.stdout.strip(),
            "expected Hooks.get_new_generator() to return a generator with the methods "
            "manual_seed, initial_seed, get_state and set_state, but got object, which has no "
            "manual_seed",
        )


if __name__ == "__main__":
    run_tests()
