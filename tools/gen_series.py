r"""Generate the upstream patch series ``patches/`` from the standalone sources.

Writes the project's sources into a copy of the pristine base (PyTorch v2.6.0, see
``tools/pytorch_source.py``), following the rules of ``tools/series_rules.py``, commits one
logical change per patch with fixed identity and dates, and runs ``git format-patch`` into
``patches/`` with a ``series`` file. The output is byte-stable: regenerating from the same
sources gives the same bytes.

Usage::

    python tools/gen_series.py [--out DIR] [--tree DIR]
"""

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import series_rules  # noqa: E402
from pytorch_source import ensure_base  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = {
    "GIT_AUTHOR_NAME": "torch_acc",
    "GIT_AUTHOR_EMAIL": "torch-acc@torch-acc.invalid",
    "GIT_COMMITTER_NAME": "torch_acc",
    "GIT_COMMITTER_EMAIL": "torch-acc@torch-acc.invalid",
    "GIT_AUTHOR_DATE": "2025-02-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-02-01T00:00:00+00:00",
}


def git(tree: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tree)}
    return subprocess.run(
        ["git", "-C", str(tree), *args], env=env, check=True, capture_output=True, text=True
    ).stdout


def replace_once(text: str, old: str, new: str, where: str) -> str:
    """``text`` with its one occurrence of ``old`` replaced; an error names ``where``."""
    count = text.count(old)
    if count != 1:
        raise RuntimeError(f"{where}: expected one occurrence of {old!r}, but found {count}")
    return text.replace(old, new)


def edit(tree: Path, path: str, old: str, new: str) -> None:
    target = tree / path
    target.write_text(replace_once(target.read_text(), old, new, path))


def write(tree: Path, path: str, text: str) -> None:
    target = tree / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def carry_python(tree: Path, src: str, dst: str) -> None:
    """Rules 2 and 3: a standalone Python file, imports rewritten, at its in-tree path."""
    write(tree, dst, series_rules.rewrite_imports((ROOT / src).read_text(), src))


# --- the patches ---------------------------------------------------------------------------


def apply_acc_module(tree: Path) -> None:
    src_dir, dst_dir = series_rules.CPP_DIR
    sources = sorted((ROOT / src_dir).iterdir())
    for f in sources:
        write(tree, f"{dst_dir}/{f.name}", f.read_text())
    cpp = [f"{dst_dir}/{f.name}" for f in sources if f.suffix == ".cpp"]
    edit(
        tree,
        "build_variables.bzl",
        'libtorch_python_core_sources = [\n',
        'libtorch_python_core_sources = [\n' + "".join(f'    "{p}",\n' for p in cpp),
    )
    edit(
        tree,
        "torch/csrc/Module.cpp",
        "#include <torch/csrc/cpu/Module.h>\n",
        "#include <torch/csrc/acc/Module.h>\n#include <torch/csrc/cpu/Module.h>\n",
    )
    edit(
        tree,
        "torch/csrc/Module.cpp",
        "  torch::accelerator::initModule(module);\n",
        "  torch::accelerator::initModule(module);\n  torch::acc::initModule(module);\n",
    )
    carry_python(tree, "torch_acc/_C.pyi", series_rules.FILES["torch_acc/_C.pyi"])
    edit(tree, "torch/_C/__init__.pyi.in", "from . import (\n    _aoti,\n",
         "from . import (\n    _acc,\n    _aoti,\n")


