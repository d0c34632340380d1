r"""Check the patch series end to end; fails loudly, naming what broke.

1. Regenerating ``patches/`` from the sources changes nothing.
2. Patch by patch (each prefix 1..k of the series): ``git am`` applies it to the pristine
   base without fuzz; every C++ file it adds or changes, and every file of the series that
   includes a header it changes, compiles (``-fsyntax-only``) against the patched tree plus
   the generated headers of the ``torch==2.6.0`` wheel; every Python file of the series so
   far parses, and its imports of torch modules resolve in the tree (names imported from the
   modules the series changed are defined there). The first patch that breaks is named. The
   test patches come last and change only ``test/``, so that step 4's run of the complete
   series is every prefix's test run.
3. c10: c10 is built from the patched tree, and the googletest files the series adds are
   built against it and run.
4. Overlay run: in a torch 2.6.0 environment where the standalone package is not
   importable, the series' Python files replace the installed ones, the patched
   ``torch/csrc/acc`` is built as an extension whose ``initModule`` is handed ``torch._C``
   (loaded when torch loads ``torch.utils.backend_registration``, as the in-tree build
   defines ``torch._C._acc`` while ``torch._C`` initializes), and the series' tests pass.

Usage::

    python tools/check_series.py [--skip-overlay]
"""

import argparse
import ast
import filecmp
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_series  # noqa: E402
import series_rules  # noqa: E402
from pytorch_source import ensure_base  # noqa: E402

ROOT = gen_series.ROOT
CACHE = ROOT / ".cache"
TORCH = "2.6.0"
OVERLAY_VENV = CACHE / f"overlay-torch{TORCH}"


class CheckFailed(RuntimeError):
    pass


def _log(msg: str) -> None:
    print(f"[check_series] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise CheckFailed(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc


def check_regenerate(tmp: Path) -> None:
    out = tmp / "regenerated"
    tree = gen_series.generate(out)
    shutil.rmtree(tree)
    names = sorted(p.name for p in (ROOT / "patches").glob("*"))
    expected = sorted(p.name for p in out.iterdir())
    if names != [n for n in names if n in expected or n == "README.md"] or not set(expected) <= set(
        names
    ):
        raise CheckFailed(
            f"regenerating patches/ changes its files: {names} vs {expected}; "
            "run python tools/gen_series.py and commit"
        )
    _, mismatch, errors = filecmp.cmpfiles(ROOT / "patches", out, expected, shallow=False)
    if mismatch or errors:
        raise CheckFailed(
            f"regenerating patches/ changes {mismatch + errors}; run python tools/gen_series.py "
            "and commit"
        )


def apply_series(tree: Path, patches: Path) -> None:
    """``git am`` every patch of ``series``; an error names the patch and the failing hunk."""
    for name in (patches / "series").read_text().split():
        _git_am(tree, patches / name)


def _git_am(tree: Path, patch: Path) -> None:
    proc = subprocess.run(
        ["git", "-C", str(tree), "am", "--quiet", "--whitespace=nowarn", str(patch)],
        capture_output=True,
        text=True,
        check=False,
        env={**gen_series.IDENTITY, "PATH": "/usr/bin:/bin", "HOME": str(tree)},
    )
    if proc.returncode != 0:
        subprocess.run(["git", "-C", str(tree), "am", "--abort"], capture_output=True, check=False)
        raise CheckFailed(f"patch {patch.name} does not apply:\n{proc.stdout}{proc.stderr}")


def _module_file(tree: Path, module: str) -> Path | None:
    """The file of ``module`` in ``tree`` (a ``.py``, a package, or a ``torch._C`` stub)."""
    base = tree / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base / "__init__.pyi"):
        if candidate.is_file():
            return candidate
    if module.startswith("torch._C.") and base.with_suffix(".pyi").is_file():
        return base.with_suffix(".pyi")
    return None


