# Owner(s): ["module: PrivateUse1"]
"""torch.compile on a Python backend: eager and aot_eager match eager, forward and backward;
a backend's own compiler (register_compile_backend) through backend="per_device"."""

import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc._imports import when_imported
from torch_acc.backend_registration import register_compile_backend
from torch_acc.backends import reference
from torch_acc.registry import register_backend

reference.setup()


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
    return [t.to("ref").requires_grad_(i < 2) for i, t in enumerate(cpu)]


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
        self.assertEqual(out.device, torch.device("ref:0"))
        self.assertEqual(out.cpu(), expected.cpu())
        out.backward()
        self.assertEqual(w.grad.device, torch.device("ref:0"))
        self.assertEqual([w.grad.cpu(), b.grad.cpu()], grads)

    def test_eager(self):
        self._check("eager")

    def test_aot_eager(self):
        self._check("aot_eager")

    def test_module(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        model = model.to("ref")
        x = torch.randn(5, 3).to("ref")
        expected = model(x).cpu()
        compiled = torch.compile(model, backend="aot_eager")
        self.assertEqual(compiled(x).cpu(), expected)

    def test_inductor_fails_naming_the_device(self):
        # Inductor generates code that reads storages; payload tensors have none.
        x = torch.ones(3, device="ref")
        with self.assertRaisesRegex(
            torch._dynamo.exc.BackendCompilerFailed,
            r"backend='inductor' raised:\nRuntimeError: inductor cannot compile for ref: "
            r"tensors on ref have no storage for generated code to read. Use "
            r"torch.compile\(backend='per_device'\), .* or backend='aot_eager'",
        ):
            torch.compile(lambda t: (t * 2).sum())(x)
        model = torch.nn.Linear(3, 2).to("ref")  # parameters on the device too
        with self.assertRaisesRegex(torch._dynamo.exc.BackendCompilerFailed,
                                    "inductor cannot compile for ref"):
            torch.compile(model)(torch.ones(1, 3).to("ref"))


class TestCompileBackendPerDevice(TestCase):
    def setUp(self):
        torch._dynamo.reset()
        self.ref = RecordingCompiler()
        register_compile_backend("ref", self.ref)

    def test_compiler_gets_forward_and_backward_graphs(self):
        w, b, x = _inputs()
        expected = _loss(w, b, x)
        expected.backward()
        grads = [w.grad.cpu(), b.grad.cpu()]
        w.grad = b.grad = None
        out = torch.compile(_loss, backend="per_device", fullgraph=True)(w, b, x)
        self.assertEqual(len(self.ref.calls), 1)
        gm, example_inputs = self.ref.calls[0]
        self.assertIsInstance(gm, torch.fx.GraphModule)
        self.assertIn("aten.mm", str(gm.graph))  # AOTAutograd's ATen-level graph
        self.assertEqual({t.device for t in example_inputs}, {torch.device("ref:0")})
        self.assertEqual(out.device, torch.device("ref:0"))
        self.assertEqual(out.cpu(), expected.cpu())
        out.backward()
        self.assertEqual(len(self.ref.calls), 2)  # the backward graph, when it first runs
        self.assertEqual([w.grad.cpu(), b.grad.cpu()], grads)

    def test_dynamo_graph_without_aot(self):
        register_compile_backend("ref", self.ref, aot=False)
        try:
            w, b, x = _inputs()
            expected = _loss(w, b, x)
            out = torch.compile(_loss, backend="per_device", fullgraph=True)(w, b, x)
            self.assertEqual(len(self.ref.calls), 1)
            gm, example_inputs = self.ref.calls[0]
            self.assertNotIn("aten.", str(gm.graph))  # torch-level operations
            self.assertEqual(len(example_inputs), 3)
            self.assertEqual(out.cpu(), expected.cpu())
            out.backward()  # the graph ran with autograd
            self.assertEqual(w.grad.device, torch.device("ref:0"))
        finally:
            register_compile_backend("ref", self.ref)

    def test_module_parameters(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).to("ref")
        x = torch.randn(5, 3).to("ref")
        expected = model(x).cpu()
        self.assertEqual(torch.compile(model, backend="per_device")(x).cpu(), expected)
        self.assertEqual(len(self.ref.calls), 1)

    def test_devices_do_not_mix(self):
        register_backend("other", OtherBackend())
        other = RecordingCompiler()
        register_compile_backend("other", other)
        fn = torch.compile(lambda t: (t * 2).sum(), backend="per_device")
        self.assertEqual(fn(torch.ones(3, device="ref")).cpu(), torch.tensor(6.0))
        self.assertEqual(len(self.ref.calls), 1)
        # A graph on a device without a compiler of its own runs with aot_eager.
        self.assertEqual(fn(torch.ones(3)), torch.tensor(6.0))
        self.assertEqual(len(self.ref.calls), 1)
        self.assertEqual(other.calls, [])

    def test_registration_errors(self):
        for device in ("nodev", "cuda"):
            with self.assertRaisesRegex(
                ValueError, f"cannot register a compile backend for '{device}': it is not a "
                "Python backend set up or registered in this process"
            ):
                register_compile_backend(device, self.ref)
        with self.assertRaisesRegex(
            TypeError, "cannot register a compile backend for 'ref': expected compiler_fn to "
            "be callable, but got int"
        ):
            register_compile_backend("ref", 1)
        with self.assertRaisesRegex(ValueError, r"takes a device type, but got ref:0"):
            register_compile_backend(torch.device("ref:0"), self.ref)
        register_compile_backend(torch.device("ref"), self.ref)

    def test_inductor_error_names_the_compile_backend(self):
        from torch._inductor.codegen.common import get_scheduling_for_device

        with self.assertRaisesRegex(
            RuntimeError, r"inductor cannot compile for ref: .* Use "
            r"torch.compile\(backend='per_device'\), which runs the compiler the ref backend "
            r"registers with register_compile_backend"
        ):
            get_scheduling_for_device("ref")()


_DEFERRED = """
import sys, torch
from torch_acc.backends import reference
reference.setup()
print(sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor"))))
x = torch.ones(3, device="ref")
try:
    torch.compile(lambda t: (t * 2).sum())(x)
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[1])
from torch._inductor.compile_fx import compile_fx
try:
    compile_fx(torch.fx.symbolic_trace(torch.nn.ReLU()), [x])
except RuntimeError as e:
    print(str(e).split(":")[0])
print("per_device" in torch._dynamo.list_backends())
print(torch.compile(lambda t: (t * 2).sum(), backend="per_device")(x).cpu().item())
"""


class TestDeferredRegistration(TestCase):
    """Setup leaves Dynamo and inductor unimported (they take seconds to import): what it
    registers there is registered when they are imported."""

    def test_setup_defers_dynamo_and_inductor(self):
        env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONWARNINGS": "ignore"}
        out = subprocess.run(
            [sys.executable, "-c", _DEFERRED], capture_output=True, text=True, env=env,
            check=False, timeout=600,
        )
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        self.assertEqual(
            out.stdout.splitlines(),
            [
                "[]",
                "BackendCompilerFailed RuntimeError: inductor cannot compile for ref: tensors "
                "on ref have no storage for generated code to read. Use "
                "torch.compile(backend='per_device'), which runs the compiler the ref backend "
                "registers with register_compile_backend (aot_eager where it registers none), "
                "or backend='aot_eager' (or 'eager')",
                "inductor cannot compile for ref",
                "True",
                "6.0",
            ],
        )

    def test_when_imported(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "acc_probe_a.py").write_text("VALUE = 1\n")
            (Path(tmp) / "acc_probe_b.py").write_text("VALUE = 2\n")
            sys.path.insert(0, tmp)
            try:
                seen = []
                when_imported("acc_probe_a", lambda: seen.append(sys.modules["acc_probe_a"].VALUE))
                self.assertEqual(seen, [])
                import acc_probe_a

                self.assertEqual(seen, [1])
                import acc_probe_a  # noqa: F811 - imported again: no second call

                self.assertEqual(seen, [1])
                when_imported("acc_probe_a", lambda: seen.append("now"))  # loaded: at once
                self.assertEqual(seen, [1, "now"])
                # The loader answers for the source, as inspect and tracebacks ask it.
                self.assertEqual(inspect.getsource(acc_probe_a), "VALUE = 1\n")

                def fail():
                    raise RuntimeError("registration failed")

                when_imported("acc_probe_b", fail)
                with self.assertRaisesRegex(RuntimeError, "registration failed"):
                    import acc_probe_b  # noqa: F401
            finally:
                sys.path.remove(tmp)
                sys.modules.pop("acc_probe_a", None)
                sys.modules.pop("acc_probe_b", None)


if __name__ == "__main__":
    run_tests()
