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
import fnmatch
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
import series_slots  # noqa: E402
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


def in_tree_python(src: str) -> str:
    """Rules 6, 9 and 2: a standalone Python file's text as the series carries it."""
    text = series_rules.resolve_python((ROOT / src).read_text(), src)
    return series_rules.rewrite_imports(text, src)


def carry_python(tree: Path, src: str, dst: str) -> None:
    """Rule 3: a standalone Python file, made in-tree, at its in-tree path."""
    write(tree, dst, in_tree_python(src))


# --- the patches ---------------------------------------------------------------------------


_NOOP_STREAMS_OLD = """\
  Stream getStream(Device) const noexcept override {
    // no-op
    return Stream(Stream::DEFAULT, Device(D, -1));
  }

  Stream getNewStream(Device, int priority = 0) const override {
    // no-op
    (void)priority;
    return Stream(Stream::DEFAULT, Device(D, -1));
  }

  // NB: These do NOT set the current device
  Stream exchangeStream(Stream) const noexcept override {
    // no-op
    return Stream(Stream::DEFAULT, Device(D, -1));
  }
"""
_NOOP_STREAMS_NEW = """\
  // The default stream of the device asked about, with its index: the
  // autograd engine keeps the caller's streams per device index and compares
  // them with the streams of the tensors' devices, so a stream of device -1
  // for a tensor on device 0 would be looked up out of range.
  Stream getStream(Device d) const noexcept override {
    return Stream(Stream::DEFAULT, d);
  }

  Stream getNewStream(Device d, int priority = 0) const override {
    (void)priority;
    return Stream(Stream::DEFAULT, d);
  }

  // NB: These do NOT set the current device
  Stream exchangeStream(Stream s) const noexcept override {
    // The previous stream of s's device is its default stream: the only one.
    return Stream(Stream::DEFAULT, s.device());
  }
"""


_ACCELERATOR_DECL = """\
TORCH_API std::optional<c10::DeviceType> getAccelerator(bool checked = false);
"""
_ACCELERATOR_SETTER_DECL = """
// Makes `device_type` what getAccelerator() returns from now on, in place of
// the accelerator this build detects: an accelerator device type, or
// std::nullopt for none (CPU only). Thread-safe. Tensors keep their devices;
// only code that asks for "the accelerator" sees the choice.
TORCH_API void setCurrentAccelerator(
    std::optional<c10::DeviceType> device_type);
"""
_ACCELERATOR_DEF = """\
std::optional<c10::DeviceType> getAccelerator(bool checked) {
"""
_ACCELERATOR_CHOICE = """\
namespace {
// What setCurrentAccelerator chose: kDetect until it is first called, kNone
// for no accelerator, else a c10::DeviceType.
constexpr int kDetect = -2;
constexpr int kNone = -1;
std::atomic<int> chosen_accelerator{kDetect};
} // namespace

void setCurrentAccelerator(std::optional<c10::DeviceType> device_type) {
  TORCH_CHECK(
      !device_type.has_value() || isAccelerator(*device_type),
      "expected an accelerator device type, or none, but got ",
      *device_type);
  chosen_accelerator.store(
      device_type.has_value() ? static_cast<int>(*device_type) : kNone);
}

"""
_ACCELERATOR_DETECT = """\
  if (is_privateuse1_backend_registered()) {
"""
_ACCELERATOR_CHOSEN = """\
  if (const int chosen = chosen_accelerator.load(); chosen != kDetect) {
    TORCH_CHECK(
        !checked || chosen != kNone,
        "Cannot access accelerator device when none is available.");
    if (chosen == kNone) {
      return std::nullopt;
    }
    return static_cast<c10::DeviceType>(chosen);
  }
"""
_ACCELERATOR_BINDING_AFTER = """\
    return c10::Device(at::getAccelerator(true).value());
  });
"""
_ACCELERATOR_BINDING = """
  m.def(
      "_accelerator_setCurrentAccelerator",
      [](std::optional<c10::Device> device) {
        at::setCurrentAccelerator(
            device.has_value() ? std::make_optional(device->type())
                               : std::nullopt);
      });
"""


def apply_current_accelerator(tree: Path) -> None:
    header = "aten/src/ATen/DeviceAccelerator.h"
    edit(tree, header, _ACCELERATOR_DECL, _ACCELERATOR_DECL + _ACCELERATOR_SETTER_DECL)
    source = "aten/src/ATen/DeviceAccelerator.cpp"
    edit(
        tree,
        source,
        "#include <ATen/DeviceAccelerator.h>\n",
        "#include <ATen/DeviceAccelerator.h>\n\n#include <atomic>\n\n",
    )
    edit(tree, source, _ACCELERATOR_DEF, _ACCELERATOR_CHOICE + _ACCELERATOR_DEF)
    edit(tree, source, _ACCELERATOR_DETECT, _ACCELERATOR_CHOSEN + _ACCELERATOR_DETECT)
    edit(
        tree,
        "torch/csrc/DeviceAccelerator.cpp",
        _ACCELERATOR_BINDING_AFTER,
        _ACCELERATOR_BINDING_AFTER + _ACCELERATOR_BINDING,
    )
    edit(
        tree,
        "torch/_C/__init__.pyi.in",
        "def _accelerator_getAccelerator() -> _device: ...\n",
        "def _accelerator_getAccelerator() -> _device: ...\n"
        "def _accelerator_setCurrentAccelerator(device: Optional[_device]) -> None: ...\n",
    )


def _public_name(src: str, name: str, signature: str, call: str) -> str:
    """A public in-tree function that calls ``name`` of the standalone module ``src``
    (``"accelerator"``; imported when called: ``torch.utils`` and ``torch.accelerator`` load
    while ``torch`` initializes, before ``torch.utils._acc`` can), with its docstring."""
    module = ast.parse((ROOT / f"torch_acc/{src}.py").read_text())
    doc = ast.get_docstring(
        next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name),
        clean=False,
    )
    return (
        f"\n\ndef {name}{signature}:\n"
        f'    r"""{doc}"""\n'
        f"    from torch.utils._acc.{src} import {name} as _{name}\n\n"
        f"    return _{name}{call}\n"
    )


