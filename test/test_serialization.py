# Owner(s): ["module: PrivateUse1"]
"""Saving and loading tensors, state dicts and modules on a Python backend."""

import copy
import io
import pickle
import subprocess
import sys
import tempfile
import textwrap

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import numpy as npy_backend

npy_backend.setup()


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


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


if __name__ == "__main__":
    run_tests()
