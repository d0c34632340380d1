# Owner(s): ["module: PrivateUse1"]
"""torch.compile on a Python backend: eager and aot_eager match eager, forward and backward;
a backend's own compiler (register_compile_backend) through backend="per_device"."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backend_registration import register_compile_backend
from torch_acc.backends import numpy as npy_backend
from torch_acc.registry import register_backend

npy_backend.setup()


class RecordingCompiler:
    """A device's compiler that records what it is given and runs the graph as it is."""

    def __init__(self):
        self.calls = []

    def __call__(self, gm, example_inputs):
        self.calls.append((gm, list(example_inputs)))
        return gm.forward


class OtherBackend:
    """The device module of a second backend, registered and never bound."""


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
            r"backend='inductor' raised:\nRuntimeError: inductor cannot compile for npy: "
            r"tensors on npy have no storage for generated code to read. Use "
            r"torch.compile\(backend='per_device'\), .* or backend='aot_eager'",
        ):
            torch.compile(lambda t: (t * 2).sum())(x)
        model = torch.nn.Linear(3, 2).to("npy")  # parameters on the device too
        with self.assertRaisesRegex(torch._dynamo.exc.BackendCompilerFailed,
                                    "inductor cannot compile for npy"):
            torch.compile(model)(torch.ones(1, 3).to("npy"))


class TestCompileBackendPerDevice(TestCase):
    def setUp(self):
        torch._dynamo.reset()
        self.npy = RecordingCompiler()
        register_compile_backend("npy", self.npy)

    def test_compiler_gets_forward_and_backward_graphs(self):
        w, b, x = _inputs()
        expected = _loss(w, b, x)
        expected.backward()
        grads = [w.grad.cpu(), b.grad.cpu()]
        w.grad = b.grad = None
        out = torch.compile(_loss, backend="per_device", fullgraph=True)(w, b, x)
        self.assertEqual(len(self.npy.calls), 1)
        gm, example_inputs = self.npy.calls[0]
        self.assertIsInstance(gm, torch.fx.GraphModule)
        self.assertIn("aten.mm", str(gm.graph))  # AOTAutograd's ATen-level graph
        self.assertEqual({t.device for t in example_inputs}, {torch.device("npy:0")})
        self.assertEqual(out.device, torch.device("npy:0"))
        self.assertEqual(out.cpu(), expected.cpu())
        out.backward()
        self.assertEqual(len(self.npy.calls), 2)  # the backward graph, when it first runs
        self.assertEqual([w.grad.cpu(), b.grad.cpu()], grads)

    def test_dynamo_graph_without_aot(self):
        register_compile_backend("npy", self.npy, aot=False)
        try:
            w, b, x = _inputs()
            expected = _loss(w, b, x)
            out = torch.compile(_loss, backend="per_device", fullgraph=True)(w, b, x)
            self.assertEqual(len(self.npy.calls), 1)
            gm, example_inputs = self.npy.calls[0]
            self.assertNotIn("aten.", str(gm.graph))  # torch-level operations
            self.assertEqual(len(example_inputs), 3)
            self.assertEqual(out.cpu(), expected.cpu())
            out.backward()  # the graph ran with autograd
            self.assertEqual(w.grad.device, torch.device("npy:0"))
        finally:
            register_compile_backend("npy", self.npy)

    def test_module_parameters(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).to("npy")
        x = torch.randn(5, 3).to("npy")
        expected = model(x).cpu()
        self.assertEqual(torch.compile(model, backend="per_device")(x).cpu(), expected)
        self.assertEqual(len(self.npy.calls), 1)

    def test_devices_do_not_mix(self):
        register_backend("other", OtherBackend())
        other = RecordingCompiler()
        register_compile_backend("other", other)
        fn = torch.compile(lambda t: (t * 2).sum(), backend="per_device")
        self.assertEqual(fn(torch.ones(3, device="npy")).cpu(), torch.tensor(6.0))
        self.assertEqual(len(self.npy.calls), 1)
        # A graph on a device without a compiler of its own runs with aot_eager.
        self.assertEqual(fn(torch.ones(3)), torch.tensor(6.0))
        self.assertEqual(len(self.npy.calls), 1)
        self.assertEqual(other.calls, [])

    def test_registration_errors(self):
        for device in ("nodev", "cuda"):
            with self.assertRaisesRegex(
                ValueError, f"cannot register a compile backend for '{device}': it is not a "
                "Python backend set up or registered in this process"
            ):
                register_compile_backend(device, self.npy)
        with self.assertRaisesRegex(
            TypeError, "cannot register a compile backend for 'npy': expected compiler_fn to "
            "be callable, but got int"
        ):
            register_compile_backend("npy", 1)
        with self.assertRaisesRegex(ValueError, r"takes a device type, but got npy:0"):
            register_compile_backend(torch.device("npy:0"), self.npy)
        register_compile_backend(torch.device("npy"), self.npy)

    def test_inductor_error_names_the_compile_backend(self):
        from torch._inductor.codegen.common import get_scheduling_for_device

        with self.assertRaisesRegex(
            RuntimeError, r"inductor cannot compile for npy: .* Use "
            r"torch.compile\(backend='per_device'\), which runs the compiler the npy backend "
            r"registers with register_compile_backend"
        ):
            get_scheduling_for_device("npy")()


if __name__ == "__main__":
    run_tests()