def apply_accelerator_api(tree: Path) -> None:
    """``torch.accelerator.set_current_accelerator`` and ``torch.utils.register_backend``, the
    public names of ``torch/utils/_acc/accelerator.py``'s and ``registry.py``'s functions."""
    path = "torch/accelerator/__init__.py"
    edit(
        tree,
        path,
        '    "set_device_idx",  # deprecated\n',
        '    "set_current_accelerator",\n    "set_device_idx",  # deprecated\n',
    )
    target = tree / path
    target.write_text(
        target.read_text()
        + _public_name(
            "accelerator", "set_current_accelerator", "(device: _device_t, /) -> None", "(device)"
        )
    )
    target = tree / "torch/utils/__init__.py"
    target.write_text(
        target.read_text()
        + _public_name(
            "registry",
            "register_backend",
            "(name: str, module, *, setup=None) -> None",
            "(name, module, setup=setup)",
        )
    )


def carry_cpp_test(tree: Path, src: str) -> None:
    """Rule 8: a googletest file of ``test/cpp`` at its place in the tree."""
    write(tree, series_rules.CPP_TESTS[src], (ROOT / src).read_text())


def apply_noop_guard(tree: Path) -> None:
    edit(tree, "c10/core/impl/DeviceGuardImplInterface.h", _NOOP_STREAMS_OLD, _NOOP_STREAMS_NEW)
    carry_cpp_test(tree, "test/cpp/NoOpDeviceGuardImpl_test.cpp")


def apply_c10_slots(tree: Path) -> None:
    for path, old, new in series_slots.C10_EDITS:
        edit(tree, path, old, new)
    carry_cpp_test(tree, series_slots.CPP_TEST)


def apply_aten_slots(tree: Path) -> None:
    for path, old, new in series_slots.ATEN_EDITS:
        edit(tree, path, old, new)


def check_cpp_tests_carried() -> None:
    """Rule 8: every googletest file of ``test/cpp`` has its place in the tree."""
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "test/cpp").glob("*.cpp")}
    if files != set(series_rules.CPP_TESTS):
        raise RuntimeError(
            f"test/cpp files {sorted(files)} and series_rules.CPP_TESTS "
            f"{sorted(series_rules.CPP_TESTS)} differ"
        )


_BUILD_LIST = "libtorch_python_core_sources = [\n"


def add_build_sources(tree: Path, paths: list[str]) -> None:
    """List ``paths`` in ``build_variables.bzl``'s Python sources, torch/csrc/acc's sorted at
    the head of the list (the CMake build reads it)."""
    target = tree / "build_variables.bzl"
    text = target.read_text()
    start = text.index(_BUILD_LIST) + len(_BUILD_LIST)
    end = start
    listed = []
    prefix = f'    "{series_rules.CPP_DIR[1]}/'
    while text.startswith(prefix, end):
        line_end = text.index("\n", end) + 1
        listed.append(text[end:line_end])
        end = line_end
    entries = sorted(set(listed) | {f'    "{p}",\n' for p in paths})
    target.write_text(text[:start] + "".join(entries) + text[end:])


def acc_files(*names: str) -> Callable[[Path], None]:
    """Rules 1 and 9: these files of ``csrc/acc`` at ``torch/csrc/acc``, their ``.cpp`` built."""

    def apply(tree: Path) -> None:
        src_dir, dst_dir = series_rules.CPP_DIR
        for name in names:
            src = f"{src_dir}/{name}"
            write(
                tree, f"{dst_dir}/{name}", series_rules.resolve_cpp((ROOT / src).read_text(), src)
            )
        add_build_sources(tree, [f"{dst_dir}/{n}" for n in names if n.endswith(".cpp")])

    return apply


def apply_acc_module(tree: Path) -> None:
    acc_files("Module.h", "Module.cpp")(tree)
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
    edit(
        tree,
        "torch/_C/__init__.pyi.in",
        "from . import (\n    _aoti,\n",
        "from . import (\n    _acc,\n    _aoti,\n",
    )


def check_acc_files_carried() -> None:
    """Every file of ``csrc/acc`` but ``compat.h`` (rule 9) is in exactly one patch."""
    carried = sorted(n for part in ACC_PARTS for n in part) + ["Module.cpp", "Module.h"]
    present = sorted(
        f.name for f in (ROOT / series_rules.CPP_DIR[0]).iterdir() if f.name != "compat.h"
    )
    if sorted(carried) != present:
        raise RuntimeError(
            f"csrc/acc has {present}, but the series carries {sorted(carried)} "
            "(tools/gen_series.py: ACC_PARTS)"
        )


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
    imports, names, body = _split_module(in_tree_python(src))
    existing = (tree / target).read_text()
    new_imports = "".join(i for i in imports if i not in existing)
    old_all = '__all__ = ["rename_privateuse1_backend", "generate_methods_for_privateuse1_backend"]'
    new_all = (
        "__all__ = [\n"
        + "".join(
            f'    "{n}",\n'
            for n in [
                "rename_privateuse1_backend",
                "generate_methods_for_privateuse1_backend",
                *names,
            ]
        )
        + "]"
    )
    existing = replace_once(existing, old_all, new_imports + "\n" + new_all, target)
    write(tree, target, existing.rstrip("\n") + "\n\n\n" + body)
    python_files(*SETUP_FILES)(tree)


def python_files(*srcs: str) -> Callable[[Path], None]:
    """Rule 3: these standalone Python files at their in-tree paths (with the package's
    ``__init__.py`` when the first of them goes to ``torch/utils/_acc/``)."""

    def apply(tree: Path) -> None:
        init, text = series_rules.PACKAGE_INIT
        for src in srcs:
            dst = series_rules.FILES[src]
            if dst.startswith(init.rsplit("/", 1)[0] + "/") and not (tree / init).exists():
                write(tree, init, text)
            carry_python(tree, src, dst)

    return apply


def check_python_files_carried() -> None:
    """Every carried Python file (``series_rules.FILES``) is in exactly one patch."""
    carried = sorted(
        [
            *LIBRARY_FILES,
            *DISTRIBUTED_FILES,
            *SETUP_FILES,
            *TEST_BACKEND_FILES,
        ]
    )
    expected = sorted(f for f in series_rules.FILES if f.endswith(".py"))
    if carried != expected:
        raise RuntimeError(
            f"the series carries {carried}, but series_rules.FILES has {expected} "
            "(tools/gen_series.py: LIBRARY_FILES, SETUP_FILES, TEST_BACKEND_FILES)"
        )


