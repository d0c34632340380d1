# Owner(s): ["module: PrivateUse1"]
"""The tools behind the patch series: the Debian mirror and the generator's rules."""

import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import check_series  # noqa: E402
import pytorch_source  # noqa: E402
import series_rules  # noqa: E402


class TestDebianMirror(TestCase):
    def _apt_etc(self, files: dict[str, str]) -> Path:
        """A fake apt configuration folder holding ``files`` (relative path -> text)."""
        root = Path(tempfile.mkdtemp(prefix="apt-etc-"))
        self.addCleanup(shutil.rmtree, root)
        (root / "sources.list.d").mkdir()
        for name, text in files.items():
            (root / name).write_text(textwrap.dedent(text))
        return root

    def test_one_line_sources_list(self):
        etc = self._apt_etc(
            {
                "sources.list": """\
                    # a comment
                    deb [arch=amd64 signed-by=/k.gpg] http://mirror.invalid/debian/ bookworm main
                    deb http://mirror.invalid/debian-security bookworm-security main
                """
            }
        )
        self.assertEqual(pytorch_source.debian_mirror(etc), "http://mirror.invalid/debian")

    def test_deb822_sources(self):
        etc = self._apt_etc(
            {
                "sources.list.d/a-other.sources": """\
                    Types: deb
                    URIs: https://vendor.invalid/apt
                    Suites: nodistro
                    Components: main
                """,
                "sources.list.d/debian.sources": """\
                    Types: deb
                    # URIs: http://commented.invalid/debian
                    URIs: http://deb822.invalid/debian
                    Suites: bookworm bookworm-updates
                    Components: main

                    Types: deb
                    URIs: http://deb822.invalid/debian-security
                    Suites: bookworm-security
                    Components: main
                """,
            }
        )
        self.assertEqual(pytorch_source.debian_mirror(etc), "http://deb822.invalid/debian")

    def test_disabled_and_ignored_files(self):
        etc = self._apt_etc(
            {
                "sources.list.d/debian.sources": """\
                    Enabled: no
                    Types: deb
                    URIs: http://disabled.invalid/debian
                    Suites: trixie
                    Components: main
                """,
                "sources.list.d/old.list.disabled": "deb http://ignored.invalid/debian sid main\n",
                "sources.list.d/z.list": "deb-src http://list.invalid/debian trixie main\n",
            }
        )
        self.assertEqual(pytorch_source.debian_mirror(etc), "http://list.invalid/debian")

    def test_no_debian_source_is_an_error(self):
        etc = self._apt_etc(
            {"sources.list.d/vendor.sources": "Types: deb\nURIs: https://v.invalid\nSuites: x\n"}
        )
        with self.assertRaisesRegex(pytorch_source.SourceError, "no Debian archive in the apt"):
            pytorch_source.debian_mirror(etc)


class TestCppSwitches(TestCase):
    def test_if_else_keeps_the_base_branch(self):
        text = textwrap.dedent(
            """\
            #include <torch/csrc/acc/compat.h>
            int a;
            #if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
            int allocator;
            #ifdef USE_NUMPY
            int numpy;
            #endif
            #else
            int no_allocator;
            #endif

            #if !TORCH_ACC_HOOKS_HAVE_AVAILABILITY
            int no_availability;
            #endif
            """
        )
        self.assertExpectedInline(
            series_rules.resolve_cpp(text, "x.cpp"),
            """\
int a;
int no_allocator;

int no_availability;
""",
        )

    def test_if_constexpr_and_tokens(self):
        text = textwrap.dedent(
            """\
            bool f(int d) const
                TORCH_ACC_STREAM_NOEXCEPT {
              if constexpr (TORCH_ACC_STREAM_QUERIES_NOEXCEPT) {
                return keep(d);
              } else {
                return check(d);
              }
            }
            """
        )
        self.assertExpectedInline(
            series_rules.resolve_cpp(text, "x.cpp"),
            """\
bool f(int d) const noexcept {
  return keep(d);
}
""",
        )

    def test_layout_stays_clang_formatted(self):
        text = textwrap.dedent(
            """\
            #include <c10/core/CPUAllocator.h>
            #if TORCH_ACC_GENERATOR_REGISTRY
            #include <ATen/core/GeneratorForPrivateuseone.h>
            #endif
            struct S {
              int a;

             private:
            #if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
              int b;
            #endif

              int c;

            #if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
              int d;
            #endif
            };
            """
        )
        self.assertExpectedInline(
            series_rules.resolve_cpp(text, "x.h"),
            """\
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/CPUAllocator.h>
struct S {
  int a;

 private:
  int c;
};
""",
        )

    def test_unresolved_switch_is_an_error(self):
        with self.assertRaisesRegex(
            series_rules.SeriesRuleError, r"x\.h:2: unresolved version switch #if TORCH_ACC_NEW"
        ):
            series_rules.resolve_cpp("int a;\n#if TORCH_ACC_NEW\n#endif\n", "x.h")
        with self.assertRaisesRegex(
            series_rules.SeriesRuleError, r"x\.h:1: unresolved version switch TORCH_VERSION_MINOR"
        ):
            series_rules.resolve_cpp("int a = TORCH_VERSION_MINOR;\n", "x.h")

    def test_every_fact_has_a_value(self):
        series_rules.check_facts_complete()


