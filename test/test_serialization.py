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
from torch_acc.backends import reference

reference.setup()


class NpyFormat:
    """A test backend's own payload format: the payload's bytes in NumPy's ``.npy`` format.

    Registered for ``ref`` once (``library.impl_serialization``); while ``enabled`` is off it
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
        return _npy_state(payload.numpy())

    def deserialize(self, state):
        self.calls.append(("deserialize", torch.ref.current_device()))
        loaded = np.load(io.BytesIO(state["npy"]))
        # An array becomes the payload, a CPU tensor; anything else is left for the loader
        # to refuse.
        return torch.from_numpy(loaded) if isinstance(loaded, np.ndarray) else loaded


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
        x = torch.arange(6.0).reshape(2, 3).to("ref")
        for kwargs in ({}, {"weights_only": True}, {"weights_only": False}):
            y = _round_trip(x, **kwargs)
            self.assertEqual(y.device, torch.device("ref:0"))
            self.assertEqual(y.cpu(), x.cpu())

    def test_dtypes_and_views(self):
        for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
                      torch.bool):
            x = torch.arange(6).reshape(2, 3).to(dtype).to("ref")
            self.assertEqual(_round_trip(x, weights_only=True).cpu(), x.cpu())
        x = torch.arange(12.0).reshape(3, 4).to("ref")
        v = x.t()[1:]
        self.assertEqual(_round_trip(v, weights_only=True).cpu(), v.cpu())

    def test_requires_grad(self):
        x = torch.ones(3, device="ref", requires_grad=True)
        y = _round_trip(x, weights_only=True)
        self.assertTrue(y.requires_grad)
        self.assertTrue(y.is_leaf)

    def test_map_location_cpu(self):
        x = torch.arange(4.0).to("ref")
        y = _round_trip({"x": x}, map_location="cpu", weights_only=True)["x"]
        self.assertEqual(y.device, torch.device("cpu"))
        self.assertEqual(y, torch.arange(4.0))

    def test_map_location_to_device(self):
        # CPU tensors loaded onto the device, as map_location="cuda" does; tensors that shared
        # a storage share a payload.
        base = torch.arange(6.0)
        for location in ("ref", "ref:0", torch.device("ref"), {"cpu": "ref:0"},
                         lambda storage, loc: None if loc != "cpu" else storage):
            with self.subTest(location=location):
                a, b = _round_trip([base, base[2:]], map_location=location, weights_only=True)
                if callable(location):  # it keeps CPU storages on the CPU
                    self.assertEqual(a.device, torch.device("cpu"))
                    continue
                self.assertEqual(a.device, torch.device("ref:0"))
                self.assertEqual(b.cpu(), base[2:])
                self.assertEqual(b.storage_offset(), 2)
                b.add_(10)
                self.assertEqual(a.cpu(), torch.tensor([0.0, 1.0, 12.0, 13.0, 14.0, 15.0]))
        self.assertEqual(torch.ref.current_device(), 0)

    def test_state_dict(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2).to("ref")
        state = _round_trip(model.state_dict(), weights_only=True)
        self.assertEqual(set(state), {"weight", "bias"})
        other = torch.nn.Linear(3, 2).to("ref")
        other.load_state_dict(state)
        x = torch.randn(4, 3)
        self.assertEqual(other(x.to("ref")).cpu(), model(x.to("ref")).cpu())
        self.assertEqual(other.weight.device, torch.device("ref:0"))

    def test_whole_module(self):
        model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()).to("ref")
        loaded = _round_trip(model, weights_only=False)
        self.assertEqual(loaded[0].weight.device, torch.device("ref:0"))
        self.assertEqual(loaded[0].weight.cpu(), model[0].weight.cpu())

    def test_file(self):
        x = torch.arange(3.0).to("ref")
        with tempfile.NamedTemporaryFile(suffix=".pt") as f:
            torch.save(x, f.name)
            self.assertEqual(torch.load(f.name, weights_only=True).cpu(), x.cpu())

    def test_pickle_and_deepcopy(self):
        x = torch.arange(3.0).to("ref")
        for y in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
            self.assertEqual(y.device, torch.device("ref:0"))
            self.assertEqual(y.cpu(), x.cpu())
        y = copy.deepcopy(x)
        y.add_(1)
        self.assertEqual(x.cpu(), torch.arange(3.0))

    def test_load_without_backend_names_it(self):
        x = torch.arange(3.0).to("ref")
        with tempfile.NamedTemporaryFile(suffix=".pt") as f:
            torch.save([x, x[1:]], f.name)
            proc = _run(
                f"""
                import torch
                import torch_acc
                for kwargs in ({{"weights_only": True}}, {{"weights_only": False}}):
                    try:
                        torch.load({f.name!r}, **kwargs)
                    except RuntimeError as e:
                        print(e)
                # Saved through the CPU: loadable to the CPU without the backend.
                a, b = torch.load({f.name!r}, map_location="cpu")
                b.add_(1)
                print(a.device, a.tolist())
                """,
                env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
            )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertEqual(len(lines), 3, proc.stdout)
        for line in lines[:2]:
            self.assertIn(
                "cannot load data saved on ref:0: the ref backend is not set up in this "
                "process. Set it up before torch.load (the backend's setup function, or "
                "torch_acc.setup_privateuseone_for_python_backend('ref') and its kernels), or "
                "load to the CPU with map_location='cpu'",
                line,
            )
        self.assertEqual(lines[2], "cpu [0.0, 2.0, 3.0]")


class TestSharing(TestCase):
    """Tensors that share a payload are saved once and load sharing again, as CPU tensors
    that share a storage do (compared with the CPU's own round trip)."""

    def _check_like_cpu(self, make, **load_kwargs):
        cpu = make(torch.arange(24.0).reshape(4, 6))
        dev = make(torch.arange(24.0).reshape(4, 6).to("ref"))
        cpu_loaded = _round_trip(cpu, weights_only=True)
        loaded = _round_trip(dev, weights_only=True, **load_kwargs)
        for c, d in zip(cpu_loaded, loaded, strict=True):
            self.assertEqual(d.device, torch.device("ref:0"))
            self.assertEqual(d.cpu(), c)
            self.assertEqual((d.stride(), d.storage_offset()), (c.stride(), c.storage_offset()))
        # A write through the last tensor shows in every tensor that shares its memory.
        cpu_loaded[-1].fill_(-1)
        loaded[-1].fill_(-1)
        for c, d in zip(cpu_loaded, loaded, strict=True):
            self.assertEqual(d.cpu(), c)

    def test_views_share_their_base(self):
        self._check_like_cpu(lambda x: [x, x[1:], x[:, 2], x.t()[1:3, ::2]])

    def test_views_without_their_base(self):
        self._check_like_cpu(lambda x: [x[1:, 1:], x[2]])

    def test_fortran_ordered_payload(self):
        self._check_like_cpu(lambda x: [x.t().contiguous().t(), x.t().contiguous().t()[1:]])

    def test_saved_once(self):
        x = torch.randn(10_000).to("ref")
        one = len(_saved_bytes(x))
        self.assertLess(len(_saved_bytes([x, x[1:], x[::2], x.view(100, 100)])), one + 2000)

    def test_state_dict_with_tied_weights(self):
        model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
        model.to("ref")
        model[1].weight = model[0].weight
        state = _round_trip(model.state_dict(), weights_only=True)
        state["0.weight"].zero_()
        self.assertEqual(state["1.weight"].cpu(), torch.zeros(5, 3))

    def test_map_location_forms(self):
        x = torch.arange(6.0).to("ref")
        for location, device in (
            ("cpu", "cpu"), (torch.device("cpu"), "cpu"), ({"ref:0": "cpu"}, "cpu"),
            (lambda storage, loc: storage, "cpu"), ("ref", "ref:0"), ({}, "ref:0"),
            (lambda storage, loc: None, "ref:0"),
        ):
            with self.subTest(location=location):
                a, b = _round_trip([x, x[3:]], map_location=location, weights_only=True)
                self.assertEqual(a.device, torch.device(device))
                self.assertEqual(b.cpu(), torch.arange(3.0, 6.0))
                b.zero_()
                self.assertEqual(a.cpu(), torch.tensor([0.0, 1.0, 2.0, 0.0, 0.0, 0.0]))

    def test_crafted_view_beyond_its_payload(self):
        x = torch.arange(4.0).to("ref")
        rebuild, args = x[1:].__reduce_ex__(2)
        self.assertIs(rebuild, library._rebuild_payload_view)
        backend, base, dtype, size, stride, offset, requires_grad = args
        data = _saved_bytes(Rebuilt(rebuild, backend, base, dtype, (4,), stride, 1, False))
        for kwargs in ({}, {"map_location": "cpu"}):
            with self.subTest(kwargs=kwargs), self.assertRaisesRegex(
                RuntimeError, r"the file gives a view of size \(4,\), stride \(1,\) and offset 1 "
                r"that addresses 5 elements of a payload of 4; the file is damaged"
            ):
                torch.load(io.BytesIO(data), **kwargs)


class TestCustomFormat(TestCase):
    """A backend that saves its payloads in a format of its own (impl_serialization)."""

    def setUp(self):
        FORMAT.enabled = True
        FORMAT.calls.clear()

    def tearDown(self):
        FORMAT.enabled = False

    def test_round_trip_calls_the_hooks(self):
        x = torch.arange(6.0).reshape(2, 3).to("ref")
        for kwargs in ({}, {"weights_only": True}, {"weights_only": False}):
            FORMAT.calls.clear()
            data = _saved_bytes(x)
            self.assertIn(NpyFormat.MAGIC, data)
            self.assertEqual(FORMAT.calls, [("serialize", (2, 3))])
            y = torch.load(io.BytesIO(data), **kwargs)
            self.assertEqual(FORMAT.calls, [("serialize", (2, 3)), ("deserialize", 0)])
            self.assertEqual(y.device, torch.device("ref:0"))
            self.assertEqual(y.cpu(), x.cpu())

    def test_reduce_ex_names_the_rebuild_function(self):
        x = torch.ones(2, device="ref")
        rebuild, args = x.__reduce_ex__(2)
        self.assertIs(rebuild, library._rebuild_payload_view)
        self.assertEqual(args[0], "ref")
        self.assertIs(args[1].__reduce__()[0], library._rebuild_payload_tensor)
        FORMAT.enabled = False
        del args  # what stood for the payload in the last save: a new save copies again
        rebuild, args = x.__reduce_ex__(2)
        self.assertIs(rebuild, library._rebuild_payload_view)
        self.assertEqual(args[1].device, torch.device("cpu"))  # the payload's CPU copy
        self.assertNotIn(NpyFormat.MAGIC, _saved_bytes(x))

    def test_dtypes(self):
        for dtype in (torch.float16, torch.float64, torch.int32, torch.int64, torch.bool):
            x = torch.arange(6).reshape(2, 3).to(dtype).to("ref")
            y = _round_trip(x, weights_only=True)
            self.assertEqual(y.dtype, dtype)
            self.assertEqual(y.cpu(), x.cpu())

    def test_views_and_strides(self):
        x = torch.arange(12.0).reshape(3, 4).to("ref")
        t = x.t()  # Fortran-ordered: the .npy format keeps that order
        y = _round_trip(t, weights_only=True)
        self.assertEqual(y.cpu(), t.cpu())
        self.assertEqual(y.stride(), t.stride())
        FORMAT.calls.clear()
        a, b = _round_trip([x, x[1:, ::2]], weights_only=True)  # the payload, saved once
        self.assertEqual(FORMAT.calls, [("serialize", (3, 4)), ("deserialize", 0)])
        self.assertEqual(b.cpu(), x[1:, ::2].cpu())
        self.assertEqual((b.stride(), b.storage_offset()), (x[1:, ::2].stride(), 4))
        b.add_(100)  # the loaded view shares the loaded base
        self.assertEqual(a[1:, ::2].cpu(), x[1:, ::2].cpu() + 100)
        self.assertEqual(x.cpu(), torch.arange(12.0).reshape(3, 4))

    def test_requires_grad(self):
        x = torch.ones(3, device="ref", requires_grad=True)
        for t in (x, x * 2):
            y = _round_trip(t, weights_only=True)
            self.assertTrue(y.requires_grad)
            self.assertTrue(y.is_leaf)
            self.assertEqual(y.cpu(), t.detach().cpu())

    def test_state_dict_and_module(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()).to("ref")
        state = _round_trip(model.state_dict(), weights_only=True)
        self.assertEqual([c[0] for c in FORMAT.calls].count("deserialize"), 2)
        self.assertEqual(state["0.weight"].cpu(), model[0].weight.cpu())
        loaded = _round_trip(model, weights_only=False)
        self.assertIsInstance(loaded[0].weight, torch.nn.Parameter)
        self.assertEqual(loaded[0].weight.device, torch.device("ref:0"))
        self.assertEqual(loaded[0].weight.cpu(), model[0].weight.cpu())

    def test_map_location_cpu(self):
        x = torch.arange(4.0).to("ref").requires_grad_()
        for location in ("cpu", torch.device("cpu"), {"ref:0": "cpu"}):
            y = _round_trip({"x": x}, map_location=location, weights_only=True)["x"]
            self.assertEqual(y.device, torch.device("cpu"))
            self.assertEqual(y, torch.arange(4.0))
            self.assertTrue(y.requires_grad)
            self.assertTrue(y.is_leaf)
        self.assertEqual(FORMAT.calls[-1][0], "deserialize")

    def test_pickle_and_deepcopy(self):
        x = torch.arange(3.0).to("ref")
        y = pickle.loads(pickle.dumps(x))
        self.assertEqual([c[0] for c in FORMAT.calls], ["serialize", "deserialize"])
        self.assertEqual(y.device, torch.device("ref:0"))
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
                       {"map_location": {"ref:0": "ref:0"}}):
            with self.subTest(kwargs=kwargs), self.assertRaisesRegex(error, message):
                torch.load(io.BytesIO(data), **kwargs)

    def test_crafted_size_larger_than_the_payload(self):
        # Loaded as it was, a (50_000_000,) tensor over 0 elements read the process's heap.
        self._assert_load_fails(
            _crafted("ref", _npy_state(np.zeros(0, np.float32)), torch.float32, (50_000_000,),
                    "ref:0", False),
            RuntimeError,
            r"cannot load a tensor saved by the ref backend in its own format: its deserialize "
            r"function \(NpyFormat.deserialize\) returned a cpu torch.Tensor of shape \(0,\) "
            r"and dtype torch.float32, but the file gives shape \(50000000,\) and dtype "
            r"torch.float32; the file is damaged or was not written by torch.save",
        )

    def test_crafted_shape_with_as_many_elements(self):
        self._assert_load_fails(
            _crafted("ref", _npy_state(np.zeros((2, 3), np.float32)), torch.float32, (6,),
                    "ref:0", False),
            RuntimeError,
            r"returned a cpu torch.Tensor of shape \(2, 3\) and dtype torch.float32, but the file "
            r"gives "
            r"shape \(6,\) and dtype torch.float32",
        )

    def test_crafted_dtype(self):
        # float64 over an int8 payload would read eight times its bytes.
        self._assert_load_fails(
            _crafted("ref", _npy_state(np.zeros(4, np.int8)), torch.float64, (4,), "ref:0",
                    False),
            RuntimeError,
            r"returned a cpu torch.Tensor of shape \(4,\) and dtype torch.int8, but the file gives "
            r"shape \(4,\) and dtype torch.float64",
        )

    def test_crafted_state_that_is_no_payload(self):
        buf = io.BytesIO()
        np.savez(buf, x=np.zeros(3))  # np.load gives an NpzFile, no array
        self._assert_load_fails(
            _crafted("ref", {"npy": buf.getvalue()}, torch.float64, (3,), "ref:0", False),
            TypeError,
            r"its deserialize function \(NpyFormat.deserialize\) returned a numpy.NpzFile, but "
            r"the file gives shape \(3,\) and dtype torch.float64",
        )

    def test_crafted_metadata(self):
        state = _npy_state(np.zeros(3, np.float32))
        for dtype, size in (("float32", (3,)), (torch.float32, (-1,)), (torch.float32, 3)):
            with self.subTest(dtype=dtype, size=size):
                self._assert_load_fails(
                    _crafted("ref", state, dtype, size, "ref:0", False),
                    RuntimeError,
                    rf"cannot load a tensor saved by the ref backend in its own format: the "
                    rf"file gives dtype {re.escape(repr(dtype))} and size "
                    rf"{re.escape(repr(size))}, but expected a torch.dtype and a tuple of "
                    r"non-negative ints",
                )

    def test_crafted_file_that_is_consistent_loads(self):
        for location in (None, "cpu"):
            y = torch.load(
                io.BytesIO(_saved_bytes(_crafted(
                    "ref", _npy_state(np.arange(6.0).reshape(2, 3)), torch.float64, [2, 3],
                    "ref:0", True,
                ))),
                map_location=location,
            )
            self.assertEqual(y.device.type, location or "ref")
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
                    "ref:0", False),
            RuntimeError,
            "Trying to resize storage that is not resizable",
        )

    def test_registration_errors(self):
        with self.assertRaisesRegex(TypeError, r"expected deserialize to be callable, but got "
                                               r"int \(backend ref\)"):
            library.impl_serialization(FORMAT.serialize, 1)
        with self.assertRaisesRegex(RuntimeError, "already registered"):
            library.impl_serialization(FORMAT.serialize, FORMAT.deserialize)

    def test_load_without_backend_names_it(self):
        x = torch.arange(3.0).to("ref")
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
                    "cannot load a tensor saved by the ref backend in its own format: the ref "
                    "backend is not set up in this process. Loading it, even with "
                    "map_location='cpu', needs the ref backend set up before torch.load",
                    line,
                )
            # The backend's library not imported: torch's weights-only unpickler refuses the
            # rebuild function, naming it. In-tree, `import torch` imports it, so the message
            # names the backend as above.
            rebuild = library._rebuild_payload_view
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
            self.assertIn("cannot load a tensor saved by the ref backend in its own format: the "
                          "ref backend is not set up in this process", message)
        else:
            self.assertIn(
                f"Unsupported global: GLOBAL {rebuild.__module__}.{rebuild.__qualname__}",
                message,
            )


if __name__ == "__main__":
    run_tests()