def _source_changes(module: str, functions: tuple[str, ...]) -> list[dict]:
    """The entries of ``SOURCE_CHANGES`` in ``torch_acc/_patches.py`` for the ``functions`` of
    ``module`` (all of its entries when none is named), each with the source of its helper
    function (renamed ``_<helper>``, imports rewritten)."""
    src = "torch_acc/_patches.py"
    text = (ROOT / src).read_text()
    tree = ast.parse(text)
    changes = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "SOURCE_CHANGES"
    )
    base = ast.literal_eval(series_rules.PY_FACTS["TORCH_VERSION"])
    selected = [
        c
        for c in changes
        if c["module"] == module
        and (not functions or c["function"] in functions)
        and c.get("since", base) <= base  # later releases' code is not in the base
    ]
    if not selected or (functions and len(selected) != len(functions)):
        raise RuntimeError(f"{src}: SOURCE_CHANGES has no entry for {module} {functions}")
    out = []
    for change in selected:
        if "helper" not in change:
            out.append(change)
            continue
        helper = next(
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == change["helper"]
        )
        source = ast.get_source_segment(text, helper).replace(
            f"def {change['helper']}(", f"def _{change['helper']}(", 1
        )
        out.append({**change, "helper_source": series_rules.rewrite_imports(source, src)})
    return out


def _function_span(text: str, qualname: str, where: str) -> tuple[int, int]:
    """The line span (0-based, end exclusive) of the function ``qualname`` in ``text``."""
    scope: list[ast.stmt] = ast.parse(text).body
    node = None
    for part in qualname.split("."):
        node = next(
            (n for n in scope if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == part),
            None,
        )
        if node is None:
            raise RuntimeError(f"{where}: no {qualname}")
        scope = node.body
    return node.lineno - 1, node.end_lineno


def source_change(module: str, *functions: str) -> Callable[[Path], None]:
    """Rule 6: the changes ``torch_acc/_patches.py`` makes to ``functions`` of ``module`` (all
    of the module's when none is named) at run time, made in the source: each line replaced
    within its function, each helper appended to the module."""

    def apply(tree: Path) -> None:
        path = module.replace(".", "/") + ".py"
        target = tree / path
        for change in _source_changes(module, functions):
            lines = target.read_text().splitlines(keepends=True)
            start, end = _function_span("".join(lines), change["function"], path)
            function = "".join(lines[start:end])
            for old, new in change["lines"]:
                function = replace_once(function, old, new, f"{path}:{change['function']}")
            text = "".join(lines[:start]) + function + "".join(lines[end:])
            if "helper_source" in change and f"\ndef _{change['helper']}(" not in text:
                text = text.rstrip("\n") + "\n\n\n" + change["helper_source"] + "\n"
            target.write_text(text)

    apply.source_change = (module, functions)
    return apply


def check_source_changes_carried() -> None:
    """Every entry of ``SOURCE_CHANGES`` (rule 6) is made by exactly one patch."""
    tree = ast.parse((ROOT / "torch_acc/_patches.py").read_text())
    changes = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "SOURCE_CHANGES"
    )
    base = ast.literal_eval(series_rules.PY_FACTS["TORCH_VERSION"])
    expected = sorted(
        (c["module"], c["function"]) for c in changes if c.get("since", base) <= base
    )
    carried = sorted(
        (c["module"], c["function"])
        for patch in PATCHES
        if hasattr(patch.apply, "source_change")
        for c in _source_changes(*patch.apply.source_change)
    )
    if carried != expected:
        raise RuntimeError(
            f"the series makes the source changes {carried}, but torch_acc/_patches.py's "
            f"SOURCE_CHANGES has {expected} (tools/gen_series.py: PATCHES)"
        )


_RUN_TEST_ANCHOR = '    "test_cpp_extensions_open_device_registration",\n'


def list_in_run_test(tree: Path, names: list[str]) -> None:
    """List the test files ``names`` in ``test/run_test.py``'s ``RUN_PARALLEL_BLOCKLIST``,
    beside the C++ PrivateUse1 test: each file sets up one backend for its whole process, so
    its tests are not split across processes."""
    target = tree / "test/run_test.py"
    text = target.read_text()
    if text.count(_RUN_TEST_ANCHOR) != 1:
        raise RuntimeError(f"test/run_test.py: expected one {_RUN_TEST_ANCHOR.strip()} entry")
    start = end = text.index(_RUN_TEST_ANCHOR) + len(_RUN_TEST_ANCHOR)
    listed = []
    prefix = f'    "{series_rules.TEST_PREFIX}'
    while text.startswith(prefix, end):
        line_end = text.index("\n", end) + 1
        listed.append(text[end:line_end])
        end = line_end
    entries = sorted(set(listed) | {f'    "{name}",\n' for name in names})
    target.write_text(text[:start] + "".join(entries) + text[end:])


def tests(*features: str) -> Callable[[Path], None]:
    """Rules 4 and 7: the tests of ``features``, their Dynamo skips and their entries in
    ``test/run_test.py``."""

    def apply(tree: Path) -> None:
        list_in_run_test(tree, [f"{series_rules.TEST_PREFIX}{f}" for f in features])
        for feature in features:
            src = f"test/test_{feature}.py"
            carry_python(tree, src, f"test/{series_rules.TEST_PREFIX}{feature}.py")
            classes = {
                node.name
                for node in ast.parse((ROOT / src).read_text()).body
                if isinstance(node, ast.ClassDef)
            }
            for name in series_rules.DYNAMO_SKIPS:
                if name.split(".")[0] in classes:
                    write(tree, f"test/dynamo_skips/{name}", "")

    return apply


def check_tests_carried() -> None:
    """Every test of ``series_rules.TESTS`` is in exactly one patch."""
    carried = sorted(f for group in TEST_GROUPS for f in group)
    if carried != sorted(series_rules.TESTS):
        raise RuntimeError(
            f"the series carries the tests {carried}, but series_rules.TESTS has "
            f"{sorted(series_rules.TESTS)} (tools/gen_series.py: TEST_GROUPS)"
        )


def check_every_file_decided() -> None:
    """Rule 11: every Python file of the package and every test file is carried by a rule or
    excluded by ``series_rules.STANDALONE_FILES``, not both."""
    carried = set(series_rules.FILES) | {
        "torch_acc/backend_registration.py",
        *(f"test/test_{f}.py" for f in series_rules.TESTS),
    }
    files = sorted(
        p.relative_to(ROOT).as_posix()
        for p in [*(ROOT / "torch_acc").rglob("*.py"), *(ROOT / "test").glob("test_*.py")]
    )
    problems = []
    for f in files:
        excluded = any(fnmatch.fnmatch(f, pattern) for pattern in series_rules.STANDALONE_FILES)
        if excluded == (f in carried):
            problems.append(f"{f} ({'both carried and excluded' if excluded else 'undecided'})")
    if problems:
        raise RuntimeError(
            f"files neither carried nor excluded, or both: {', '.join(problems)} "
            "(tools/series_rules.py: FILES, TESTS, STANDALONE_FILES)"
        )