class TestPythonSwitches(TestCase):
    def _resolve(self, text: str) -> str:
        return series_rules.resolve_python(textwrap.dedent(text), "t.py")

    def test_conditions_keep_the_base_branch(self):
        out = self._resolve(
            """\
            import unittest

            from torch_acc import _C, _compat


            def f(name, kwargs):
                if _compat.DATALOADER_NEEDS_PIN_MEMORY_DEVICE:
                    # 2.6 needs the device.
                    kwargs["pin_memory_device"] = "npy"
                else:
                    kwargs.clear()
                if name == "x" and _compat.STREAM_QUERIES_NOEXCEPT:
                    return _compat.BOOL_SUBTRACTION_ERROR("no")
                setter = _compat.current_accelerator_setter()
                if setter is not None:
                    setter(name)
                return 1 if _compat.TORCH_VERSION >= (2, 13) else 2


            class T(unittest.TestCase):
                @unittest.skipUnless(_compat.UPSTREAM_ACC not in (None, _C), "upstream's")
                def test_gone(self):
                    pass

                @unittest.skipIf(_compat.HOOKS_HAVE_AVAILABILITY, "2.7")
                def test_kept(self):
                    pass
            """
        )
        self.assertExpectedInline(
            out,
            """\
import unittest


def f(name, kwargs):
    # 2.6 needs the device.
    kwargs["pin_memory_device"] = "npy"
    if name == "x":
        return RuntimeError("no")
    torch._C._accelerator_setCurrentAccelerator(name)
    return 2


class T(unittest.TestCase):
    def test_kept(self):
        pass
""",
        )

    def test_unresolved_switch_is_an_error(self):
        with self.assertRaisesRegex(
            series_rules.SeriesRuleError,
            r"t\.py:3: unresolved version switch _compat\.NEW_FACT \(no value for the base",
        ):
            self._resolve("from torch_acc import _compat\n\nx = _compat.NEW_FACT\n")

    def test_runtime_patching_goes_or_is_an_error(self):
        out = self._resolve(
            """\
            from torch_acc import _C, _patches


            def setup():
                _patches.apply()
                return _patches.original("current_accelerator")()
            """
        )
        self.assertExpectedInline(
            out,
            """\
from torch_acc import _C


def setup():
    return torch.accelerator.current_accelerator()
""",
        )
        with self.assertRaisesRegex(
            series_rules.SeriesRuleError, r"t\.py:2: in-tree code uses the standalone-only _patches"
        ):
            self._resolve("from torch_acc import _patches\n_patches.accelerator_choice()\n")

    def test_forbidden_construct_is_an_error(self):
        with self.assertRaisesRegex(
            series_rules.SeriesRuleError, r"t\.py:1: forbidden in-tree construct exec\(\)"
        ):
            self._resolve("exec(compile('1', 'f', 'eval'))\n")


class TestImports(TestCase):
    def test_mentions_in_text_take_their_in_tree_home(self):
        text = (
            'msg = "use torch_acc.library.declare_fork_safe or torch_acc.distributed.BACKEND"\n'
            'script = """\n'
            "import torch_acc\n"
            "from torch_acc.backends.reference import setup\n"
            '"""\n'
        )
        out = series_rules.rewrite_imports(text, "t.py")
        self.assertIn("torch.utils._acc.library.declare_fork_safe", out)
        self.assertIn("torch.utils._acc.distributed.BACKEND", out)
        self.assertIn("from torch.testing._internal.acc_passthrough_backend import setup", out)
        self.assertNotIn("import torch_acc\n", out)

    def test_a_name_without_a_home_is_an_error(self):
        with self.assertRaisesRegex(ValueError, r"t\.py:1: standalone reference left in-tree"):
            series_rules.rewrite_imports("import torch_acc\nx = torch_acc.wrap(a)\n", "t.py")


