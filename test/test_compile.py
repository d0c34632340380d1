# Owner(s): ["module: PrivateUse1"]
"""torch.compile on a Python backend: eager and aot_eager match eager, forward and backward."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import numpy as npy_backend

npy_backend.setup()


def _loss(w, b, x):
    return ((x @ w + b).relu() * 2 - x.sum()).sum()


def _inputs():
    g = torch.Generator().manual_seed(0)
    cpu = [torch.randn(3, 2, generator=g), torch.randn(2, generator=g), torch.randn(4, 3,
                                                                                   generator=g)]
    return [t.to("npy").requires_grad_(i < 2) for i, t in enumerate(cpu)]


class TestCompile(TestCase):
    def setUp(self):
        torch._dynamo.reset()

    def _check(self, backend):
        w, b, x = _inputs()
        expected = _loss(w, b, x)
        expected.backward()
        grads = [w.grad.cpu(), b.grad.cpu()]
        w.grad = b.grad = None
        compiled = torch.compile(_loss, backend=backend, fullgraph=True)
        out = compiled(w, b, x)
        self.assertEqual(out.device, torch.device("npy:0"))
        self.assertEqual(out.cpu(), expected.cpu())
        out.backward()
        self.assertEqual(w.grad.device, torch.device("npy:0"))
        self.assertEqual([w.grad.cpu(), b.grad.cpu()], grads)

    def test_eager(self):
        self._check("eager")

    def test_aot_eager(self):
        self._check("aot_eager")

    def test_module(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        model = model.to("npy")
        x = torch.randn(5, 3).to("npy")
        expected = model(x).cpu()
        compiled = torch.compile(model, backend="aot_eager")
        self.assertEqual(compiled(x).cpu(), expected)

    def test_inductor_fails_naming_the_device(self):
        # Inductor generates code that reads storages; payload tensors have none.
        x = torch.ones(3, device="npy")
        with self.assertRaisesRegex(
            torch._dynamo.exc.BackendCompilerFailed,
            # torch 2.13 reads a storage before lowering; torch 2.6 gets to the lowering, which
            # refuses the device (and wraps the error in a LoweringException).
            r"backend='inductor' raised:\n(LoweringException: )?RuntimeError: "
            r"(inductor cannot compile for npy: )?tensors on npy have no storage",
        ):
            torch.compile(lambda t: (t * 2).sum())(x)


if __name__ == "__main__":
    run_tests()