def _test_plan(features) -> str:
    return "\n".join(f"    python test/{series_rules.TEST_PREFIX}{f}.py" for f in features)


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


#: The parts of torch/csrc/acc, one patch each, in dependency order (Module.{h,cpp}, which
#: binds them all, is the patch after them).
ACC_PARTS = [
    ("PythonMethods.h", "Shutdown.cpp", "Shutdown.h"),
    ("DeviceGuard.cpp", "DeviceGuard.h"),
    ("PayloadTensor.cpp", "PayloadTensor.h", "EmptyTensor.cpp", "EmptyTensor.h"),
    ("Generator.cpp", "Generator.h", "Hooks.cpp", "Hooks.h", "Allocator.cpp", "Allocator.h"),
    ("Payload.cpp", "Payload.h"),
    ("Registration.cpp", "Registration.h", "Views.cpp", "Views.h"),
    ("Bridge.cpp", "Bridge.h"),
    ("Autocast.cpp", "Autocast.h"),
]
#: The Python files of each Python patch (backend_registration.py is merged, rule 5).
LIBRARY_FILES = (
    "torch_acc/payload.py",
    "torch_acc/record.py",
    "torch_acc/library.py",
    "torch_acc/_ipc.py",
)
DISTRIBUTED_FILES = ("torch_acc/distributed.py",)
SETUP_FILES = (
    "torch_acc/_autocast.py",
    "torch_acc/_fallback.py",
    "torch_acc/_imports.py",
    "torch_acc/compile.py",
    "torch_acc/device_module.py",
    "torch_acc/registry.py",
    "torch_acc/accelerator.py",
)
#: The series' test backend (rule 3).
TEST_BACKEND_FILES = ("torch_acc/backends/reference.py",)
#: The tests of each test patch (rule 4).
TEST_GROUPS = [
    ("device", "guard", "hooks", "streams_events", "accelerator", "current_accelerator", "pinned"),
    ("payload", "bridge", "views", "inplace_out", "decompositions", "mixed_device_errors", "fake"),
    ("rng", "autocast", "serialization", "compile", "profiler"),
    ("subclass_backend", "registration_errors", "overlap", "exit", "fork", "c10d"),
]


