# Owner(s): ["module: PrivateUse1"]
"""The generic device suite of ``torch_acc.testing`` (``instantiate_device_tests``): it
passes on a faithful device (``ref``, CPU's kernels) and fails, in the test that checks it,
where a kernel or a view is wrong."""

import subprocess
import sys
import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

import torch_acc
from torch_acc.testing import device_tests, instantiate_device_tests

torch_acc.use("ref")


def _failures(groups: list[str]) -> dict[str, int]:
    """Run the suite's groups on ``ref``: the number of failures and errors of each test."""
    scope = {"__name__": __name__}
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite(
        loader.loadTestsFromTestCase(c) for c in instantiate_device_tests("ref", scope,
                                                                          groups=groups)
    )
    result = unittest.TestResult()
    suite.run(result)
    counts: dict[str, int] = {}
    for test, _ in result.failures + result.errors:
        name = test.id().rsplit(".", 1)[-1]
        counts[name] = counts.get(name, 0) + 1
    if result.testsRun == 0:
        raise AssertionError("no test ran")
    return counts


class TestDeviceSuite(TestCase):
    def test_one_class_per_group(self):
        scope = {"__name__": "m"}
        made = instantiate_device_tests("ref", scope)
        self.assertEqual(sorted(c.__name__ for c in made),
                         sorted(f"Test{g}Ref" for g in device_tests.GROUPS))
        self.assertTrue(all(scope[c.__name__] is c and c.device == "ref" for c in made))
        self.assertTrue(all(c.__module__ == "m" for c in made))

    def test_the_kit_loads_the_suite_when_asked(self):
        # torch.testing._internal.common_utils prints to stdout on some releases; the
        # fuzzer's and the OpInfo harness's workers speak JSON over stdout.
        code = (
            "import sys, torch_acc.testing, torch_acc.testing.fuzz\n"
            "print('torch.testing._internal.common_utils' in sys.modules)"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "False")
        import torch_acc.testing as kit

        self.assertIs(kit.instantiate_device_tests, instantiate_device_tests)
        with self.assertRaisesRegex(AttributeError, "has no attribute 'no_such_tool'"):
            kit.no_such_tool  # noqa: B018

    def test_bad_arguments(self):
        with self.assertRaisesRegex(TypeError, "expected a device name"):
            instantiate_device_tests(None, {"__name__": "m"})
        with self.assertRaisesRegex(ValueError, "without an index, but got 'ref:0'"):
            instantiate_device_tests("ref:0", {"__name__": "m"})
        with self.assertRaisesRegex(ValueError, r"unknown test groups \['Streams'\]"):
            instantiate_device_tests("ref", {"__name__": "m"}, groups=["Views", "Streams"])

    def test_passes_on_a_faithful_device(self):
        self.assertEqual(_failures(list(device_tests.GROUPS)), {})

    def test_a_wrong_kernel_fails_the_test_that_uses_it(self):
        lib = torch.library.Library("aten", "IMPL")
        try:
            # exp one ulp-scale off everywhere: only the arithmetic test calls exp.
            lib.impl("exp", lambda x: (x.cpu().exp() * 1.001).to(x.device), "PrivateUse1")
            self.assertEqual(_failures(["Device", "Views"]), {"test_arithmetic_matches_cpu": 1})
        finally:
            lib._destroy()
        self.assertEqual(_failures(["Device"]), {})

    def test_a_view_that_copies_fails_the_view_tests(self):
        lib = torch.library.Library("aten", "IMPL")
        try:
            # select as a copy: writes through x[1] no longer reach the base.
            lib.impl("select.int", lambda x, d, i: x.cpu().select(d, i).clone().to(x.device),
                     "PrivateUse1")
            failed = _failures(["Views"])
        finally:
            lib._destroy()
        self.assertIn("test_writes_through_views_reach_the_base", failed)


if __name__ == "__main__":
    run_tests()
