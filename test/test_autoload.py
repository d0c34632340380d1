# Owner(s): ["module: PrivateUse1"]
"""Two backend packages with torch.backends entry points: import torch works, both listed."""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase


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


if __name__ == "__main__":
    run_tests()
