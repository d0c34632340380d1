# Owner(s): ["module: PrivateUse1"]
"""Saving and loading tensors, state dicts and modules on a Python backend."""

import collections
import copy
import io
import os
import pickle
import re
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import library
from torch_acc.backends import numpy as npy_backend

npy_backend.setup()


class NpyFormat:
    """A test backend's own payload format: the payload's NumPy ``.npy`` bytes.

    Registered for ``npy`` once (``library.impl_serialization``); while ``enabled`` is off it
    declines every payload, so that the rest of this file saves through the CPU.
    """

    MAGIC = b"\x93NUMPY"

    def __init__(self):
        self.enabled = False
        self.calls = []

    def serialize(self, payload):
        if not self.enabled:
            return None
        self.calls.append(("serialize", payload.shape))
        buf = io.BytesIO()
        np.save(buf, payload)
        return {"npy": buf.getvalue()}

    def deserialize(self, state):
        self.calls.append(("deserialize", torch.npy.current_device()))
        return np.load(io.BytesIO(state["npy"]))


FORMAT = NpyFormat()
library.impl_serialization(FORMAT.serialize, FORMAT.deserialize)


def _saved_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _run(code: str, env=None) -> subprocess.CompletedProcess:
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": "", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env
    )


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


class Rebuilt:
    """Pickles as a call of ``rebuild`` with arguments of a test's choosing: a file as a
    careless or hostile writer could make it, loadable with ``weights_only=True``."""

    def __init__(self, rebuild, *args):
        self.rebuild = rebuild
        self.args = args

    def __reduce__(self):
        return (self.rebuild, self.args)


def _crafted(*args) -> Rebuilt:
    """A file's call of the payload tensor rebuild (:func:`library._rebuild_payload_tensor`)."""
    return Rebuilt(library._rebuild_payload_tensor, *args)


def _npy_state(array) -> dict:
    buf = io.BytesIO()
    np.save(buf, array)
    return {"npy": buf.getvalue()}


class TestSaveLoad(TestCase):
    def test_tensor(self):
        x = torch.arange(6.0).reshape(2, 3).to("npy")
        for kwargs in ({}, {"weights_only": True}, {"weights_only": False}):
            y = _round_trip(x, **kwargs)
            self.assertEqual(y.device, torch.device("npy:0"))
            self.assertEqual(y.cpu(), x.cpu())

    def test_dtypes_and_views(self):
        for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
                      torch.bool):
            x = torch.arange(6).reshape(2, 3).to(dtype).to("npy")
            self.assertEqual(_round_trip(x, weights_only=True).cpu(), x.cpu())
        x = torch.arange(12.0).reshape(3, 4).to("npy")
        v = x.t()[1:]
        self.assertEqual(_round_trip(v, weights_only=True).cpu(), v.cpu())

    def test_requires_grad(self):
        x = torch.ones(3, device="npy", requires_grad=True)
        y = _round_trip(x, weights_only=True)
        self.assertTrue(y.requires_grad)
        self.assertTrue(y.is_leaf)

    def test_map_location_cpu(self):
        x = torch.arange(4.0).to("npy")
        y = _round_trip({"x": x}, map_location="cpu", weights_only=True)["x"]
        self.assertEqual(y.device, torch.device("cpu"))
        self.assertEqual(y, torch.arange(4.0))

    def test_map_location_to_device_is_an_error(self):
        # Loading onto the device goes through storages, which payload tensors cannot have:
        # load to the CPU and move the result instead.
        with self.assertRaisesRegex(
            RuntimeError, r"cannot allocate 16 bytes of storage on npy: its device data lives in "
            r"Python payloads"
        ):
            _round_trip(torch.arange(4.0), map_location="npy", weights_only=True)
        self.assertEqual(torch.npy.current_device(), 0)

    def test_state_dict(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2).to("npy")
        state = _round_trip(model.state_dict(), weights_only=True)
        self.assertEqual(set(state), {"weight", "bias"})
        other = torch.nn.Linear(3, 2).to("npy")
        other.load_state_dict(state)
        x = torch.randn(4, 3)
        self.assertEqual(other(x.to("npy")).cpu(), model(x.to("npy")).cpu())
        self.assertEqual(other.weight.device, torch.device("npy:0"))

    def test_whole_module(self):
        model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()).to("npy")
        loaded = _round_trip(model, weights_only=False)
        self.assertEqual(loaded[0].weight.device, torch.device("npy:0"))
        self.assertEqual(loaded[0].weight.cpu(), model[0].weight.cpu())

    def test_file(self):
        x = torch.arange(3.0).to("npy")
        with tempfile.NamedTemporaryFile(suffix=".pt") as f:
            torch.save(x, f.name)
            self.assertEqual(torch.load(f.name, weights_only=True).cpu(), x.cpu())

    def test_pickle_and_deepcopy(self):
        x = torch.arange(3.0).to("npy")
        for y in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
            self.assertEqual(y.device, torch.device("npy:0"))
            self.assertEqual(y.cpu(), x.cpu())
        y = copy.deepcopy(x)
        y.add_(1)
        self.assertEqual(x.cpu(), torch.arange(3.0))

    def test_load_without_backend_names_it(self):
        x = torch.arange(3.0).to("npy")
        with tempfile.NamedTemporaryFile(suffix=".pt") as f:
            torch.save(x, f.name)
            code = textwrap.dedent(
                f"""
                import torch
                try:
                    torch.load({f.name!r}, weights_only=True)
                except RuntimeError as e:
                    print(e)
                """
            )
            proc = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True,
                env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": ""},
            )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("device type at start of device string: npy", proc.stdout)


