# Owner(s): ["module: PrivateUse1"]
"""Backend packages with torch.backends entry points: import torch works, lists them, and
never fails for them (torch_acc_autoload)."""

import ast
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

ROOT = Path(__file__).resolve().parents[1]
#: The jax entry point records its backend only where JAX is installed (the [jax] extra).
HAVE_JAX = importlib.util.find_spec("jax") is not None


def _package(site: Path, name: str, device: str) -> None:
    """A tiny installed distribution whose entry point registers ``device``."""
    (site / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            import torch_acc

            def register():
                torch_acc.register_backend({device!r}, sys.modules[__name__])
            """
        )
    )
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[torch.backends]\n{name} = {name}:register\n")


def _torch_acc_entry_points() -> str:
    """The ``[torch.backends]`` entry points pyproject.toml declares, as entry_points.txt."""
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    start = lines.index('[project.entry-points."torch.backends"]') + 1
    points = []
    for line in lines[start:]:
        if line.startswith("["):
            break
        if "=" in line and not line.startswith("#"):
            name, value = (part.strip() for part in line.split("=", 1))
            points.append(f"{name} = {value.strip(chr(34))}")
    return "[torch.backends]\n" + "\n".join(points) + "\n"


#: Run before ``import torch`` in a subprocess: imports of the modules in ``FAIL`` (a dict of
#: module name to message) raise ImportError as a compiled module that cannot load does.
_FAILING_IMPORTS = """
import sys

class FailingImports:
    def find_spec(self, name, path=None, target=None):
        if name in FAIL:
            raise ImportError(FAIL[name], name=name)
        return None

sys.meta_path.insert(0, FailingImports())
"""


def _import_torch(
    fail: dict, then: str = "", first: str = "torch"
) -> subprocess.CompletedProcess:
    """``import torch`` (or ``first``, which imports it) in a subprocess whose torch_acc has
    the entry points of pyproject.toml (a distribution that shadows any installed torch_acc),
    with the imports in ``fail`` failing; prints the warnings that name torch_acc as JSON,
    then runs ``then``."""
    code = (
        f"FAIL = {fail!r}\n"
        + _FAILING_IMPORTS
        + textwrap.dedent(
            f"""
            import json, warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                import {first}
            print(json.dumps([str(w.message) for w in caught if "torch_acc" in str(w.message)]))
            """
        )
        + textwrap.dedent(then)
    )
    with tempfile.TemporaryDirectory() as tmp:
        info = Path(tmp) / "torch_acc-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_acc\nVersion: 0.1.0\n")
        (info / "entry_points.txt").write_text(_torch_acc_entry_points())
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([tmp, str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "1",
        }
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env
        )


class TestAutoload(TestCase):
    def test_two_backends_installed(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp)
            _package(site, "acc_alpha", "alpha")
            _package(site, "acc_beta", "beta")
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
                "TORCH_DEVICE_BACKEND_AUTOLOAD": "1",
            }
            code = (
                "import torch, torch_acc; "
                "b = torch_acc.backends(); "
                "print(b['alpha'], b['beta'], torch._C._get_privateuse1_backend_name())"
            )
            proc = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env
            )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "False False privateuseone")

    def test_a_failing_registration_does_not_break_import(self):
        code = textwrap.dedent(
            """
            import warnings, types, torch_acc
            from torch_acc import registry
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                registry.autoload("cuda", types.ModuleType("m"))
            print(str(w[0].message))
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("backend 'cuda' was not registered", proc.stdout)

    def test_torch_acc_entry_points_register_both_backends(self):
        proc = _import_torch({}, "import torch_acc; print(torch_acc.backends())")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warned, listed = proc.stdout.splitlines()
        self.assertEqual(warned, "[]")
        expected = {"npy": False, "ref": False} | ({"jax": False} if HAVE_JAX else {})
        self.assertEqual(ast.literal_eval(listed), expected)

    def test_import_torch_acc_first_registers_the_backends(self):
        # `import torch_acc` imports torch, whose autoload imports the backends while
        # torch_acc's __init__ is still running: they must import only what exists then.
        proc = _import_torch(
            {}, "import torch_acc; print(torch_acc.backends())", first="torch_acc"
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warned, listed = proc.stdout.splitlines()
        self.assertEqual(warned, "[]")
        expected = {"npy": False, "ref": False} | ({"jax": False} if HAVE_JAX else {})
        self.assertEqual(ast.literal_eval(listed), expected)

    def test_extension_that_cannot_load_is_one_warning(self):
        # As after `pip install -U torch` with torch_acc built against the torch before.
        undefined = (
            "/site-packages/torch_acc/_C.cpython-311-x86_64-linux-gnu.so: undefined symbol: "
            "_ZN3c104impl3cow11cow_deleterEPv"
        )
        proc = _import_torch(
            {"torch_acc._C": undefined},
            """
            print((torch.ones(2) + 1).tolist(), torch.randn(3, 3).sum().dtype)
            try:
                import torch_acc
            except ImportError as e:
                print("import torch_acc:", e)
            """,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warned, works, imported = proc.stdout.splitlines()
        warned = json.loads(warned)
        self.assertEqual(len(warned), 1, warned)
        self.assertIn(
            "torch_acc's backends are not available: its compiled extension torch_acc._C cannot "
            f"be loaded (ImportError: {undefined}). It was most likely built against another "
            "torch than this one (2.",
            warned[0],
        )
        self.assertIn(
            "rebuild torch_acc against this torch (`pip install --no-build-isolation -e .` in "
            "its source tree, or ./build.sh). torch works without it; "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading backends",
            warned[0],
        )
        self.assertEqual(works, "[2.0, 2.0] torch.float32")
        # Imported explicitly, the package still fails loudly.
        self.assertEqual(imported, f"import torch_acc: {undefined}")

    def test_import_torch_imports_no_backend(self):
        """The entry points register the backends by name: ``import torch`` imports none of
        their modules (nor NumPy's or JAX's kernels); binding one imports it."""
        proc = _import_torch(
            {},
            """
            import sys
            print(sorted(m for m in sys.modules
                         if m.startswith(("torch_acc.backends.", "jax", "torch._dynamo"))))
            import torch_acc
            print(torch_acc.backends())
            torch_acc.use("ref")
            print("torch_acc.backends.reference" in sys.modules)
            """,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warned, before, listed, bound = proc.stdout.splitlines()
        self.assertEqual(warned, "[]")
        self.assertEqual(before, "[]")
        names = ("jax", "npy", "ref") if HAVE_JAX else ("npy", "ref")
        self.assertEqual(listed, repr({name: False for name in names}))
        self.assertEqual(bound, "True")

    def test_one_backend_that_cannot_load_leaves_the_other(self):
        """A backend whose module cannot be imported fails loudly when it is bound (its
        module is imported then, not by ``import torch``); the others work."""
        proc = _import_torch(
            {"ml_dtypes": "No module named 'ml_dtypes'"},
            """
            import torch_acc
            try:
                torch_acc.use("npy")
            except RuntimeError as e:
                print(e)
            print(torch_acc.use("ref"), (torch.ones(2, device="ref") + 1).tolist())
            """,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warned, failed, works = proc.stdout.splitlines()
        self.assertEqual(warned, "[]")
        self.assertEqual(
            failed, "backend 'npy' failed to set up: No module named 'ml_dtypes'"
        )
        self.assertEqual(works, "ref [2.0, 2.0]")


if __name__ == "__main__":
    run_tests()
