# Owner(s): ["module: PrivateUse1"]
"""The generic device suite of ``torch_acc.testing`` on ``jax``, the JAX backend."""

import importlib.util
import unittest

from torch.testing._internal.common_utils import run_tests, TestCase

import torch_acc
from torch_acc.testing import instantiate_device_tests

if importlib.util.find_spec("jax") is not None:
    torch_acc.use("jax")
    instantiate_device_tests("jax", globals())
else:

    @unittest.skip("JAX is not installed (pip install torch_acc[jax])")
    class TestDeviceSuiteJax(TestCase):
        def test_suite(self):
            pass


if __name__ == "__main__":
    run_tests()
