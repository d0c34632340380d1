# Owner(s): ["module: PrivateUse1"]
"""PrivateUse1 hooks defined in Python, and how C++ reaches them."""

import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _C, _compat
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import reference


class ConfigurableHooks(reference._Hooks):
    """Hooks whose answers each test sets; every call is recorded."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.available = True
        self.context = True

    def is_available(self):
        self.calls.append("is_available")
        return self.available

    def has_primary_context(self, device_index):
        self.calls.append(("has_primary_context", device_index))
        if isinstance(self.context, Exception):
            raise self.context
        return self.context


HOOKS = ConfigurableHooks()
setup_privateuseone_for_python_backend("ref", hook=HOOKS)
reference.setup()


def _backward():
    torch.ones(2).to("ref").requires_grad_().sum().backward()


class TestHooks(TestCase):
    def setUp(self):
        HOOKS.calls.clear()
        HOOKS.available = True
        HOOKS.context = True

    def test_device_module_asks_hooks_for_availability(self):
        self.assertTrue(torch.ref.is_available())
        HOOKS.available = False
        self.assertFalse(torch.ref.is_available())
        self.assertIn("is_available", HOOKS.calls)

    @unittest.skipUnless(
        _compat.HOOKS_HAVE_AVAILABILITY,
        "torch < 2.7 has no AcceleratorHooksInterface::isAvailable() for C++ to call",
    )
    def test_cpp_asks_hooks_for_availability(self):
        self.assertTrue(torch.accelerator.is_available())
        HOOKS.available = False
        self.assertFalse(torch.accelerator.is_available())

    def test_autograd_asks_for_primary_context(self):
        _backward()
        self.assertIn(("has_primary_context", 0), HOOKS.calls)

    def test_python_error_is_reported_with_its_method(self):
        HOOKS.context = ValueError("boom")
        with self.assertRaisesRegex(
            RuntimeError, r"ConfigurableHooks.has_primary_context\(\) raised ValueError: boom"
        ):
            _backward()

    def test_wrong_return_type(self):
        HOOKS.context = "yes"
        with self.assertRaisesRegex(
            TypeError,
            r"expected ConfigurableHooks.has_primary_context\(\) to return a bool, but got "
            r"<class 'str'>",
        ):
            _backward()

    def test_second_registration_is_refused(self):
        self.assertTrue(_C.is_hook_registered())
        self.assertFalse(_C.register_python_privateuseone_hook(ConfigurableHooks()))


if __name__ == "__main__":
    run_tests()