def _split_module(text: str) -> tuple[list[str], list[str], str]:
    """A module's top-level import lines, its ``__all__`` names, and the code after."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    imports, names, body_start = [], [], None
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.append("".join(lines[node.lineno - 1 : node.end_lineno]))
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            names = ast.literal_eval(node.value)
            body_start = node.end_lineno
    if body_start is None:
        raise RuntimeError("the module to merge has no __all__")
    return imports, names, "".join(lines[body_start:]).lstrip("\n")


def apply_backend_registration(tree: Path) -> None:
    target = "torch/utils/backend_registration.py"
    src = "torch_acc/backend_registration.py"
    text = series_rules.rewrite_imports((ROOT / src).read_text(), src)
    imports, names, body = _split_module(text)
    existing = (tree / target).read_text()
    new_imports = "".join(i for i in imports if i not in existing)
    old_all = '__all__ = ["rename_privateuse1_backend", "generate_methods_for_privateuse1_backend"]'
    new_all = "__all__ = [\n" + "".join(
        f'    "{n}",\n'
        for n in ["rename_privateuse1_backend", "generate_methods_for_privateuse1_backend", *names]
    ) + "]"
    existing = replace_once(existing, old_all, new_imports + "\n" + new_all, target)
    write(tree, target, existing.rstrip("\n") + "\n\n\n" + body)
    for src_file, dst_file in series_rules.FILES.items():
        if src_file.endswith(".py"):
            carry_python(tree, src_file, dst_file)


def apply_meta_utils(tree: Path) -> None:
    """The change ``torch_acc/_patches.py`` makes at run time, made in the source."""
    src = "torch_acc/_patches.py"
    text = (ROOT / src).read_text()
    module = ast.parse(text)
    constants = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in module.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("META_UTILS_OLD", "META_UTILS_NEW")
    }
    helper = next(
        node for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name == "untyped_storage_of"
    )
    helper_source = ast.get_source_segment(text, helper).replace(
        "def untyped_storage_of(", "def _untyped_storage_of(", 1
    )
    helper_source = series_rules.rewrite_imports(helper_source, src)
    path = "torch/_subclasses/meta_utils.py"
    edit(tree, path, constants["META_UTILS_OLD"], constants["META_UTILS_NEW"])
    target = tree / path
    target.write_text(target.read_text().rstrip("\n") + "\n\n\n" + helper_source + "\n")


def apply_tests(tree: Path) -> None:
    for feature in series_rules.TESTS:
        carry_python(
            tree, f"test/test_{feature}.py", f"test/{series_rules.TEST_PREFIX}{feature}.py"
        )
    for name in series_rules.DYNAMO_SKIPS:
        write(tree, f"test/dynamo_skips/{name}", "")


def _test_plan() -> str:
    return "\n".join(
        f"    python test/{series_rules.TEST_PREFIX}{f}.py" for f in series_rules.TESTS
    )


@dataclass
class Patch:
    subject: str
    summary: str
    apply: Callable[[Path], None]
    test_plan: str

    def message(self) -> str:
        return (
            f"{self.subject}\n\n## Summary\n\n{self.summary.strip()}\n\n"
            f"## Test Plan\n\n{self.test_plan.rstrip()}\n"
        )


PATCHES = [
    Patch(
        "[acc] Add torch._C._acc for Python-defined PrivateUse1 backends",
        """
Adds torch/csrc/acc (namespace torch::acc), registered from torch/csrc/Module.cpp as
torch._C._acc, so that a backend written in Python can make PrivateUse1 a real device:

- DeviceGuard: a Python-subclassable c10 device guard. Each method the Python object
  defines is forwarded to it (looked up once, at registration); the others describe a
  synchronous device with one default stream per device: indices 0..device_count()-1,
  per-thread current device and stream, events complete at once. record/block/destroy of
  events do nothing only because the autograd engine calls them at the end of backward;
  elapsed_time raises.
- PrivateUse1Hooks: Python-subclassable at::PrivateUse1HooksInterface (availability,
  primary context, init, pinned pointers); device queries go to the guard.
- register_python_privateuseone_device_guard / register_python_privateuseone_hook:
  first registration wins and returns True, a second returns False, a wrong type is a
  TypeError. Registered objects live for the process.
