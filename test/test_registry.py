# Owner(s): ["module: PrivateUse1"]
"""The backend registry: any number registered, one bound per stock wheel, clear errors."""

import os
import subprocess
import sys
import textwrap
import types

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _compat, record, registry


def _module(name):
    return types.ModuleType(name)


def _run(code: str, **env) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env={**os.environ, **env},
    )
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc.stdout.strip()


class TestRegistry(TestCase):
    def test_register_binds_nothing_and_is_idempotent(self):
        mod = _module("fake_backend")
        registry.register_backend("fakedev", mod)
        registry.register_backend("fakedev", mod)
        self.assertEqual(registry.backends()["fakedev"], False)
        self.assertEqual(torch._C._get_privateuse1_backend_name(), "privateuseone")

    def test_name_clash_and_bad_names(self):
        registry.register_backend("clash", _module("a"))
        with self.assertRaisesRegex(ValueError, "'clash' .* already registered"):
            registry.register_backend("clash", _module("b"))
        for bad in ["", "a b", "cuda"]:
            with self.subTest(name=bad):
                with self.assertRaises(ValueError):
                    registry.register_backend(bad, _module("c"))

    def test_unknown_backend(self):
        with self.assertRaisesRegex(ValueError, "unknown backend 'nosuch': registered backends"):
            registry.use("nosuch")

    def test_unknown_backend_without_autoload(self):
        out = _run(
            """
            import torch_acc
            try:
                torch_acc.use("ref")
            except ValueError as e:
                print(e)
            """,
            TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        )
        self.assertEqual(
            out,
            "unknown backend 'ref': registered backends are none (register_backend() records "
            "one); TORCH_DEVICE_BACKEND_AUTOLOAD=0 kept torch from loading the torch.backends "
            "entry points that register installed backends",
        )

    def test_autoloaded_backends_are_listed(self):
        # This package's own torch.backends entry points ran when torch was imported.
        self.assertIn("npy", registry.backends())
        self.assertIn("ref", registry.backends())

    def test_bind_one_then_refuse_another(self):
        out = _run(
            """
            import torch, torch_acc
            device = torch_acc.use("ref")
            print(device, torch_acc.backends()["npy"], torch_acc.backends()["ref"])
            t = torch.ones(2, device="ref") * 2
            print(t.cpu().tolist())
            try:
                torch_acc.use("npy")
            except RuntimeError as e:
                print(e)
            """
        )
        lines = out.splitlines()
        self.assertEqual(lines[0], "ref False True")
        self.assertEqual(lines[1], "[2.0, 2.0]")
        self.assertIn("cannot use backend 'npy': PrivateUse1 is bound to backend 'ref'", lines[2])
        self.assertIn("TORCH_ACC_BACKEND=npy", lines[2])
        self.assertIn("this torch has one device type for Python backends", lines[2])

    def test_slots_of_a_stock_wheel(self):
        self.assertFalse(hasattr(torch._C, "_privateuse_backend_slots"))
        self.assertEqual(_compat.privateuse_backend_slots(), 1)
        self.assertEqual(record.slots(), ("PrivateUse1",))

    def test_slots_of_a_torch_with_the_series(self):
        # The series' torch._C answers 3; torch_acc binds the slots it serves, and an error
        # names every bound backend once they are all taken. Records stand in for setups.
        out = _run(
            """
            import torch
            from torch_acc import _compat, record
            torch._C._privateuse_backend_slots = lambda: 3
            print(_compat.privateuse_backend_slots(), record.slots())
            for name, slot in (("a", "PrivateUse1"), ("b", "PrivateUse2")):
                record.get_or_create(name).slot = slot
            def check(name):
                try:
                    record.check_slot(name, "use")
                    print("free")
                except RuntimeError as e:
                    print(e)
            check("c")
            check("a")
            record.SERVED_SLOTS = 3
            print(record.slots(), sorted(record.bound()))
            check("c")
            record.get_or_create("c").slot = "PrivateUse3"
            check("d")
            check("b")
            try:
                record.check_slot("d", "set up")
            except RuntimeError as e:
                print(e)
            """
        )
        lines = out.splitlines()
        self.assertEqual(lines[0], "3 ('PrivateUse1',)")
        self.assertIn(
            "cannot use backend 'c': PrivateUse1 is bound to backend 'a', PrivateUse2 is "
            "bound to backend 'b', and torch_acc binds Python backends to PrivateUse1 only, of "
            "the 3 device types this torch has",
            lines[1],
        )
        self.assertEqual(lines[2], "free")
        self.assertEqual(
            lines[3], "('PrivateUse1', 'PrivateUse2', 'PrivateUse3') ['PrivateUse1', 'PrivateUse2']"
        )
        self.assertEqual(lines[4], "free")
        self.assertIn(
            "cannot use backend 'd': PrivateUse1 is bound to backend 'a', PrivateUse2 is bound "
            "to backend 'b', PrivateUse3 is bound to backend 'c', and this torch has 3 device "
            "types for Python backends, all bound",
            lines[5],
        )
        self.assertEqual(lines[6], "free")
        self.assertIn(
            "cannot set up backend 'd': PrivateUse1 is already held by backend 'a'", lines[7]
        )

    def test_env_var_picks_the_backend(self):
        out = _run(
            """
            import torch, torch_acc
            print(torch_acc.device(), torch_acc.backends()["npy"])
            """,
            TORCH_ACC_BACKEND="npy",
        )
        self.assertEqual(out, "npy True")

    def test_failed_setup_is_remembered(self):
        out = _run(
            """
            import types, torch_acc
            def broken():
                raise OSError("no device here")
            torch_acc.register_backend("broken", types.ModuleType("m"), setup=broken)
            for _ in range(2):
                try:
                    torch_acc.use("broken")
                except RuntimeError as e:
                    print(e)
            """
        )
        self.assertEqual(
            out.splitlines(),
            [
                "backend 'broken' failed to set up: no device here",
                "backend 'broken' failed to set up earlier: no device here",
            ],
        )


if __name__ == "__main__":
    run_tests()