def _top_level_names(path: Path) -> set[str] | None:
    """The names ``path`` defines at module level; None when it defines ``__getattr__``."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(
                n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)
            )
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):
            names.update(
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            )
    return names


def _imports(module_tree: ast.AST) -> list[ast.ImportFrom]:
    return [node for node in ast.walk(module_tree) if isinstance(node, ast.ImportFrom)]


def _signature(node: ast.ImportFrom) -> tuple:
    return node.level, node.module, tuple(alias.name for alias in node.names)


def python_problems(
    tree: Path, paths: list[str], changed: set[str], base: dict[str, str] | None = None
) -> list[str]:
    """What breaks in the series' Python files ``paths`` of this prefix: syntax, imports of
    torch modules that the tree does not have, and names imported from the modules the series
    changed that those modules do not define. ``base`` maps a path to its text in the base:
    the imports it already had there are the base's own (an upstream file may import modules
    that the open-source tree leaves out, such as ``torch._inductor.fb``), not the series'."""
    problems = []
    for path in paths:
        try:
            module_tree = ast.parse((tree / path).read_text(), path)
        except SyntaxError as e:
            problems.append(f"{path}:{e.lineno}: {e.msg}")
            continue
        package = path.rsplit("/", 1)[0].replace("/", ".")
        base_text = (base or {}).get(path)
        known = {_signature(n) for n in _imports(ast.parse(base_text))} if base_text else set()
        for node in _imports(module_tree):
            if _signature(node) in known:
                continue
            if node.level:
                parts = package.split(".")
                module = ".".join(
                    parts[: len(parts) - node.level + 1] + ([node.module] if node.module else [])
                )
            else:
                module = node.module or ""
            if module.split(".")[0] != "torch" or module == "torch._C":
                continue
            target = _module_file(tree, module)
            if target is None:
                problems.append(f"{path}:{node.lineno}: no module {module} in the tree")
                continue
            if str(target.relative_to(tree)) not in changed:
                continue
            defined = _top_level_names(target)
            for alias in node.names:
                if alias.name == "*" or defined is None or alias.name in defined:
                    continue
                if _module_file(tree, f"{module}.{alias.name}") is None:
                    problems.append(f"{path}:{node.lineno}: {module} defines no {alias.name}")
    return problems


def tests_last(k: int, name: str, touched: set[str], first_test_patch: int | None) -> int | None:
    """The first patch that changes ``test/``, given patch ``k`` (``name``) touches ``touched``;
    raises if a patch after that one changes anything else. The overlay runs the tests once, on
    the complete series: that stands for every prefix's tests only while the test patches
    come last and change nothing else."""
    code = sorted(p for p in touched if not p.startswith("test/"))
    if first_test_patch is not None and code:
        raise CheckFailed(
            f"patch {k}, {name}, changes {', '.join(code)} after patch {first_test_patch} "
            "began the tests: expected the test patches last, changing only test/"
        )
    if first_test_patch is None and len(code) < len(touched):
        return k
    return first_test_patch


def check_prefixes(tmp: Path) -> Path:
    """Apply the series one patch at a time; after each, compile the C++ it touched (and the
    series' files that include a header it touched) and check the series' Python so far.
    The first patch that breaks is named."""
    base = ensure_base(CACHE)
    tree = tmp / "applied"
    _run(["git", "clone", "--quiet", str(base), str(tree)], "cloning the base")
    patches = ROOT / "patches"
    flags = compile_flags(tree)
    changed: set[str] = set()
    base_rev = _git_lines(tree, "rev-parse", "HEAD")[0]
    base_py: dict[str, str] = {}
    first_test_patch = None
    for k, name in enumerate((patches / "series").read_text().split(), 1):
        _git_am(tree, patches / name)
        touched = set(_git_lines(tree, "diff", "--name-only", "HEAD~1", "HEAD"))
        changed |= touched
        first_test_patch = tests_last(k, name, touched, first_test_patch)
        cxx = sorted(p for p in touched if p.endswith((".cpp", ".h")) and (tree / p).exists())
        headers = [p for p in touched if p.endswith(".h")]
        for path in sorted(changed - touched):
            if path.endswith((".cpp", ".h")) and any(
                f"#include <{h.removeprefix('aten/src/')}>" in (tree / path).read_text()
                for h in headers
            ):
                cxx.append(path)
        failed = compile_cxx(tree, flags, cxx)
        failed += clang_format_problems(tree, [p for p in touched if p in cxx])
        py = sorted(p for p in changed if p.endswith((".py", ".pyi")) and (tree / p).exists())
        for path in py:
            if path not in base_py:
                shown = subprocess.run(
                    ["git", "-C", str(tree), "show", f"{base_rev}:{path}"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                base_py[path] = shown.stdout if shown.returncode == 0 else ""
        failed += python_problems(tree, py, changed, base_py)
        if failed:
            raise CheckFailed(
                f"the series breaks at patch {k}, {name} (patches 1..{k} applied):\n"
                + "\n".join(failed)
            )
        _log(f"patch {k} ok: {len(cxx)} C++ files compiled, {len(py)} Python files checked")
    return tree


def _git_lines(tree: Path, *args: str) -> list[str]:
    return _run(["git", "-C", str(tree), *args], f"git {args[0]}").stdout.split()


def wheel_include() -> Path:
    """``torch/include`` of the torch 2.6.0 wheel, extracted once (the wheel is not imported)."""
    dest = CACHE / f"torch-{TORCH}-include"
    if (dest / "torch" / "include").is_dir():
        return dest / "torch" / "include"
    wheels = CACHE / "wheels"
    if not list(wheels.glob(f"torch-{TORCH}-*.whl")):
        _log(f"downloading the torch {TORCH} wheel")
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "-d",
                str(wheels),
                f"torch=={TORCH}",
            ],
            f"pip download torch=={TORCH}",
        )
    wheel = next(wheels.glob(f"torch-{TORCH}-*.whl"))
    partial = dest.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(partial, [n for n in z.namelist() if n.startswith("torch/include/")])
    partial.rename(dest)
    return dest / "torch" / "include"