PATCHES = [
    Patch(
        "[c10] Let NoOpDeviceGuardImpl streams keep their device index",
        """
NoOpDeviceGuardImpl<D> answered every stream query with the default stream of device -1.
For CPU and Meta, whose tensors have no device index, that is the stream of their device.
For a device type that has indexed devices but no streams, such as a PrivateUse1 backend
written on NoOpDeviceGuardImpl (the original PR this series grew from did so), it is not: the
autograd engine stashes the caller's current stream per device index and, at the end of
backward, looks up the stream of each leaf's device by the leaf stream's device index, which
was -1, out of range for a tensor on device 0. getStream/getNewStream/exchangeStream now
return the default stream of the device they are given, index kept. CPU and Meta get the same
streams as before.

Events still raise: the engine records an event only when the caller's stream and a leaf's
stream differ, and they are now equal, so no event is needed on such a device; anywhere else
an event on a device without events is an error, as reviewers asked.

torch::acc's device guard (later in this series) implements the whole interface itself and
does not depend on this change; it makes NoOpDeviceGuardImpl correct for the C++ backends that
use it.
""",
        apply_noop_guard,
        "    ./build/bin/c10_NoOpDeviceGuardImpl_test\n\n"
        "(tools/check_series.py builds c10 from the patched tree, and this test\n"
        "against it, and runs it.)",
    ),
    Patch(
        "[c10] Add PrivateUse2 and PrivateUse3 device types",
        """
PyTorch reserves three dispatch keys and backend components for backends defined outside the
tree (PrivateUse1, PrivateUse2, PrivateUse3), but only PrivateUse1 has a device type, so one
such backend can be live in a process. The feature request to register several out-of-tree
backends at once asks, if devices must stay fixed at compile time, for more private-use
slots. This gives the other two reserved keys their device types:

- DeviceType::PrivateUse2 and PrivateUse3 (21 and 22; COMPILE_TIME_MAX_DEVICE_TYPES is 23),
  valid device types with default names "privateusetwo" and "privateusethree", which parse
  and print like "privateuseone".
- A name per slot, renamed once at run time: register_privateuse_backend(type, name),
  get_privateuse_backend(type), is_privateuse_backend_registered(type),
  privateuse_backend_of_name(name) and is_privateuse_backend_name(name), with
  is_privateuse_device_type() and privateuse_device_type(slot). A slot refuses an in-tree
  name, as before, and the name another slot has. register_privateuse1_backend() and the
  other PrivateUse1 functions are the slot-1 case and behave as before.
  C10_PRIVATEUSE_BACKEND_SLOTS lets code built against several releases ask for the slots.
- C10_FORALL_BACKEND_DEVICE_TYPES lists the two, so toBackendComponent(DeviceType),
  computeDispatchKey() (dense, sparse, sparse compressed, quantized) and
  dispatchKeyToDeviceType() map them to their existing keys; Backend::PrivateUse2 and
  PrivateUse3 map to and from their dense and autograd keys. toBackendComponent(DeviceType)
  is exported (C10_API), as the other mappings are.
- The storage-creation allowlist admits all three.

Arrays indexed by device type (device guards, allocators, CopyBytes, storage creation) are
sized by COMPILE_TIME_MAX_DEVICE_TYPES and grow by two entries; the static_assert on that
number moves from 21 to 23.
""",
        apply_c10_slots,
        "    ./build/bin/c10_PrivateUseSlots_test\n\n"
        "(tools/check_series.py builds c10 from the patched tree, and this test against it, and\n"
        "runs it: parsing, printing and renaming of each slot, the mappings of each, a device\n"
        "guard and an allocator registered per slot.)",
    ),
    Patch(
        "[acc] Add torch/csrc/acc's Python method tables and exit handling",
        """
Groundwork for torch::acc, the C++ side of PrivateUse1 backends written in Python (the
patches that follow). Objects that C++ keeps for the rest of the process (device guards,
hooks, generators, payloads) hold Python objects, so two pieces are shared by all of them:

- PythonMethods.h: the methods a Python object defines, looked up once at registration
  (a table per subclass), so each call from C++ is one dictionary-free call.
- Shutdown.{h,cpp}: whether the interpreter is finalizing. A C++ object released at exit
  must not touch Python then: releasing a Python reference checks Py_IsInitialized() and
  saves/restores a pending Python error, and is skipped once Python has gone.

Nothing uses them yet; the next patches do.
""",
        acc_files(*ACC_PARTS[0]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Add a device guard that forwards to a Python object",
        """
torch::acc::DeviceGuardImpl is a c10 DeviceGuardImplInterface for PrivateUse1 whose methods
call a Python object's. Each method the object defines is forwarded to it; the others
describe a synchronous device with one default stream per device: indices
0..device_count()-1, per-thread current device and stream, events complete at once.
record/block/destroy of events do nothing only because the autograd engine calls them at the
end of backward (as the comment at each says); elapsed_time raises. Indices are checked
against device_count() once, with an error that names the backend and the index.

On this release getStream()/exchangeStream() are noexcept: an error of the Python object
there is kept and raised by the next guard call that can raise.

The guard is registered from Python by torch._C._acc (a later patch).
""",
        acc_files(*ACC_PARTS[1]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Add payload tensors, whose device data is a Python object",
        """
A Python backend keeps its device data in Python objects (a NumPy array, a handle). Payload
tensors are PrivateUse1 tensors whose device data is such an object, shared with their views
and detached copies and released with the GIL (safely at interpreter shutdown). They hold a
storage that stands for the payload without data (one per payload, as large as it), so that
Tensor::is_alias_of answers for them (DDP's reducer asks it) and the engine can record a
gradient on a stream; has_storage() is false, so ATen (TensorIterator) and torch's Python
treat them as tensors without storage, as XLA's. data_ptr() raises an error that names the
device and suggests .cpu(). resizePayloadStorage releases a payload or binds a new one, as
FSDP resizes storages (a later patch). The payloads' memory figures are counted as they are
bound and released. A slot's storage_token lets meta conversion describe its data (a later
patch). EmptyTensor builds empty payload tensors (empty/empty_strided), checking
the device index against the guard (previous patch).
""",
        acc_files(*ACC_PARTS[2]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Add PrivateUse1 hooks, generators and the device allocator",
        """
torch::acc::Hooks is an at::PrivateUse1HooksInterface whose methods call a Python object's:
availability, primary context, init, pinned host memory (pointers the backend hands out) and
memory figures (the backend's own, else those of its payloads: previous patch). Device
queries go to the device guard.

Generators: the hooks may return a Python generator object per device; C++ holds it as a
real at::Generator (torch.Generator(device=...), manual_seed, get/set_rng_state), registered
through ATen/core/GeneratorForPrivateuseone.h on this release, and random operators hand it
to their kernels.

An allocator registered for PrivateUse1 (Allocator.cpp, also the device allocator
torch.accelerator's memory functions ask) refuses storage bytes with a clear error instead
of a null dereference: a Python backend's data is in payloads.
""",
        acc_files(*ACC_PARTS[3]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Read, wrap and bind the Python payloads of payload tensors",
        """
A payload tensor's device data is a Python object. Payload.{h,cpp} read what such an object
says of itself (PayloadFields: a torch.Tensor's or a NumPy array's sizes, dtype and strides
through their C APIs, else its shape/dtype/strides attributes), and turn one into a tensor
(wrap: the caller's metadata checked against the payload's own, so that a tensor never reads
memory its payload does not have) or bind one to an existing tensor with CPU's semantics for
every tensor sharing its payload (rebind, set_payload: the payload replaces the old one where
no alias reads it; else the tensor is resized as resize_ does and the values are written
through the backend's copy_into). materialize() hands a view's payload to a kernel through
the backend's as_strided function.
""",
        acc_files(*ACC_PARTS[4]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Add the view kernels of payload tensors",
        """
Views of a payload tensor share its payload; only their metadata is new. Views.cpp
registers C++ kernels for PrivateUse1's view operators that compute that metadata (directly
for the common ones: view, as_strided, transpose, slice, select, expand...; else by the
operator's meta kernel on a meta tensor of the same layout), the in-place view operators
(t_, transpose_, squeeze_, unsqueeze_, as_strided_: metadata only, as on CPU), view(dtype)
(the same dtype only: a payload has no bytes to reinterpret) and resize_ (the payload grows,
keeping its elements). None of them calls Python or takes the GIL, but resize_ where the
payload must grow. It also registers what a
release lacks for autograd on PrivateUse1 (the autograd fallback torch's own devices have).

Registration.{h,cpp}: the IMPL libraries these kernels (and the kernel bridge's and
autocast's, next patches) are registered in, alive until exit, the lookup of an aten
overload by "name.overload", and PrivateUse1's entry of the DispatchStub through which
scaled_dot_product_attention chooses its kernel (_fused_sdp_choice_stub): the backend's kernel
of aten::_fused_sdp_choice where it registered one, else the math path, as without an entry.
A backend that runs CPU's kernels (the passthrough backend of the standalone package) thus
takes CPU's flash-attention path, with CPU's gradient layout.
""",
        acc_files(*ACC_PARTS[5]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Add the kernel bridge between the dispatcher and Python kernels",
        """
register_kernel(name, fn) registers a boxed kernel for PrivateUse1 that unwraps payloads,
calls fn with payloads and plain Python values (no Python tensor objects on the way) and
wraps or rebinds the results (in-place and out= included, with the dispatcher's semantics,
and CPU's argument checks: out= resizing and dtypes, overlapping writes, decided by CPU's
kernel on stand-ins where a meta function is not CPU's rule); set_as_strided(fn) installs the
backend function that materializes a view's payload; set_fallback(fn) routes operators
without a kernel to Python (torch._decomp, then an error naming the operator). One file: the
argument conversion and the result handling belong together.
""",
        acc_files(*ACC_PARTS[6]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Let PrivateUse1 autocast use the CPU's operator lists",
        """
register_autocast_kernels() gives PrivateUse1 autocast the operator lists and cast policies of
CPU autocast, so torch.autocast(device_type=<Python backend>) casts as on the CPU.
""",
        acc_files(*ACC_PARTS[7]),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[acc] Add torch._C._acc for Python-defined PrivateUse1 backends",
        """
Binds the previous patches as torch._C._acc, registered from torch/csrc/Module.cpp
(torch::acc::initModule), with its stub torch/_C/_acc/__init__.pyi:

- DeviceGuard, PrivateUse1Hooks: the Python-subclassable bases.
- register_python_privateuseone_device_guard / register_python_privateuseone_hook: first
  registration wins and returns True, a second returns False, a wrong type is a TypeError.
  Registered objects live for the process (c10 and ATen keep raw pointers to them).
- is_python_backend(): whether PrivateUse1's guard is one of these (printing asks it).
- create_empty_tensor(shape, dtype, device_index=0), wrap(payload, ...), payload(t),
  set_payload(t, obj), rebind(t, obj) and the storage-token functions of payload tensors.
- register_kernel, set_as_strided, set_fallback (the kernel bridge), register_autocast_kernels.

The same files build out of tree as the torch_acc extension (torch_acc._C carries these names
at its top level).
""",
        apply_acc_module,
        '    python -c "import torch; print(torch._C._acc.is_python_backend())"',
    ),
    Patch(
        "[ATen] Let at::getAccelerator honour an explicitly chosen accelerator",
        """
at::getAccelerator detects the accelerator of the build (PrivateUse1 first, whenever one is
registered), so a process cannot say which accelerator is current: installing a testing
backend makes it the accelerator of every library that asks. at::setCurrentAccelerator(
device_type) makes an accelerator device type, or none (std::nullopt: CPU only), what
getAccelerator returns from then on; getAccelerator(true) raises as before when none is
chosen. The choice is one atomic, so concurrent set and get never tear. Its Python binding is
torch._C._accelerator_setCurrentAccelerator(device or None); the [accelerator] patch later in
this series adds the public torch.accelerator.set_current_accelerator.

Every C++ caller of getAccelerator follows the choice: torch.accelerator's functions,
torch.Stream()/torch.Event() without a device, pinned memory's default device, and the
autograd engine's stream stash.
""",
        apply_current_accelerator,
        "Compile-checked here (-fsyntax-only against the v2.6.0 wheel's generated headers);\n"
        f"python test/{series_rules.TEST_PREFIX}current_accelerator.py (later in this series)\n"
        "checks that the registry hands the choice to the binding.",
    ),
    Patch(
        "[ATen] Give PrivateUse2 and PrivateUse3 hooks, the accelerator choice and Python names",
        """
With PrivateUse2 and PrivateUse3 device types (the [c10] patch earlier in this series), what
ATen and torch/csrc keep for PrivateUse1 alone is kept per slot:

- Hooks: at::RegisterPrivateUseHooksInterface(device_type, hooks),
  at::isPrivateUseHooksRegistered(device_type) and at::detail::getPrivateUseHooks(device_type),
  once per slot; the PrivateUse1 functions are its PrivateUse1 case and behave as before. The
  interface is PrivateUse1HooksInterface for every slot.
  Context::getAcceleratorHooksInterface(type) returns a slot's hooks, so each slot's default
  generators (Context::defaultGenerator) and lazy initialization are its own; a storage of a
  slot is resized by that slot's hooks.
- The accelerator: isAccelerator() admits the three; getAccelerator() without an explicit
  choice returns the lowest registered slot (PrivateUse1 first, as before), and
  setCurrentAccelerator() can choose any of them.
- Python: torch._C._rename_privateuse_backend(slot, name),
  torch._C._get_privateuse_backend_name(slot) and torch._C._privateuse_backend_slots() (3),
  with slot an int from 1 to 3; a bad slot or name is a TypeError or RuntimeError that names
  the function.

Device guards, allocators and the autograd engine's device threads need no change: they are
registered or counted per device type over COMPILE_TIME_MAX_DEVICE_TYPES. Left for PrivateUse1
only: the pinned-memory allocator chosen without a device (EmptyTensor.cpp) and the
AutocastPrivateUse1 key, which has no PrivateUse2/3 counterpart.
""",
        apply_aten_slots,
        "Compile-checked here (-fsyntax-only against the v2.6.0 wheel's generated headers). The\n"
        "overlay run cannot exercise it (its torch._C is the wheel's); a full PyTorch build runs\n"
        "the three slots' bindings.",
    ),
    Patch(
        "[utils] Add the kernel registration API of Python backends",
        """
torch/utils/_acc/library.py: how a Python backend registers its kernels for PrivateUse1 on top
of torch._C._acc: impl(name, fn) for one operator (overloads and out= variants resolved),
views and as_strided, random-number generators, serialization formats of payloads
(impl_serialization) and an opt-in check of each kernel's results (TORCH_ACC_CHECK_KERNELS=1)
for backend authors. What it registers is kept in the backend's record
(torch/utils/_acc/record.py: one record per backend, found from its device type, and the
check of PrivateUse1's one slot), beside the payload helpers (payload.py) and the sharing of
payloads between processes (ipc.py).
""",
        python_files(*LIBRARY_FILES),
        "Compile-checked (tools/check_series.py, this prefix of the series); exercised by the\n"
        "tests added later in the series (patches/README.md lists which).",
    ),
    Patch(
        "[utils] Add a c10d backend for the devices of Python backends",
        """
torch/utils/_acc/distributed.py: torch.distributed on a Python backend's device. Gloo does
not accept PrivateUse1 tensors; this ProcessGroup stages the device's tensors through host
memory (or uses their memory in place, through the backend's host_view), runs each
collective with gloo and writes the results back in place, dtype, shape and strides
unchanged. Every c10d collective works, synchronous or async, and so do batch_isend_irecv,
coalescing, functional collectives, DTensor and torch.distributed.checkpoint; ranks compare
what they pass first, so a mismatch is an error naming the collective on every rank, and a
dead peer or timeout raises gloo's error, never a hang. DistributedDataParallel runs with its
own reducer. register() makes the backend known as "acc" for a device; the
next patch's setup_privateuseone_for_python_backend calls it. It reads device data with the
payload helpers of torch/utils/_acc/payload.py.
""",
        python_files(*DISTRIBUTED_FILES),
        "Compile-checked (tools/check_series.py, this prefix of the series). Multi-process\n"
        "tests of it stay in the standalone package (patches/README.md says why).",
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

Its private helpers, in torch/utils/_acc/: the decomposition fallback (fallback), autocast
registration (autocast), the default device module (device_module), the per-device
torch.compile backend and inductor's refusal (compile; registered when Dynamo and inductor
are imported, through imports.when_imported, so that setup imports neither), the registry of
named backends
(registry: any number registered, one bound to PrivateUse1) and the current accelerator's
choice (accelerator: handed to torch._C._accelerator_setCurrentAccelerator, which the
[ATen] patch adds).
""",
        apply_backend_registration,
        '    python -c "import torch; torch.utils.backend_registration.'
        "setup_privateuseone_for_python_backend('npy'); print(torch.device('npy:0'))\"",
    ),
    Patch(
        "[accelerator] Add torch.accelerator.set_current_accelerator and "
        "torch.utils.register_backend",
        """
Implements the pitch of "Allow registering multiple out-of-tree backends and setting
current_accelerator": torch.utils.register_backend(name, module, *, setup=None) records a
Python backend without binding a device type (any number of them, from torch.backends entry
points too; registering never fails at import), and
torch.accelerator.set_current_accelerator(device) chooses the current accelerator among the
build's accelerators and the registered backends, or none ("cpu"/None). Choosing a
registered backend binds it to PrivateUse1 first; a second Python backend on the one
PrivateUse1 slot is a RuntimeError that names both. The choice goes to
at::setCurrentAccelerator (the [ATen] patch). Both are thin public names over
torch/utils/_acc/accelerator.py and registry.py.
""",
        apply_accelerator_api,
        f"    python test/{series_rules.TEST_PREFIX}current_accelerator.py",
    ),
    Patch(
        "[meta_utils] Describe the storage of Python-backend payload tensors",
        """
Payload tensors (torch._C._acc) keep their device data in a Python object; their storage
holds no data. Meta and fake conversion (MetaTensorDescriber.describe_tensor) read
t.untyped_storage() to learn which tensors share data. _untyped_storage_of(t) answers for a payload
tensor with a meta storage that stands for its payload (one per payload, as large as it), so
views of one payload share one fake storage; every other tensor is described as before.
""",
        source_change("torch._subclasses.meta_utils"),
        f"    python test/{series_rules.TEST_PREFIX}fake.py",
    ),
    Patch(
        "[_tensor_str] Print the tensors of Python backends through the CPU",
        """
Printing formats a CPU copy of xla, lazy, ipu and mtia tensors, whose printing would
otherwise run a dozen small operators (slicing, abs, max, ne...) on the device. A Python
backend (torch._C._acc.is_python_backend()) is in the same position, with the added risk
that it has no kernel for some of those operators: _str_intern now copies its tensors to the
CPU too, after the device suffix is taken, so the repr still names the device. C++
PrivateUse1 backends print as before.
""",
        source_change("torch._tensor_str"),
        f"    python test/{series_rules.TEST_PREFIX}device.py",
    ),
    Patch(
        "[_tensor] Save storage-less tensors detached or in their backend's format",
        """
torch.save stores a tensor without storage (xla, lazy, mtia, and the payload tensors of
Python backends) as a CPU copy plus its requires_grad flag. The copy was self.cpu(), which
for a tensor that requires grad is a non-leaf of the autograd graph, so loading failed
when it set requires_grad on the tensor made from the copy. Tensor._reduce_ex_internal now
copies self.detach().cpu(); the flag, saved beside the copy, is set on load as before.

A Python backend may save its payloads in a format of its own instead
(torch.utils._acc.library.impl_serialization): the new helper _reduce_payload_tensor then
reduces such a tensor to the backend's rebuild function and the state its serialize
function returns, and None for every other tensor, which is saved as before.
""",
        source_change("torch._tensor", "Tensor._reduce_ex_internal"),
        f"    python test/{series_rules.TEST_PREFIX}serialization.py",
    ),
    Patch(
        "[_utils] Restore the tensors torch.load maps to a Python backend's device",
        """
torch.load restores each storage to the device it was saved on, or the one map_location
names. A Python backend's tensors have no storage to restore to: its storages stay on the CPU,
marked with the device, and _rebuild_tensor now hands each tensor rebuilt on such a storage to
_restore_tensor, which moves it to the device (torch.utils._acc.library.restore_tensor), the
tensors of one storage sharing one payload there. Every other tensor is returned as before.
""",
        source_change("torch._utils"),
        f"    python test/{series_rules.TEST_PREFIX}serialization.py",
    ),
    Patch(
        "[_tensor] Share the memory of storage-less tensors through their backend",
        """
Tensor.share_memory_ and Tensor.is_shared went through the tensor's storage, which the
payload tensors of Python backends do not have. They now ask the new helpers first:
_share_payload_memory moves a payload tensor's payload into memory other processes can open
when its backend provides IPC functions (torch.utils._acc.library.impl_ipc), else does
nothing, as for CUDA; _payload_is_shared says whether it lies there. Tensors with a storage
are handled as before.
""",
        source_change("torch._tensor", "Tensor.share_memory_", "Tensor.is_shared"),
        f"    python test/{series_rules.TEST_PREFIX}fork.py",
    ),
    Patch(
        "[data] Stack a DataLoader worker's batch of storage-less tensors on their device",
        """
A DataLoader worker stacked every batch into a tensor on a new shared-memory storage of the
batch's device (collate_tensor_fn), which the payload tensors of Python backends do not have:
default collation failed in workers. A batch of such tensors is now stacked on its device,
as in the main process, and crosses to the main process through its backend's IPC functions
(torch.utils._acc.library.impl_ipc), as a CUDA batch goes through CUDA's.
""",
        source_change("torch.utils.data._utils.collate"),
        f"    python test/{series_rules.TEST_PREFIX}fork.py",
    ),
    Patch(
        "[nn] Keep Parameter objects when Module.to moves them to or from a Python backend",
        """
Module._apply keeps a parameter's Python object when its conversion's TensorImpl is of a
compatible type (param.data = ...), and otherwise made a new Parameter per module: between a
CPU tensor and a Python backend's payload tensor that is always so, so tied weights came out
as two parameters and an optimizer made before .to kept the old ones. Such a conversion now
swaps the two tensors (torch.utils.swap_tensors), as wrapper subclasses' conversions do.
""",
        source_change("torch.nn.modules.module"),
        f"    python test/{series_rules.TEST_PREFIX}device.py",
    ),
    Patch(
        "[fsdp] Free and reallocate payload tensors' memory through their backend",
        """
FSDP2 frees the memory of unsharded parameters and all-gather buffers by resizing their
storage to 0 bytes (free_storage), and allocates it again by resizing it back
(alloc_storage). The payload tensors of Python backends hold a storage that stands for their
payload without data, which Python's storage refuses to resize. Both functions now go
through the new helper _resize_storage: for a payload tensor it releases the payload, or
binds a new one of the requested size, through torch._C._acc.resize_payload_storage; every
other tensor's storage is resized as before.

Later releases' FSDP2 also compares storage data pointers in reset_sharded_param, and the
standalone package changes that too; this base does not have that code.
""",
        source_change("torch.distributed.fsdp._fully_shard._fsdp_param"),
        "Compile-checked (tools/check_series.py, this prefix of the series). Multi-process\n"
        "tests of it stay in the standalone package (patches/README.md says why).",
    ),
    Patch(
        "[inductor] Refuse graphs on a Python backend's device before compiling them",
        """
Inductor makes tensors of its own on a graph's device (the pattern matcher's examples) before
any lowering could refuse a device it cannot generate code for. For a Python backend
(torch._C._acc.is_python_backend()) those tensors are made by Python kernels that inductor
then cannot use: compile_fx now refuses a graph with inputs, parameters or buffers on that
device first, with an error naming the compile backends that work (eager, aot_eager).
""",
        source_change("torch._inductor.compile_fx"),
        f"    python test/{series_rules.TEST_PREFIX}compile.py",
    ),
    Patch(
        "[amp] Let torch.autocast default to the current accelerator",
        """
torch.autocast(device_type=None, ...) now means the current accelerator's device type (the
one torch.accelerator reports, so the one chosen with set_current_accelerator once the
following patches are in), or "cpu" when there is none. Code that enables mixed precision
"on whatever accelerator this is" no longer has to spell the type out; every existing call
passes device_type and is unchanged. Dynamo binds autocast's signature with its defaults, so
a compiled region resolves the default the same way.
""",
        source_change("torch.amp.autocast_mode"),
        f"    python test/{series_rules.TEST_PREFIX}current_accelerator.py",
    ),
    Patch(
        "[autograd] Run the backward of Python backends on the calling thread",
        """
The autograd engine runs the backward of every device but the CPU on a worker thread per
device: backward() releases the GIL, hands the graph over to that thread and waits. The
kernels of a Python backend (torch._C._acc.is_python_backend()) take the GIL back on that
thread for every call, so the thread adds two hand-offs per backward() and a GIL hand-off
per kernel, and runs nothing in parallel. _engine_run_backward now runs a graph whose roots
include a tensor of a Python backend with multithreading disabled, the documented
torch.autograd.set_multithreading_enabled(False), for that call only: the calling thread
runs it, as for the CPU. A graph with its roots elsewhere keeps the engine's threads, and
so does every other device. A training step of a small MLP on a NumPy backend takes about
a quarter less time.
""",
        source_change("torch.autograd.graph"),
        f"    python test/{series_rules.TEST_PREFIX}guard.py",
    ),
    Patch(
        "[profiler] Read the device time of a renamed PrivateUse1 backend",
        """
torch.profiler records the device time of a PrivateUse1 backend without a kineto plugin
through the backend's profiler stubs (the KINETO_PRIVATEUSE1_FALLBACK state), which
torch.autograd.profiler.profile takes only for a renamed backend (use_device not
"privateuseone"). _parse_kineto_results then read that time only where use_device was
"privateuseone": the device time was recorded and dropped. It now reads it where use_device
is the backend's name, as later releases do. The stubs of a Python backend (torch/csrc/acc,
earlier in this series) make an operator's device time the time its kernels ran.
""",
        source_change("torch.autograd.profiler"),
        f"    python test/{series_rules.TEST_PREFIX}profiler.py",
    ),
    Patch(
        "[testing] Add a passthrough backend for the tests of Python backends",
        """
torch/testing/_internal/acc_passthrough_backend: the device "ref", a Python backend whose
payloads are CPU tensors and whose kernels are CPU's: one generic kernel, registered for every
ATen operator with a CPU kernel, runs that kernel on the payloads. Whatever ref does
differently from CPU is then the framework's doing (views, in-place and out= handling,
autograd, argument checks), which is what the tests that follow check, in one file of a few
hundred lines rather than a backend of its own. Its generator holds a CPU torch.Generator, so
random operators draw CPU's numbers after the same seed. It declares itself fork-safe: a
forked child uses CPU tensors as the parent does.
""",
        python_files(*TEST_BACKEND_FILES),
        '    python -c "from torch.testing._internal import acc_passthrough_backend as b; '
        'b.setup()"',
    ),
    Patch(
        "[test] Test Python backends: device, guard, hooks, accelerator",
        """
Tests of Python-defined PrivateUse1 backends, on the passthrough test backend: device naming,
the device module and printing, the device guard (indices, streams, events,
backward on ref:0 and ref:1 and from a thread), hooks, streams and events, torch.accelerator's
functions, the current accelerator (and autocast's default) and pinned memory. Each file
sets up a backend for its whole process, so each runs in its own process.
Dynamo cannot trace torch.Event on this release: the event tests get dynamo_skips entries.
""",
        tests(*TEST_GROUPS[0]),
        _test_plan(TEST_GROUPS[0]),
    ),
    Patch(
        "[test] Test Python backends: payload tensors and the kernel bridge",
        """
Tests of Python-defined PrivateUse1 backends, on the passthrough test backend: payload tensors
(round trips, storage errors, lifetime, shutdown), the kernel bridge, views
against CPU, in-place and out= semantics, the decomposition fallback and its errors,
mixed-device errors and fake conversion. Each file
sets up a backend for its whole process, so each runs in its own process.
""",
        tests(*TEST_GROUPS[1]),
        _test_plan(TEST_GROUPS[1]),
    ),
    Patch(
        "[test] Test Python backends: rng, autocast, serialization, compile, profiler",
        """
Tests of Python-defined PrivateUse1 backends, on the passthrough test backend: random numbers
and generators, autocast, serialization, torch.compile (eager, aot_eager, and inductor's one
error) and torch.profiler's device time per operator. Each file sets up a backend for its
whole process, so each runs in its own process.
""",
        tests(*TEST_GROUPS[2]),
        _test_plan(TEST_GROUPS[2]),
    ),
    Patch(
        "[test] Test Python backends: subclass backends, registration errors, overlap, exit, "
        "fork, c10d",
        """
Tests of Python-defined PrivateUse1 backends: the seed-style subclass backend end to end,
registration errors, and on the passthrough test backend: host work
overlapping the device's, interpreter exit with device work and threads alive, fork
(a forked child that touches the backend is an error naming it, never a hang), and the c10d
backend of Python devices (the collectives of one process; two ranks whose DDP training
matches CPU DDP over gloo). Each file sets up a backend for its whole process, so each runs
in its own process.
""",
        tests(*TEST_GROUPS[3]),
        _test_plan(TEST_GROUPS[3]),
    ),
]


def generate(out: Path, tree: Path | None = None) -> Path:
    """Write the series into ``out`` (``*.patch`` and ``series``); returns the patched tree."""
    series_rules.check_facts_complete()
    check_acc_files_carried()
    check_python_files_carried()
    check_tests_carried()
    check_source_changes_carried()
    check_cpp_tests_carried()
    check_every_file_decided()
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
        series_rules.check_patch_size(
            patch.subject, git(work, "show", "--numstat", "--format=", "HEAD")
        )
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.patch"):
        old.unlink()
    git(
        work,
        "format-patch",
        "--quiet",
        "--zero-commit",
        "--no-signature",
        "--full-index",
        "-o",
        str(out.resolve()),
        f"{start}..HEAD",
    )
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
