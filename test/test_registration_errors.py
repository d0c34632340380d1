# Owner(s): ["module: PrivateUse1"]
"""Registering guards and hooks directly: first wins, wrong types are TypeErrors.

No backend is set up in this process before the tests run; each test leaves the registry in
a state the others accept (first registration wins for the rest of the process).
"""

import subprocess
import sys
import textwrap
import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _C, _compat
from torch_acc.backend_registration import setup_privateuseone_for_python_backend


class Guard(_C.DeviceGuard):
    pass


class Hooks(_C.PrivateUse1Hooks):
    pass


class TestRegistration(TestCase):
    def test_wrong_types(self):
        with self.assertRaisesRegex(
            TypeError,
            r"expected register_python_privateuseone_device_guard\(\) to get an instance of a "
            r"subclass of DeviceGuard, but got Hooks",
        ):
            _C.register_python_privateuseone_device_guard(Hooks())
        with self.assertRaisesRegex(
            TypeError,
            r"expected register_python_privateuseone_hook\(\) to get an instance of a subclass "
            r"of PrivateUse1Hooks, but got int",
        ):
            _C.register_python_privateuseone_hook(3)

    def test_guard_type_must_be_privateuse1(self):
        # Needs a process in which no guard is registered yet.
        code = textwrap.dedent(
            """
            import torch
            from torch_acc import _C

            class WrongTypeGuard(_C.DeviceGuard):
                def type_(self):
                    return torch._C._autograd.DeviceType.CUDA

            try:
                _C.register_python_privateuseone_device_guard(WrongTypeGuard())
            except ValueError as e:
                print(str(e).replace(", but got", ",\\nbut got"))
            print("registered:", _C.is_device_guard_registered())
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        self.assertExpectedInline(
            out,
            """\
expected WrongTypeGuard.type_() to return torch._C._autograd.DeviceType.PrivateUse1,
but got <DeviceType.CUDA: 1>
registered: False
""",
        )

    def test_first_registration_wins(self):
        first = _C.is_device_guard_registered()
        self.assertEqual(_C.register_python_privateuseone_device_guard(Guard()), not first)
        self.assertFalse(_C.register_python_privateuseone_device_guard(Guard()))
        self.assertTrue(_C.is_device_guard_registered())
        first = _C.is_hook_registered()
        self.assertEqual(_C.register_python_privateuseone_hook(Hooks()), not first)
        self.assertFalse(_C.register_python_privateuseone_hook(Hooks()))

    def test_setup_type_errors(self):
        with self.assertRaisesRegex(TypeError, "expected hook to be an instance of a subclass"):
            setup_privateuseone_for_python_backend("ref", hook=object())
        with self.assertRaisesRegex(TypeError, "expected device_guard to be an instance"):
            setup_privateuseone_for_python_backend("ref", device_guard=Hooks())
        # Nothing global changed.
        self.assertEqual(torch._C._get_privateuse1_backend_name(), "privateuseone")

    def test_setup_refuses_a_slot_taken_by_other_means(self):
        _C.register_python_privateuseone_device_guard(Guard())
        with self.assertRaisesRegex(
            RuntimeError, "PrivateUse1 is already held by backend 'privateuseone', set up by other"
        ):
            setup_privateuseone_for_python_backend("ref")

    @unittest.skipUnless(
        _compat.UPSTREAM_ACC not in (None, _C),
        "no torch._C._acc other than this module (torch < 2.10, or the in-tree build)",
    )
    def test_independent_of_upstream_acc(self):
        self.assertIsNot(torch._C._acc.DeviceGuard, _C.DeviceGuard)
        self.assertFalse(issubclass(Guard, torch._C._acc.DeviceGuard))
        # Both modules see the same c10 registry: once ours holds PrivateUse1, upstream's is
        # refused too.
        _C.register_python_privateuseone_device_guard(Guard())
        self.assertFalse(
            torch._C._acc.register_python_privateuseone_device_guard(torch._C._acc.DeviceGuard())
        )


if __name__ == "__main__":
    run_tests()