def compile_flags(tree: Path) -> list[str]:
    include = wheel_include()
    return [
        "-std=c++17",
        "-fsyntax-only",
        "-fPIC",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
        # As torch_python is built with distributed support (torch/csrc/acc binds c10d's
        # process groups under USE_DISTRIBUTED).
        "-DUSE_DISTRIBUTED",
        # The patched tree first (c10/ at its root, ATen/ under aten/src), then the wheel's
        # headers for what the tree lacks (generated ATen headers, third-party libraries).
        f"-I{tree}",
        f"-I{tree / 'aten/src'}",
        f"-I{include}",
        f"-I{include / 'torch/csrc/api/include'}",
        f"-I{include / 'kineto'}",
        f"-I{sysconfig.get_paths()['include']}",
    ]


def clang_format_problems(tree: Path, paths: list[str]) -> list[str]:
    """The files of ``paths`` that the series adds under ``torch/csrc/acc`` or ``c10/test``
    and that are not formatted as PyTorch's ``.clang-format`` says (with the clang-format
    of this environment, which ``build.sh`` installs)."""
    clang_format = Path(sys.executable).parent / "clang-format"
    ours = [p for p in paths if p.startswith(("torch/csrc/acc/", "c10/test/"))]
    if not ours or not clang_format.exists():
        return []
    proc = subprocess.run(
        [str(clang_format), "--dry-run", "--Werror", *ours],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    return [f"not clang-formatted:\n{proc.stderr[-4000:]}"] if proc.returncode else []


def compile_cxx(tree: Path, flags: list[str], paths: list[str]) -> list[str]:
    """``g++ -fsyntax-only`` of each of ``paths``, one per CPU at a time; the errors of those
    that fail."""

    def syntax_check(path: str) -> subprocess.CompletedProcess:
        cmd = ["g++", *flags, "-x", "c++", str(tree / path)]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    failed = []
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for path, proc in zip(paths, pool.map(syntax_check, paths), strict=True):
            if proc.returncode != 0:
                failed.append(f"{path} does not compile:\n{proc.stderr[-4000:]}")
            else:
                _log(f"compiles: {path}")
    return failed


#: c10's source folders, as c10/CMakeLists.txt globs them.
C10_SOURCE_DIRS = ("", "core", "core/impl", "mobile", "macros", "util")
#: c10 sources the test build leaves out, with why: the series must not change them.
C10_LEFT_OUT = {"c10/core/thread_pool.cpp": "it includes cpuinfo's headers, not installed here"}
#: How c10 and the tests are compiled: fmt (Debian's libfmt-dev) as headers only, as the
#: torch build uses its bundled fmt.
C10_FLAGS = ["-std=c++17", "-O1", "-DFMT_HEADER_ONLY", "-pthread"]


def build_c10(tree: Path, changed: list[str]) -> Path:
    """``libc10.so`` built from the patched tree's c10, as c10/CMakeLists.txt builds it
    (its sources, ``C10_BUILD_MAIN_LIB``, hidden visibility), with the torch 2.6.0 wheel's
    ``cmake_macros.h``. The series changes c10's sources and the sizes of arrays inside it
    (``COMPILE_TIME_MAX_DEVICE_TYPES``), so the tests cannot link the wheel's libc10.

    Cached by the digest of c10's files; returns the folder of the library and the
    generated header."""
    touched = sorted(set(C10_LEFT_OUT) & set(changed))
    if touched:
        raise CheckFailed(
            f"the series changes {touched}, which this check cannot build: "
            + "; ".join(C10_LEFT_OUT[p] for p in touched)
        )
    sources = sorted(
        p
        for folder in C10_SOURCE_DIRS
        for p in (tree / "c10" / folder).glob("*.cpp")
        if p.relative_to(tree).as_posix() not in C10_LEFT_OUT
    )
    digest = hashlib.sha256(" ".join(C10_FLAGS).encode())
    for path in sorted((tree / "c10").rglob("*")):
        if path.suffix in (".h", ".cpp", ".in") and "test" not in path.relative_to(tree).parts:
            digest.update(path.relative_to(tree).as_posix().encode())
            digest.update(path.read_bytes())
    dest = CACHE / f"c10-build-{digest.hexdigest()[:16]}"
    if (dest / "libc10.so").is_file():
        return dest
    for old in CACHE.glob("c10-build-*"):
        shutil.rmtree(old)
    partial = dest.with_suffix(".partial")
    macros = partial / "include" / "c10" / "macros"
    macros.mkdir(parents=True)
    shutil.copyfile(wheel_include() / "c10/macros/cmake_macros.h", macros / "cmake_macros.h")

    def compile_one(index_source: tuple[int, Path]) -> subprocess.CompletedProcess:
        index, source = index_source
        cmd = [
            "g++", *C10_FLAGS, "-fPIC", "-fvisibility=hidden", "-DC10_BUILD_MAIN_LIB",
            f"-I{partial / 'include'}", f"-I{tree}",
            "-c", str(source), "-o", str(partial / f"{index}.o"),
        ]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    _log(f"building c10 from the patched tree ({len(sources)} sources)")
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        procs = list(pool.map(compile_one, enumerate(sources)))
    failed = [
        f"{source.relative_to(tree)}:\n{proc.stderr[-3000:]}"
        for source, proc in zip(sources, procs, strict=True)
        if proc.returncode != 0
    ]
    if failed:
        raise CheckFailed("c10 of the patched tree does not compile:\n" + "\n".join(failed))
    objects = [str(partial / f"{i}.o") for i in range(len(sources))]
    _run(
        ["g++", "-shared", "-pthread", "-o", str(partial / "libc10.so"), *objects],
        "linking c10",
    )
    for obj in objects:
        os.unlink(obj)
    partial.rename(dest)
    return dest


def check_c10_tests(tree: Path, tmp: Path) -> None:
    """Build c10 from the patched tree, and against it the googletest files the series adds
    under ``c10/test``; run them."""
    base_head = _git_lines(ensure_base(CACHE), "rev-parse", "HEAD")[0]
    changed = _git_lines(tree, "diff", "--name-only", base_head, "HEAD")
    tests = [p for p in changed if p.startswith("c10/test/") and p.endswith(".cpp")]
    c10 = build_c10(tree, changed)
    for test in tests:
        binary = tmp / Path(test).stem
        _run(
            [
                "g++",
                *C10_FLAGS,
                f"-I{c10 / 'include'}",
                f"-I{tree}",
                str(tree / test),
                # Debian's libgtest-dev.
                "-lgtest_main",
                "-lgtest",
                f"-L{c10}",
                "-lc10",
                f"-Wl,-rpath,{c10}",
                "-o",
                str(binary),
            ],
            f"building {test}",
        )
        proc = _run([str(binary)], f"running {test}")
        _log(f"{test}: {proc.stdout.strip().splitlines()[-1]}")


_FINDER = '''\
"""Loads the overlay build of torch/csrc/acc when torch loads torch.utils.backend_registration,
and the stand-in for the series' ATen binding (_acc_overlay_accelerator)."""
import importlib.abc
import sys


class _AccOverlay(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch.utils.backend_registration":
            sys.meta_path.remove(self)
            import _acc_overlay  # noqa: F401  (calls torch::acc::initModule(torch._C))
            import _acc_overlay_accelerator  # noqa: F401
        return None


sys.meta_path.insert(0, _AccOverlay())
'''

_ENTRY = """\
#include <torch/csrc/acc/Module.h>
#include <torch/extension.h>

PYBIND11_MODULE(_acc_overlay, m) {
  torch::acc::initModule(pybind11::module_::import("torch._C").ptr());
}
"""


_ACCELERATOR_HEAD = '''\
"""Stands in, in the overlay only, for the series' ATen bindings, which a stock libtorch cannot
get: torch._C._accelerator_setCurrentAccelerator makes torch.accelerator's Python entry points
report the choice (torch_acc/_patches.py's accelerator_choice, imports rewritten); in-tree,
at::getAccelerator honours the choice itself, for C++ callers too.
torch._C._privateuse_backend_slots answers 1: the overlay's libc10 is the wheel's, with
PrivateUse1 only; in-tree it answers 3."""

import functools

import torch


'''
_ACCELERATOR_TAIL = """


def _set_current_accelerator(device):
    from torch.utils._acc.accelerator import chosen

    accelerator_choice(chosen)


if not hasattr(torch._C, "_accelerator_setCurrentAccelerator"):
    torch._C._accelerator_setCurrentAccelerator = _set_current_accelerator
if not hasattr(torch._C, "_privateuse_backend_slots"):
    torch._C._privateuse_backend_slots = lambda: 1
"""


def accelerator_stand_in() -> str:
    """The overlay's stand-in for ``torch._C._accelerator_setCurrentAccelerator``."""
    src = "torch_acc/_patches.py"
    text = (ROOT / src).read_text()
    wanted = {"_ORIGINALS", "original", "accelerator_choice"}
    parts = [
        ast.get_source_segment(text, node)
        for node in ast.parse(text).body
        if getattr(node, "name", None) in wanted
        or getattr(getattr(node, "target", None), "id", None) in wanted
    ]
    body = series_rules.rewrite_imports("\n\n\n".join(parts), src)
    return _ACCELERATOR_HEAD + body + _ACCELERATOR_TAIL


def _overlay_python() -> tuple[Path, bool]:
    """The overlay environment's Python, and whether the environment was made just now (so
    that its torch is still the wheel's)."""
    py = OVERLAY_VENV / "bin" / "python"
    stamp = OVERLAY_VENV / ".ready"
    # unittest-xml-reporting: run_tests() writes XML reports when CI is set.
    requirements = [
        f"torch=={TORCH}",
        "numpy",
        "expecttest",
        "ninja",
        "setuptools",
        "unittest-xml-reporting",
    ]
    fresh = not py.exists()
    if fresh:
        _run([sys.executable, "-m", "venv", str(OVERLAY_VENV)], "creating the overlay venv")
    if fresh or not stamp.exists() or stamp.read_text() != " ".join(requirements):
        _log(f"setting up the overlay environment {OVERLAY_VENV}")
        _run(
            [str(py), "-m", "pip", "install", "--quiet", *requirements],
            "installing the overlay environment",
        )
        stamp.write_text(" ".join(requirements))
    return py, fresh


_FACTS_SCRIPT = """\
import json, runpy, sys

import torch

facts, calls = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ns = runpy.run_path(sys.argv[3])
bad = [n for n, text in facts.items() if ns[n] != eval(text, {"torch": torch})]
if ns["current_accelerator_setter"]() is not eval(calls["current_accelerator_setter"]):
    bad.append("current_accelerator_setter()")
if ns["privateuse_backend_slots"]() != eval(calls["privateuse_backend_slots"]):
    bad.append("privateuse_backend_slots()")
removed = eval(calls["aten_op_removed"])
if any(ns["aten_op_removed"](op) != removed for op in ns["REMOVED_ATEN_OPS"]):
    bad.append("aten_op_removed()")
print(", ".join(bad))
"""


def check_facts(py: Path, cwd: Path) -> None:
    """The base values of rule 9 are what ``torch_acc/_compat.py`` says on torch 2.6.0."""
    proc = _run(
        [
            str(py),
            "-c",
            _FACTS_SCRIPT,
            json.dumps(series_rules.PY_FACTS),
            json.dumps(series_rules.PY_FACT_CALLS),
            str(ROOT / "torch_acc/_compat.py"),
        ],
        "evaluating torch_acc/_compat.py on the overlay's torch",
        cwd=cwd,
    )
    if proc.stdout.strip():
        raise CheckFailed(
            f"tools/series_rules.py's base values differ from torch_acc/_compat.py on torch "
            f"{TORCH} for: {proc.stdout.strip()}"
        )


def check_overlay(tree: Path, tmp: Path) -> None:
    py, fresh = _overlay_python()
    site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            "locating site-packages",
        ).stdout.strip()
    )
    for old in site.glob("_acc_overlay*"):
        old.unlink()
    # A fresh torch/ each time: unless the environment is new, reinstall the wheel's Python
    # files (an earlier run laid the series' over them), then lay the series' on top.
    if not fresh:
        _run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--force-reinstall",
                "--no-deps",
                f"torch=={TORCH}",
            ],
            "restoring the installed torch",
        )
    base = ensure_base(CACHE)
    head = _run(["git", "-C", str(base), "rev-parse", "HEAD"], "rev-parse").stdout.strip()
    changed = _run(
        ["git", "-C", str(tree), "diff", "--name-only", head, "HEAD"], "listing changed files"
    ).stdout.split()
    # Build the patched tree's torch/csrc/acc (before the Python files change, so that this
    # build imports the stock torch); torch/csrc/acc resolves to the patched tree.
    include = tmp / "overlay-include"
    (include / "torch" / "csrc").mkdir(parents=True)
    (include / "torch" / "csrc" / "acc").symlink_to(tree / "torch" / "csrc" / "acc")
    entry = tmp / "overlay_entry.cpp"
    entry.write_text(_ENTRY)
    sources = [str(entry)] + sorted(str(p) for p in (tree / "torch/csrc/acc").glob("*.cpp"))
    build = tmp / "overlay-build"
    build.mkdir()
    script = (
        "import sys, shutil; from torch.utils.cpp_extension import load; "
        f"m = load('_acc_overlay', {sources!r}, extra_include_paths=[{str(include)!r}], "
        f"build_directory={str(build)!r}, "
        "extra_cflags=['-O1', '-fvisibility=hidden', '-DUSE_DISTRIBUTED']); "
        f"shutil.copy(m.__file__, {str(site)!r})"
    )
    _log("building the patched torch/csrc/acc against the installed torch")
    _run([str(py), "-c", script], "building the overlay extension", cwd=tmp)
    for path in changed:
        if path.startswith("torch/") and path.endswith((".py", ".pyi")):
            dest = site / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / path, dest)
            _log(f"overlaid: {path}")
    (site / "_acc_overlay_accelerator.py").write_text(accelerator_stand_in())
    (site / "_acc_overlay_finder.py").write_text(_FINDER)
    (site / "_acc_overlay.pth").write_text("import _acc_overlay_finder\n")
    proc = subprocess.run(
        [str(py), "-c", "import torch_acc"],
        capture_output=True,
        text=True,
        cwd=tree / "test",
        check=False,
    )
    if proc.returncode == 0:
        raise CheckFailed("the standalone torch_acc is importable in the overlay environment")
    _run(
        [
            str(py),
            "-c",
            "import torch; assert hasattr(torch._C, '_acc'); "
            "from torch.utils.backend_registration import setup_privateuseone_for_python_backend",
        ],
        "importing torch with the overlay",
        cwd=tree / "test",
    )
    check_facts(py, tree / "test")
    tests = [f"{series_rules.TEST_PREFIX}{feature}.py" for feature in series_rules.TESTS]

    def run_test(test: str) -> subprocess.CompletedProcess:
        # As each patch's Test Plan says: the file runs itself (run_tests()).
        return subprocess.run(
            [str(py), test], capture_output=True, text=True, cwd=tree / "test", check=False
        )

    failed = []
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        procs = list(pool.map(run_test, tests))
    for test, proc in zip(tests, procs, strict=True):
        lines = proc.stderr.strip().splitlines()
        tail = " ".join(lines[-3:]) if lines else ""
        _log(f"overlay {test}: {tail}")
        if proc.returncode != 0:
            failed.append(f"{test}:\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}")
    if failed:
        raise CheckFailed("the series' tests fail in the overlay run:\n" + "\n".join(failed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-overlay", action="store_true", help="checks 1-3 only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acc-check-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            _log("1/4 regenerating the series")
            check_regenerate(tmp)
            _log("2/4 applying the series patch by patch: C++ compiled, Python checked")
            tree = check_prefixes(tmp)
            _log("3/4 building and running the series' c10 googletest files")
            check_c10_tests(tree, tmp)
            if not args.skip_overlay:
                _log("4/4 overlay run of the series' tests on torch " + TORCH)
                check_overlay(tree, tmp)
        except CheckFailed as e:
            print(f"series check FAILED: {e}", file=sys.stderr)
            return 1
    print("series check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