- create_empty_tensor(shape, dtype, device_index=0), payload(t), set_payload(t, obj):
  PrivateUse1 tensors whose device data is a Python object shared with their detached
  copies, and an allocator that refuses PrivateUse1 storage bytes with a clear error
  instead of a null dereference.

The same files build out of tree as the torch_acc extension (torch_acc._C carries these
names at its top level).
""",
        apply_acc_module,
        "Compile-checked here (-fsyntax-only against the v2.6.0 wheel's generated headers);\n"
        "exercised by the tests of the last patch of this series.",
    ),
    Patch(
        "[utils] Add setup_privateuseone_for_python_backend to backend_registration",
        """
torch.utils.backend_registration.setup_privateuseone_for_python_backend(rename=None,
backend_module=None, hook=None, device_guard=None) does in one call what a C++ backend
registers: renames PrivateUse1, generates the tensor/module/storage methods, registers the
device module (by default one whose device queries come from the guard) and installs hooks
and guard from torch._C._acc. Calling it again with the same name is harmless; another name,
or a PrivateUse1 already taken, raises a RuntimeError naming the backend that holds it;
invalid names raise ValueError.

torch/utils/_acc_compat.py holds the version facts the code and tests consult, and
torch/testing/_internal/acc_numpy_backend.py is a reference backend for the tests: NumPy
arrays as device data, kernels registered with torch.library.
""",
        apply_backend_registration,
        "    python -c \"import torch; torch.utils.backend_registration."
        "setup_privateuseone_for_python_backend('npy'); print(torch.device('npy:0'))\"",
    ),
    Patch(
        "[meta_utils] Describe the storage of Python-backend payload tensors",
        """
Payload tensors (torch._C._acc) have no storage: their device data is a Python object. Meta
and fake conversion (MetaTensorDescriber.describe_tensor) read t.untyped_storage() to learn
which tensors share data, which raised for them. _untyped_storage_of(t) answers for a payload
tensor with a meta storage that stands for its payload (one per payload, as large as it), so
views of one payload share one fake storage; every other tensor is described as before.
""",
        apply_meta_utils,
        f"    python test/{series_rules.TEST_PREFIX}fake.py",
    ),
    Patch(
        "[test] Add tests for Python-defined PrivateUse1 backends",
        """
One test file per integration point: device naming and the device module, the device
guard (indices, streams, events, backward on npy:0 and npy:1 and from a thread), hooks,
the seed-style subclass backend end to end, registration errors, and fake conversion. Each
file sets up a backend for its whole process, so each runs in its own process. Dynamo
cannot trace torch.Event on this release: the two event tests get dynamo_skips entries.
""",
        apply_tests,
        _test_plan(),
    ),
]


def generate(out: Path, tree: Path | None = None) -> Path:
    """Write the series into ``out`` (``*.patch`` and ``series``); returns the patched tree."""
    base = ensure_base(ROOT / ".cache")
    work = Path(tempfile.mkdtemp(prefix="acc-series-")) if tree is None else tree
    if work.exists():
        shutil.rmtree(work)
    subprocess.run(["git", "clone", "--quiet", str(base), str(work)], check=True)
    start = git(work, "rev-parse", "HEAD").strip()
    for patch in PATCHES:
        patch.apply(work)
        git(work, "add", "--all")
        git(work, "commit", "--quiet", "--no-verify", "-m", patch.message())
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.patch"):
        old.unlink()
    git(work, "format-patch", "--quiet", "--zero-commit", "--no-signature", "--full-index",
        "-o", str(out.resolve()), f"{start}..HEAD")
    names = sorted(p.name for p in out.glob("*.patch"))
    (out / "series").write_text("".join(n + "\n" for n in names))
    return work


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "patches")
    parser.add_argument("--tree", type=Path, help="keep the patched tree here")
    args = parser.parse_args()
    tree = generate(args.out, args.tree)
    if args.tree is None:
        shutil.rmtree(tree)
    print(f"wrote {len(PATCHES)} patches to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
