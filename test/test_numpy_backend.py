# Owner(s): ["module: PrivateUse1"]
"""What the NumPy backend says of itself: the dtypes it has, and its generators.

The framework's tests run on the passthrough backend (``ref``); these are the NumPy
backend's own answers where they differ from CPU's.
"""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import numpy as npy_backend

npy_backend.setup()


class TestDtypes(TestCase):
    def test_unsupported_dtypes_name_the_operator(self):
        # .to() allocates on the device first (empty_strided), then copies.
        for make, op, dtype in [
            (lambda: torch.ones(2, dtype=torch.uint64).to("npy"), "empty_strided", "uint64"),
            (lambda: torch.ones(2).to("npy").chalf(), "empty_strided", "complex32"),
            (
                lambda: torch.empty(2, dtype=torch.uint16, device="npy"),
                "empty.memory_format",
                "uint16",
            ),
        ]:
            with self.subTest(op=op, dtype=dtype):
                with self.assertRaisesRegex(
                    NotImplementedError,
                    rf"aten::{op}: the npy backend does not support dtype torch.{dtype}: "
                    "expected one of torch.bool, torch.uint8",
                ):
                    make()


class TestGenerator(TestCase):
    def test_seed_and_state(self):
        g = torch.Generator(device="npy")
        self.assertEqual(g.initial_seed(), npy_backend.NumpyGenerator.DEFAULT_SEED)
        torch.rand(5, device="npy", generator=g.manual_seed(9))
        state = g.get_state()
        self.assertEqual((state.dtype, state.device), (torch.uint8, torch.device("cpu")))
        self.assertEqual(state.numel(), npy_backend.NumpyGenerator.STATE_SIZE)
        expected = torch.rand(5, device="npy", generator=g).cpu()
        other = torch.Generator(device="npy").set_state(state)
        self.assertEqual(other.initial_seed(), 9)
        self.assertEqual(torch.rand(5, device="npy", generator=other).cpu(), expected)

    def test_bad_state(self):
        with self.assertRaisesRegex(
            RuntimeError,
            r"NumpyGenerator.set_state\(\) raised ValueError: expected a npy generator state of "
            r"45 bytes, but got 3",
        ):
            torch.Generator(device="npy").set_state(torch.zeros(3, dtype=torch.uint8))


if __name__ == "__main__":
    run_tests()