class TestEveryFileDecided(TestCase):
    def test_every_file_is_carried_or_excluded(self):
        import gen_series

        gen_series.check_every_file_decided()


class TestPatchSize(TestCase):
    def test_oversized_patch_is_an_error(self):
        numstat = "900\t0\ttorch/utils/a.py\n700\t10\ttorch/utils/b.py\n"
        with self.assertRaisesRegex(
            series_rules.SeriesRuleError,
            r"patch '\[utils\] Add a and b' changes 1610 lines, more than 1500: split it "
            r"\(largest: torch/utils/a\.py \(900\), torch/utils/b\.py \(710\)\)",
        ):
            series_rules.check_patch_size("[utils] Add a and b", numstat)

    def test_one_cohesive_new_file_may_be_large(self):
        numstat = "2250\t0\ttorch/csrc/acc/Bridge.cpp\n88\t0\ttorch/csrc/acc/Bridge.h\n"
        series_rules.check_patch_size("[acc] bridge", numstat + "1\t0\tbuild_variables.bzl\n")
        with self.assertRaisesRegex(series_rules.SeriesRuleError, "changes 2340 lines"):
            series_rules.check_patch_size("[acc] bridge", numstat + "2\t0\ttorch/csrc/x.cpp\n")


class TestPrefixCheck(TestCase):
    def _tree(self, files: dict[str, str]) -> Path:
        root = Path(tempfile.mkdtemp(prefix="series-tree-"))
        self.addCleanup(shutil.rmtree, root)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(textwrap.dedent(text))
        return root

    def test_imports_resolve_in_the_tree(self):
        tree = self._tree(
            {
                "torch/utils/__init__.py": "",
                "torch/utils/a.py": "def f():\n    pass\n",
                "torch/utils/b.py": """\
                    from torch.utils.a import f, g
                    from torch.utils.missing import h
                    from torch._C._acc import DeviceGuard
                    from . import a
                """,
            }
        )
        changed = {"torch/utils/a.py", "torch/utils/b.py"}
        self.assertEqual(
            check_series.python_problems(tree, sorted(changed), changed),
            [
                "torch/utils/b.py:1: torch.utils.a defines no g",
                "torch/utils/b.py:2: no module torch.utils.missing in the tree",
                "torch/utils/b.py:3: no module torch._C._acc in the tree",
            ],
        )

    def test_imports_the_base_already_had_are_not_the_series(self):
        # Upstream's compile_fx.py imports torch._inductor.fb, which the open-source tree lacks.
        text = "from torch._inductor.fb.utils import log\nfrom torch.nosuch import x\n"
        tree = self._tree({"torch/x.py": text + "from torch.alsomissing import y\n"})
        self.assertEqual(
            check_series.python_problems(
                tree, ["torch/x.py"], {"torch/x.py"}, {"torch/x.py": text}
            ),
            ["torch/x.py:3: no module torch.alsomissing in the tree"],
        )

    def test_syntax_error_is_named(self):
        tree = self._tree({"torch/x.py": "def f(:\n"})
        (problem,) = check_series.python_problems(tree, ["torch/x.py"], {"torch/x.py"})
        self.assertTrue(problem.startswith("torch/x.py:1: "), problem)

    def test_tests_come_last(self):
        series = [
            {"c10/core/x.h", "c10/test/core/x_test.cpp"},  # c10's googletest is not test/
            {"torch/utils/a.py"},
            {"test/test_a.py", "test/run_test.py"},
            {"test/test_b.py"},
        ]
        first = None
        for k, touched in enumerate(series, 1):
            first = check_series.tests_last(k, f"{k}.patch", touched, first)
        self.assertEqual(first, 3)
        with self.assertRaisesRegex(
            check_series.CheckFailed,
            r"patch 5, 5.patch, changes torch/utils/a.py after patch 3 began the tests",
        ):
            check_series.tests_last(5, "5.patch", {"torch/utils/a.py", "test/test_c.py"}, 3)


if __name__ == "__main__":
    run_tests()