class TestCustomFormat(TestCase):
    """A backend that saves its payloads in a format of its own (impl_serialization)."""

    def setUp(self):
        FORMAT.enabled = True
        FORMAT.calls.clear()

    def tearDown(self):
        FORMAT.enabled = False

    def test_round_trip_calls_the_hooks(self):
        x = torch.arange(6.0).reshape(2, 3).to("npy")
        for kwargs in ({}, {"weights_only": True}, {"weights_only": False}):
            FORMAT.calls.clear()
            data = _saved_bytes(x)
            self.assertIn(NpyFormat.MAGIC, data)
            self.assertEqual(FORMAT.calls, [("serialize", (2, 3))])
            y = torch.load(io.BytesIO(data), **kwargs)
            self.assertEqual(FORMAT.calls, [("serialize", (2, 3)), ("deserialize", 0)])
            self.assertEqual(y.device, torch.device("npy:0"))
            self.assertEqual(y.cpu(), x.cpu())

    def test_reduce_ex_names_the_rebuild_function(self):
        x = torch.ones(2, device="npy")
        rebuild, args = x.__reduce_ex__(2)
        self.assertIs(rebuild, library._rebuild_payload_tensor)
        self.assertEqual(args[0], "npy")
        FORMAT.enabled = False
        self.assertIs(x.__reduce_ex__(2)[0], torch._utils._rebuild_device_tensor_from_cpu_tensor)
        self.assertNotIn(NpyFormat.MAGIC, _saved_bytes(x))

    def test_dtypes(self):
        for dtype in (torch.float16, torch.float64, torch.int32, torch.int64, torch.bool):
            x = torch.arange(6).reshape(2, 3).to(dtype).to("npy")
            y = _round_trip(x, weights_only=True)
            self.assertEqual(y.dtype, dtype)
            self.assertEqual(y.cpu(), x.cpu())

    def test_views_and_strides(self):
        x = torch.arange(12.0).reshape(3, 4).to("npy")
        t = x.t()  # Fortran-ordered: the .npy format keeps that order
        y = _round_trip(t, weights_only=True)
        self.assertEqual(y.cpu(), t.cpu())
        self.assertEqual(y.stride(), t.stride())
        v = x[1:, ::2]  # saved as its own values, contiguous
        y = _round_trip(v, weights_only=True)
        self.assertEqual(FORMAT.calls[-2], ("serialize", (2, 2)))
        self.assertEqual(y.cpu(), v.cpu())
        self.assertEqual(y.stride(), (2, 1))
        y.add_(1)  # the loaded tensor has a payload of its own
        self.assertEqual(x.cpu(), torch.arange(12.0).reshape(3, 4))

    def test_requires_grad(self):
        x = torch.ones(3, device="npy", requires_grad=True)
        for t in (x, x * 2):
            y = _round_trip(t, weights_only=True)
            self.assertTrue(y.requires_grad)
            self.assertTrue(y.is_leaf)
            self.assertEqual(y.cpu(), t.detach().cpu())

    def test_state_dict_and_module(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()).to("npy")
        state = _round_trip(model.state_dict(), weights_only=True)
        self.assertEqual([c[0] for c in FORMAT.calls].count("deserialize"), 2)
        self.assertEqual(state["0.weight"].cpu(), model[0].weight.cpu())
        loaded = _round_trip(model, weights_only=False)
        self.assertIsInstance(loaded[0].weight, torch.nn.Parameter)
        self.assertEqual(loaded[0].weight.device, torch.device("npy:0"))
        self.assertEqual(loaded[0].weight.cpu(), model[0].weight.cpu())

    def test_map_location_cpu(self):
        x = torch.arange(4.0).to("npy").requires_grad_()
        for location in ("cpu", torch.device("cpu"), {"npy:0": "cpu"}):
            y = _round_trip({"x": x}, map_location=location, weights_only=True)["x"]
            self.assertEqual(y.device, torch.device("cpu"))
            self.assertEqual(y, torch.arange(4.0))
            self.assertTrue(y.requires_grad)
            self.assertTrue(y.is_leaf)
        self.assertEqual(FORMAT.calls[-1][0], "deserialize")

    def test_pickle_and_deepcopy(self):
        x = torch.arange(3.0).to("npy")
        y = pickle.loads(pickle.dumps(x))
        self.assertEqual([c[0] for c in FORMAT.calls], ["serialize", "deserialize"])
        self.assertEqual(y.device, torch.device("npy:0"))
        self.assertEqual(y.cpu(), x.cpu())
        # deepcopy copies on the device (clone); nothing is serialized.
        FORMAT.calls.clear()
        y = copy.deepcopy(x)
        self.assertEqual(FORMAT.calls, [])
        y.add_(1)
        self.assertEqual(x.cpu(), torch.arange(3.0))

    def _assert_load_fails(self, crafted, error, message):
        data = _saved_bytes(crafted)
        for kwargs in ({}, {"weights_only": False}, {"map_location": "cpu"},
                       {"map_location": {"npy:0": "npy:0"}}):
            with self.subTest(kwargs=kwargs), self.assertRaisesRegex(error, message):
                torch.load(io.BytesIO(data), **kwargs)

    def test_crafted_size_larger_than_the_payload(self):
        # Loaded as it was, a (50_000_000,) tensor over 0 elements read the process's heap.
        self._assert_load_fails(
            _crafted("npy", _npy_state(np.zeros(0, np.float32)), torch.float32, (50_000_000,),
                    "npy:0", False),
            RuntimeError,
            r"cannot load a tensor saved by the npy backend in its own format: its deserialize "
            r"function \(NpyFormat.deserialize\) returned a numpy.ndarray of shape \(0,\) and "
            r"dtype float32, but the file gives shape \(50000000,\) and dtype torch.float32; "
            r"the file is damaged or was not written by torch.save",
        )

    def test_crafted_shape_with_as_many_elements(self):
        self._assert_load_fails(
            _crafted("npy", _npy_state(np.zeros((2, 3), np.float32)), torch.float32, (6,),
                    "npy:0", False),
            RuntimeError,
            r"returned a numpy.ndarray of shape \(2, 3\) and dtype float32, but the file gives "
            r"shape \(6,\) and dtype torch.float32",
        )

    def test_crafted_dtype(self):
        # float64 over an int8 payload would read eight times its bytes.
        self._assert_load_fails(
            _crafted("npy", _npy_state(np.zeros(4, np.int8)), torch.float64, (4,), "npy:0",
                    False),
            RuntimeError,
            r"returned a numpy.ndarray of shape \(4,\) and dtype int8, but the file gives "
            r"shape \(4,\) and dtype torch.float64",
        )

    def test_crafted_state_that_is_no_payload(self):
        buf = io.BytesIO()
        np.savez(buf, x=np.zeros(3))  # np.load gives an NpzFile, no array
        self._assert_load_fails(
            _crafted("npy", {"npy": buf.getvalue()}, torch.float64, (3,), "npy:0", False),
            TypeError,
            r"its deserialize function \(NpyFormat.deserialize\) returned a numpy.NpzFile, but "
            r"the file gives shape \(3,\) and dtype torch.float64",
        )

    def test_crafted_metadata(self):
        state = _npy_state(np.zeros(3, np.float32))
        for dtype, size in (("float32", (3,)), (torch.float32, (-1,)), (torch.float32, 3)):
            with self.subTest(dtype=dtype, size=size):
                self._assert_load_fails(
                    _crafted("npy", state, dtype, size, "npy:0", False),
                    RuntimeError,
                    rf"cannot load a tensor saved by the npy backend in its own format: the "
                    rf"file gives dtype {re.escape(repr(dtype))} and size "
                    rf"{re.escape(repr(size))}, but expected a torch.dtype and a tuple of "
                    r"non-negative ints",
                )

    def test_crafted_file_that_is_consistent_loads(self):
        for location in (None, "cpu"):
            y = torch.load(
                io.BytesIO(_saved_bytes(_crafted(
                    "npy", _npy_state(np.arange(6.0).reshape(2, 3)), torch.float64, [2, 3],
                    "npy:0", True,
                ))),
                map_location=location,
            )
            self.assertEqual(y.device.type, location or "npy")
            self.assertEqual(y.cpu(), torch.arange(6.0, dtype=torch.float64).reshape(2, 3))
            self.assertTrue(y.requires_grad)

    def test_crafted_cpu_copy_larger_than_its_storage(self):
        # The CPU-copy path (no impl_serialization) rebuilds a CPU tensor with torch's own
        # bounds check of its storage before copying it to the device.
        storage = torch.storage.TypedStorage(
            wrap_storage=torch.zeros(0).untyped_storage(), dtype=torch.float32, _internal=True
        )
        cpu = Rebuilt(torch._utils._rebuild_tensor_v2, storage, 0, (50_000_000,), (1,), False,
                      collections.OrderedDict())
        self._assert_load_fails(
            Rebuilt(torch._utils._rebuild_device_tensor_from_cpu_tensor, cpu, torch.float32,
                    "npy:0", False),
            RuntimeError,
            "Trying to resize storage that is not resizable",
        )

    def test_registration_errors(self):
        with self.assertRaisesRegex(TypeError, r"expected deserialize to be callable, but got "
                                               r"int \(backend npy\)"):
            library.impl_serialization(FORMAT.serialize, 1)
        with self.assertRaisesRegex(RuntimeError, "already registered"):
            library.impl_serialization(FORMAT.serialize, FORMAT.deserialize)

    def test_load_without_backend_names_it(self):
        x = torch.arange(3.0).to("npy")
        with tempfile.NamedTemporaryFile(suffix=".pt") as f:
            torch.save(x, f.name)
            # torch_acc imported, the backend not set up: every way of loading names it.
            proc = _run(
                f"""
                import torch
                from torch_acc import library
                for kwargs in ({{"weights_only": True}}, {{"weights_only": False}},
                               {{"map_location": "cpu"}}):
                    try:
                        torch.load({f.name!r}, **kwargs)
                    except RuntimeError as e:
                        print(e)
                """,
                env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
            )
            self.assertEqual(proc.returncode, 0, proc.stderr)
            lines = proc.stdout.splitlines()
            self.assertEqual(len(lines), 3, proc.stdout)
            for line in lines:
                self.assertIn(
                    "cannot load a tensor saved by the npy backend in its own format: the npy "
                    "backend is not set up in this process. Loading it, even with "
                    "map_location='cpu', needs the npy backend set up before torch.load",
                    line,
                )
            # The backend's library not imported: torch's weights-only unpickler refuses the
            # rebuild function, naming it. In-tree, `import torch` imports it, so the message
            # names the backend as above.
            rebuild = library._rebuild_payload_tensor
            proc = _run(
                f"""
                import sys
                import torch
                print({rebuild.__module__!r} in sys.modules)
                try:
                    torch.load({f.name!r}, weights_only=True)
                except Exception as e:
                    print(e)
                """
            )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        imported, message = proc.stdout.split("\n", 1)
        if imported == "True":
            self.assertIn("cannot load a tensor saved by the npy backend in its own format: the "
                          "npy backend is not set up in this process", message)
        else:
            self.assertIn(
                f"Unsupported global: GLOBAL {rebuild.__module__}.{rebuild.__qualname__}",
                message,
            )


if __name__ == "__main__":
    run_tests()
