r"""How the standalone sources become in-tree PyTorch sources: one rule each.

``tools/gen_series.py`` applies these rules; ``tools/README.md`` lists them. Nothing else
differs between what the standalone package builds and what the patch series carries.
"""

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent

#: Rule 1 (C++ core): every ``csrc/acc/*.{h,cpp}`` goes verbatim to ``torch/csrc/acc/``.
#: ``csrc/standalone.cpp`` stays out: in-tree, ``torch/csrc/Module.cpp`` calls
#: ``torch::acc::initModule``.
CPP_DIR = ("csrc/acc", "torch/csrc/acc")

#: Rule 2 (Python modules): each standalone module has one in-tree home.
MODULES = {
    "torch_acc._C": "torch._C._acc",
    "torch_acc._autocast": "torch.utils._acc.autocast",
    "torch_acc.accelerator": "torch.utils._acc.accelerator",
    "torch_acc.backend_registration": "torch.utils.backend_registration",
    "torch_acc.compile": "torch.utils._acc.compile",
    "torch_acc._imports": "torch.utils._acc.imports",
    "torch_acc.device_module": "torch.utils._acc.device_module",
    "torch_acc._fallback": "torch.utils._acc.fallback",
    "torch_acc._ipc": "torch.utils._acc.ipc",
    "torch_acc.distributed": "torch.utils._acc.distributed",
    "torch_acc.library": "torch.utils._acc.library",
    "torch_acc.payload": "torch.utils._acc.payload",
    "torch_acc.record": "torch.utils._acc.record",
    "torch_acc.registry": "torch.utils._acc.registry",
    "torch_acc.backends.reference": "torch.testing._internal.acc_passthrough_backend",
    # Public names: in-tree, the registry's functions are torch.accelerator's and torch.utils'.
    "torch_acc.DeviceGuard": "torch._C._acc.DeviceGuard",
    "torch_acc.PrivateUse1Hooks": "torch._C._acc.PrivateUse1Hooks",
    "torch_acc.current_accelerator": "torch.accelerator.current_accelerator",
    "torch_acc.register_backend": "torch.utils.register_backend",
    "torch_acc.setup_privateuseone_for_python_backend": (
        "torch.utils.backend_registration.setup_privateuseone_for_python_backend"
    ),
    "torch_acc.set_current_accelerator": "torch.accelerator.set_current_accelerator",
}

#: Rule 3 (files): where each carried standalone file goes: the private helpers of
#: ``backend_registration`` are one private package, ``torch/utils/_acc/`` (whose
#: ``__init__.py`` is ``PACKAGE_INIT``). ``backend_registration.py`` is
#: merged into the existing module (rule 5); the stub gets its in-tree name.
FILES = {
    "torch_acc/_autocast.py": "torch/utils/_acc/autocast.py",
    "torch_acc/_fallback.py": "torch/utils/_acc/fallback.py",
    "torch_acc/_ipc.py": "torch/utils/_acc/ipc.py",
    "torch_acc/accelerator.py": "torch/utils/_acc/accelerator.py",
    "torch_acc/compile.py": "torch/utils/_acc/compile.py",
    "torch_acc/_imports.py": "torch/utils/_acc/imports.py",
    "torch_acc/device_module.py": "torch/utils/_acc/device_module.py",
    "torch_acc/distributed.py": "torch/utils/_acc/distributed.py",
    "torch_acc/library.py": "torch/utils/_acc/library.py",
    "torch_acc/payload.py": "torch/utils/_acc/payload.py",
    "torch_acc/record.py": "torch/utils/_acc/record.py",
    "torch_acc/registry.py": "torch/utils/_acc/registry.py",
    "torch_acc/_C.pyi": "torch/_C/_acc/__init__.pyi",
    # The series' tests run on the passthrough backend (CPU's kernels on CPU payloads), a
    # test backend of one file; the NumPy backend stays in the standalone package.
    "torch_acc/backends/reference.py": "torch/testing/_internal/acc_passthrough_backend.py",
}
PACKAGE_INIT = (
    "torch/utils/_acc/__init__.py",
    '"""Private helpers of ``torch.utils.backend_registration`` for PrivateUse1 backends written\n'
    "in Python: one record per backend (``record``), kernel registration (``library``), the\n"
    "decomposition fallback, autocast, payload helpers, the default device module, the\n"
    "per-device compile backend, the registry of named backends and the current-accelerator\n"
    'choice."""\n',
)
#: Rule 4 (tests): ``test/test_<feature>.py`` becomes
#: ``test/test_privateuseone_python_backend_<feature>.py``, for these features.
TESTS = [
    "device",
    "guard",
    "hooks",
    "subclass_backend",
    "registration_errors",
    "fake",
    "current_accelerator",
    "payload",
    "bridge",
    "views",
    "inplace_out",
    "decompositions",
    "mixed_device_errors",
    "rng",
    "pinned",
    "accelerator",
    "autocast",
    "serialization",
    "streams_events",
    "compile",
    "profiler",
    "overlap",
    "exit",
    "fork",
    "c10d",
]
TEST_PREFIX = "test_privateuseone_python_backend_"

#: Rule 8 (C++ tests): googletest files under ``test/cpp/`` go to their place in the tree, where
#: CMake globs them (``c10/test/CMakeLists.txt`` builds every ``*_test.cpp``).
CPP_TESTS = {
    "test/cpp/NoOpDeviceGuardImpl_test.cpp": "c10/test/core/impl/NoOpDeviceGuardImpl_test.cpp",
    "test/cpp/PrivateUseSlots_test.cpp": "c10/test/core/PrivateUseSlots_test.cpp",
}

#: Rule 11 (standalone only): the files of the package and its tests that the series does not
#: carry, each pattern (``fnmatch``) with the reason. Every Python file under ``torch_acc/`` and
#: every ``test/test_*.py`` is carried by a rule above or listed here; anything else is a
#: generation error, so nothing is left out silently.
STANDALONE_FILES = {
    "torch_acc/__init__.py": "the package's public names: in-tree they are torch.accelerator's, "
    "torch.utils' and backend_registration's (rule 2)",
    "torch_acc/_compat.py": "version switches, resolved for the base (rule 9)",
    "torch_acc/versions.py": "the public face of _compat's facts, resolved for the base as they "
    "are (rule 9)",
    "torch_acc/_patches.py": "run-time patches, source edits in-tree (rule 6)",
    "torch_acc/backends/__init__.py": "the package's callable list of its optional backends",
    "torch_acc/backends/jax/*": "an optional backend on JAX, which PyTorch does not depend on",
    "torch_acc/backends/numpy/*": "the NumPy backend, the package's backend for users (6,000 "
    "lines); the series' tests run on the passthrough backend",
    "torch_acc/demo.py": "the package's demo script",
    "torch_acc/testing/*": "the backend-author kit shipped with the package (device suite, "
    "OpInfo harness, fuzzer, opcheck)",
    "test/test_jax_*.py": "tests of the JAX backend",
    "test/test_autoload.py": "installs entry-point packages, a standalone concern",
    "test/test_demo.py": "tests the demo script",
    "test/test_fuzz.py": "tests the fuzzer of torch_acc.testing",
    "test/test_device_suite.py": "tests the device suite of torch_acc.testing",
    "test/test_suite_*.py": "the device suite of torch_acc.testing on each packaged backend",
    "test/test_opcheck.py": "tests opcheck of torch_acc.testing",
    "test/test_passthrough.py": "tests the passthrough backend with the package's fuzzer and "
    "demo (torch_acc.testing, torch_acc.demo)",
    "test/test_registry.py": "the registry on stock wheels (one backend bound per process); "
    "in-tree test_current_accelerator covers the registry",
    "test/test_numpy_*.py": "breadth tests of the NumPy backend itself (OpInfo pass lists, "
    "models), too slow for PyTorch's CI",
    "test/test_guard_answers.py": "checks against careless guards, standalone hardening tests",
    "test/test_kernel_contract.py": "checks against careless kernels, standalone hardening tests",
    "test/test_layering.py": "the layering of the standalone package's modules",
    "test/test_payload_functions.py": "checks against careless payload functions, standalone "
    "hardening tests",
    "test/test_distributed.py": "spawns multi-process gloo groups per test (minutes); the "
    "series carries test_c10d.py, its short form",
    "test/test_memory_stats.py": "uses the package's torch_acc.wrap, which has no in-tree home, "
    "and the accelerator memory API the base lacks",
    "test/test_multiprocessing.py": "uses the package's torch_acc.wrap, which has no in-tree home",
    "test/test_series_rules.py": "tests these rules",
}

#: Tests that PYTORCH_TEST_WITH_DYNAMO=1 cannot run, as ``test/dynamo_skips/<Class>.<test>``
#: entries. On torch 2.6, Dynamo cannot trace torch.Event ("cannot create weak reference to
#: 'torch.Event' object"), whatever the device.
DYNAMO_SKIPS = [
    "TestStreamsAndEvents.test_elapsed_time_raises",
    "TestStreamsAndEvents.test_events_are_complete_at_once",
    "TestEvents.test_record_query_synchronize",
    "TestEvents.test_stream_records_and_waits",
]

_FROM_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*(?:>>> )?)"
    r"from (?P<module>torch_acc(?:\.[\w.]+)?) import (?P<names>[\w, ]+)$",
    re.MULTILINE,
)


def _split(dotted: str) -> tuple[str, str]:
    parent, _, name = dotted.rpartition(".")
    return parent, name


#: A dotted name in the package, as messages and docstrings mention it
#: (``torch_acc.library.declare_fork_safe``).
_MENTION = re.compile(r"\btorch_acc(?:\.\w+)+")


_BARE_IMPORT = re.compile(r"^[ \t]*import torch_acc\n", re.MULTILINE)


def _in_tree_mention(dotted: str) -> str:
    """Rule 2 for a dotted name that text mentions: its longest prefix with an in-tree home
    (``MODULES``) takes that home; a name without one is kept, for the check below to
    report."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):
        prefix, rest = ".".join(parts[:n]), parts[n:]
        home = MODULES.get(prefix)
        if home is not None:
            return ".".join([home, *rest])
    return dotted


def rewrite_imports(text: str, path: str) -> str:
    """Rule 2 applied to a Python file: every ``from torch_acc... import x`` is rewritten.

    ``from torch_acc import _C`` becomes ``from torch._C import _acc as _C``;
    ``from torch_acc.backend_registration import f`` becomes
    ``from torch.utils.backend_registration import f``. A dotted name that text mentions
    (``torch_acc.library.declare_fork_safe`` in a message) takes its in-tree home the same
    way. Any other mention of the package in code is an error, so nothing standalone can
    leak into the series unnoticed.
    """

    helpers = _patch_helpers()

    def one(module: str, name: str, alias: str) -> str:
        full = f"{module}.{name}"
        if full in helpers:
            module, name = _split(helpers[full])
        elif full in MODULES:
            module, name = _split(MODULES[full])
        elif module in MODULES:
            module = MODULES[module]
        else:
            raise ValueError(f"{path}: no in-tree home for {full} (tools/series_rules.py)")
        return f"from {module} import {name}" + ("" if name == alias else f" as {alias}")

    def sub(m: re.Match) -> str:
        lines = []
        for item in m.group("names").split(","):
            name, _, alias = item.strip().partition(" as ")
            lines.append(m.group("indent") + one(m.group("module"), name, alias or name))
        return "\n".join(lines)

    out = _FROM_IMPORT.sub(sub, text)
    out = _MENTION.sub(lambda m: _in_tree_mention(m[0]), out)
    # A bare ``import torch_acc`` loads the package for its run-time patches (rule 6), which
    # in-tree are torch's source: it goes. A use of the package through it is an error below.
    out = _BARE_IMPORT.sub("", out)
    for lineno, line in enumerate(out.splitlines(), 1):
        code = line.split("#", 1)[0]
        if re.search(r"\bimport torch_acc\b|\btorch_acc\.", code):
            raise ValueError(f"{path}:{lineno}: standalone reference left in-tree: {line.strip()}")
    return out


# --- Rule 9: version switches resolved for the base ----------------------------------------

#: The base's value of each fact of ``torch_acc/_compat.py`` (PyTorch v2.6.0), as the Python
#: source the series carries in its place. Every public name ``_compat.py`` defines must be
#: here: a fact without a value for the base is a generation error, and so is any use of
#: ``_compat`` that the rules below cannot resolve. ``tools/check_series.py`` compares these
#: values with ``_compat.py`` run on the torch 2.6.0 of its overlay environment.
PY_FACTS = {
    "TORCH_VERSION": "(2, 6)",
    # In-tree, torch._C._acc is the module the series adds.
    "UPSTREAM_ACC": "torch._C._acc",
    "HOOKS_HAVE_AVAILABILITY": "False",
    "DATALOADER_NEEDS_PIN_MEMORY_DEVICE": "True",
    "ACCELERATOR_MEMORY": "False",
    "FSDP2_ON_PYTHON_DEVICE": "False",
    "C10D_HOLDS_PYTHON_WORKS": "False",
    "PROCESS_GROUP_FREED_WITH_GIL": "True",
    "BOOL_SUBTRACTION_ERROR": "RuntimeError",
    "FLOAT_TO_INT_TRUNCATES_TO_MAX": "False",
    "EMPTY_RESULTS_SKIP_DTYPE_CHECKS": "True",
    "CPU_COMPLEX_DIVISION_BY_POSITION": "True",
    "REMOVED_ATEN_OPS": '{"cholesky": (2, 14)}',
    "STREAM_QUERIES_NOEXCEPT": "True",
}
#: The base's value of a call of each function of ``_compat.py``, whatever its arguments.
PY_FACT_CALLS = {
    # No operator of REMOVED_ATEN_OPS is removed before 2.14.
    "aten_op_removed": "False",
    # The series' ATen patch adds the binding.
    "current_accelerator_setter": "torch._C._accelerator_setCurrentAccelerator",
    # The series' ATen patch binds it (3 slots, with its c10 patch).
    "privateuse_backend_slots": "torch._C._privateuse_backend_slots()",
}

#: The base's value of each switch of ``csrc/acc/compat.h``: ``#if`` conditions (``#if X``,
#: ``#if !X``, ``if constexpr (X)``) and tokens put in the code. Every ``TORCH_ACC_`` macro
#: defined there must be in one of the two.
CPP_FACTS = {
    "TORCH_ACC_HOOKS_HAVE_AVAILABILITY": False,
    "TORCH_ACC_STREAM_QUERIES_NOEXCEPT": True,
    "TORCH_ACC_GENERATOR_REGISTRY": True,
    "TORCH_ACC_HAVE_DEVICE_ALLOCATOR": False,
    "TORCH_ACC_DETACH_COPIES_FRESH_RESULT": True,
    "TORCH_ACC_PROFILER_KINETO_PLUGIN": False,
}
CPP_TOKENS = {"TORCH_ACC_STREAM_NOEXCEPT": "noexcept"}
#: compat.h's own helper, used only inside it.
CPP_HELPERS = {"TORCH_ACC_TORCH_AT_LEAST"}


class SeriesRuleError(ValueError):
    """A standalone construct that no rule turns into in-tree code; the message names it."""


def check_facts_complete() -> None:
    """Every fact of ``_compat.py`` and ``compat.h`` has a value for the base."""
    tree = ast.parse((_ROOT / "torch_acc/_compat.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    missing = sorted(n for n in names if n not in PY_FACTS and n not in PY_FACT_CALLS)
    if missing:
        raise SeriesRuleError(
            f"torch_acc/_compat.py: no value for the base for {', '.join(missing)} "
            "(tools/series_rules.py: PY_FACTS / PY_FACT_CALLS)"
        )
    header = (_ROOT / "csrc/acc/compat.h").read_text()
    macros = set(re.findall(r"^#define (TORCH_ACC_\w+)", header, re.MULTILINE))
    missing = sorted(macros - set(CPP_FACTS) - set(CPP_TOKENS) - CPP_HELPERS)
    if missing:
        raise SeriesRuleError(
            f"csrc/acc/compat.h: no value for the base for {', '.join(missing)} "
            "(tools/series_rules.py: CPP_FACTS / CPP_TOKENS)"
        )


def resolve_cpp(text: str, path: str) -> str:
    """Rule 9 for C++: ``compat.h``'s switches replaced by the base's code.

    ``#if X``/``#if !X`` blocks (with ``#else``) keep the branch the base takes, ``if
    constexpr (X) {...} else {...}`` keeps its block, tokens (``TORCH_ACC_STREAM_NOEXCEPT``)
    become their value and the ``compat.h`` include goes. A ``TORCH_ACC_`` or
    ``TORCH_VERSION_`` name left over is an unresolved switch: an error naming it.
    """
    text = text.replace("#include <torch/csrc/acc/compat.h>\n", "")
    out: list[str] = []
    # A stack of the preprocessor blocks open here: None for another's #if, else whether
    # the current branch of one of ours is kept.
    stack: list[bool | None] = []
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        directive = line.strip()
        m = re.fullmatch(r"#if (!?)(TORCH_ACC_\w+)", directive)
        if m:
            if m.group(2) not in CPP_FACTS:
                raise SeriesRuleError(f"{path}:{lineno}: unresolved version switch {directive}")
            stack.append(CPP_FACTS[m.group(2)] != bool(m.group(1)))
            continue
        if directive.startswith("#if"):
            stack.append(None)
        elif directive.startswith("#el") and stack and stack[-1] is not None:
            if directive != "#else":
                raise SeriesRuleError(f"{path}:{lineno}: cannot resolve {directive}")
            stack[-1] = not stack[-1]
            continue
        elif directive.startswith("#endif"):
            if stack.pop() is not None:
                continue
        if all(kept is not False for kept in stack):
            out.append(line)
    text = _clang_format_layout("".join(out))
    text = _resolve_if_constexpr(text, path)
    for token, value in CPP_TOKENS.items():
        text = re.sub(rf"\b{token}\b", value, text)
        # clang-format's layout: a qualifier alone on a continuation line joins the line
        # above when the joined line fits.
        text = re.sub(
            r"^(?P<head>[^\n]*\S)\n[ \t]+(?P<tail>" + re.escape(value) + r"\b[^\n]*)$",
            lambda m: (
                f"{m['head']} {m['tail']}" if len(m["head"]) + 1 + len(m["tail"]) <= 80 else m[0]
            ),
            text,
            flags=re.MULTILINE,
        )
    for lineno, line in enumerate(text.splitlines(), 1):
        if m := re.search(r"\b(TORCH_ACC_\w+|TORCH_VERSION_\w+)", line):
            raise SeriesRuleError(
                f"{path}:{lineno}: unresolved version switch {m.group(1)} "
                "(tools/series_rules.py: CPP_FACTS)"
            )
    return text


def _clang_format_layout(text: str) -> str:
    """What clang-format (PyTorch's settings) makes of the code around a removed block: at
    most one empty line, none at the start or end of a block or after an access specifier,
    and each run of ``#include`` lines sorted (the ``#if`` lines no longer split it)."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    text = re.sub(r"(\{|\b(?:public|private|protected):)\n\n", r"\1\n", text)
    text = re.sub(r"\n\n([ \t]*\})", r"\n\1", text)
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("#include "):
            run.append(line)
            continue
        out.extend(sorted(run))
        run = []
        out.append(line)
    return "".join(out)


def _block_end(text: str, open_brace: int) -> int:
    """The index just past the brace that closes the one at ``open_brace``."""
    depth = 0
    for i in range(open_brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise SeriesRuleError("unbalanced braces")


def _resolve_if_constexpr(text: str, path: str) -> str:
    pattern = re.compile(
        r"^(?P<indent>[ \t]*)if constexpr \((?P<neg>!?)(?P<name>TORCH_ACC_\w+)\) \{\n", re.MULTILINE
    )
    while m := pattern.search(text):
        if m["name"] not in CPP_FACTS:
            raise SeriesRuleError(f"{path}: unresolved version switch {m['name']}")
        then_end = _block_end(text, m.end() - 2)
        then_body = text[m.end() : then_end - 1]
        end, else_body = then_end, ""
        if text.startswith(" else {\n", then_end):
            end = _block_end(text, then_end + len(" else "))
            else_body = text[then_end + len(" else {\n") : end - 1]
        if not text.startswith("\n", end):
            raise SeriesRuleError(f"{path}: cannot resolve the if constexpr on {m['name']}")
        kept = then_body if CPP_FACTS[m["name"]] != bool(m["neg"]) else else_body
        lines = kept.rstrip(" \t").splitlines(keepends=True)
        dedented = "".join(
            line[2:] if line.startswith(m["indent"] + "  ") else line for line in lines
        )
        text = text[: m.start()] + dedented + text[end + 1 :]
    return text


@dataclass(frozen=True)
class _Ref:
    """An object known by its dotted in-tree path: a module, a function, ``torch._C._acc``."""

    path: str


_UNKNOWN = object()

#: Standalone modules that the series does not carry (``from torch_acc import <name>``):
#: ``_compat`` and its public face ``versions`` (rule 9: their facts resolved for the base) and
#: ``_patches`` (rule 6: its changes are source edits in-tree). In-tree code that still uses
#: one is an error.
FACT_MODULES = ("_compat", "versions")
STANDALONE_ONLY = (*FACT_MODULES, "_patches")

#: Builtins that generate or run code at run time; in-tree code must not call them.
FORBIDDEN_CALLS = ("exec", "eval", "compile")


def _fact_text(node: ast.expr, path: str) -> str:
    """The base's value, as source, of ``_compat.X`` or of a call ``_compat.f(...)``."""
    if isinstance(node, ast.Call):
        name = node.func.attr
        if name in PY_FACT_CALLS:
            return PY_FACT_CALLS[name]
    elif node.attr in PY_FACTS:
        return PY_FACTS[node.attr]
    raise SeriesRuleError(
        f"{path}:{node.lineno}: unresolved version switch {ast.unparse(node)} "
        "(no value for the base in tools/series_rules.py: PY_FACTS / PY_FACT_CALLS)"
    )


def _parse_value(text: str):
    try:
        return ast.literal_eval(text)
    except ValueError:
        if re.fullmatch(r"[A-Za-z_][\w.]*", text):
            return _Ref(text)
        return _UNKNOWN


def _is_compat(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in FACT_MODULES


def _value(node: ast.expr, names: dict, path: str):
    """What ``node`` evaluates to on the base, or ``_UNKNOWN``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and _is_compat(node.func.value)
        and node.func.attr in PY_FACT_CALLS
    ):
        return _parse_value(_fact_text(node, path))
    if isinstance(node, ast.Attribute) and _is_compat(node.value):
        return _parse_value(_fact_text(node, path))
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple | ast.List):
        items = [_value(e, names, path) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.Name):
        return names.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _value(node.value, names, path)
        return _Ref(f"{base.path}.{node.attr}") if isinstance(base, _Ref) else _UNKNOWN
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _value(node.operand, names, path)
        return _UNKNOWN if v is _UNKNOWN else not v
    if isinstance(node, ast.BoolOp):
        values = [_value(v, names, path) for v in node.values]
        if any(v is _UNKNOWN for v in values):
            return _UNKNOWN
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _value(node.left, names, path)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _value(right_node, names, path)
            if left is _UNKNOWN or right is _UNKNOWN:
                return _UNKNOWN
            try:
                ok = _compare(op, left, right)
            except TypeError:
                return _UNKNOWN
            if not ok:
                return False
            left = right
        return True
    return _UNKNOWN


def _compare(op: ast.cmpop, left, right) -> bool:
    if isinstance(op, ast.Is | ast.IsNot):
        same = (
            left == right if isinstance(left, _Ref) or isinstance(right, _Ref) else (left is right)
        )
        return same if isinstance(op, ast.Is) else not same
    if isinstance(op, ast.In | ast.NotIn):
        inside = left in right
        return inside if isinstance(op, ast.In) else not inside
    if isinstance(left, _Ref) or isinstance(right, _Ref):
        raise TypeError("no order between references")
    return {
        ast.Eq: lambda: left == right,
        ast.NotEq: lambda: left != right,
        ast.Lt: lambda: left < right,
        ast.LtE: lambda: left <= right,
        ast.Gt: lambda: left > right,
        ast.GtE: lambda: left >= right,
    }[type(op)]()


def _aliases(tree: ast.Module) -> dict:
    """What each module-level import binds, as in-tree references."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = _Ref(
                    a.asname and a.name or a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if node.module.startswith("torch_acc"):
                    full = MODULES.get(full) or MODULES.get(node.module, node.module) + (
                        f".{a.name}"
                    )
                names[a.asname or a.name] = _Ref(full)
    return names


class _Lines:
    """A Python file as lines of bytes, for edits at the positions ``ast`` reports."""

    def __init__(self, text: str):
        self.lines = text.encode().splitlines(keepends=True)

    def text(self) -> str:
        return b"".join(self.lines).decode()

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text(), node)

    def replace_span(self, node: ast.AST, new: str) -> None:
        first, last = self.lines[node.lineno - 1], self.lines[node.end_lineno - 1]
        joined = first[: node.col_offset] + new.encode() + last[node.end_col_offset :]
        self.lines[node.lineno - 1 : node.end_lineno] = joined.splitlines(keepends=True)

    def indent(self, lineno: int) -> str:
        line = self.lines[lineno - 1].decode()
        return line[: len(line) - len(line.lstrip())]

    def replace_lines(self, first: int, last: int, new: list[bytes]) -> None:
        """Lines ``first..last`` (1-based, inclusive) replaced; when nothing replaces them,
        the blank lines around them are cut back to the longer of the two runs."""
        self.lines[first - 1 : last] = new
        if new:
            return
        at = first - 1
        before = 0
        while at - before - 1 >= 0 and not self.lines[at - before - 1].strip():
            before += 1
        after = 0
        while at + after < len(self.lines) and not self.lines[at + after].strip():
            after += 1
        opens_block = before == 0 and at > 0 and self.lines[at - 1].rstrip().endswith(b":")
        del self.lines[at : at + (after if opens_block else min(before, after))]


def _block(lines: _Lines, first: int, last: int, indent: str) -> list[bytes]:
    """Lines ``first..last`` dedented and indented by ``indent``."""
    text = textwrap.dedent(b"".join(lines.lines[first - 1 : last]).decode())
    return [
        (indent + line if line.strip() else line).encode()
        for line in text.splitlines(keepends=True)
    ]


def _parents(tree: ast.AST) -> dict:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _fold_if(lines: _Lines, node: ast.If, keep_body: bool, path: str) -> None:
    indent = lines.indent(node.lineno)
    if keep_body:
        new = _block(lines, node.test.end_lineno + 1, node.body[-1].end_lineno, indent)
    elif not node.orelse:
        new = []
    elif lines.lines[node.orelse[0].lineno - 1].lstrip().startswith(b"elif "):
        first = node.orelse[0].lineno
        new = [
            lines.lines[first - 1].replace(b"elif ", b"if ", 1),
            *lines.lines[first : node.end_lineno],
        ]
    else:
        else_line = next(
            n
            for n in range(node.body[-1].end_lineno + 1, node.orelse[0].lineno + 1)
            if lines.lines[n - 1].lstrip().startswith(b"else")
        )
        new = _block(lines, else_line + 1, node.end_lineno, indent)
    lines.replace_lines(node.lineno, node.end_lineno, new)


def _skip_decorator(node: ast.expr) -> str | None:
    """``"skipIf"``/``"skipUnless"`` when ``node`` is ``unittest.skipIf(...)`` or the like."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in ("skipIf", "skipUnless") and node.args:
            return name
    return None


def _drop_decorated(lines: _Lines, tree: ast.Module, decorators: dict) -> None:
    """Apply skip decorators known on the base: ``decorators`` maps each decorator node to
    whether it always skips. A test that always skips goes; a decorator that never does goes."""
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            for dec in node.decorator_list:
                if dec in decorators:
                    if decorators[dec]:
                        edits.append((node.decorator_list[0].lineno, node.end_lineno))
                    else:
                        edits.append((dec.lineno, dec.end_lineno))
    for first, last in sorted(set(edits), reverse=True):
        lines.replace_lines(first, last, [])


def _fold_one(lines: _Lines, path: str) -> bool:
    """One step of rule 9 for Python; False when no ``_compat`` is left to resolve."""
    text = lines.text()
    tree = ast.parse(text)
    parents = _parents(tree)
    names = _aliases(tree)
    sites = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and _is_compat(n.value)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    if not sites:
        return False
    fact = sites[0]
    if (
        isinstance(parents[fact], ast.Call)
        and parents[fact].func is fact
        and fact.attr in PY_FACT_CALLS
    ):
        fact = parents[fact]
    owner = parents[fact]
    # A local bound once to a fact: its uses read the fact.
    if (
        isinstance(owner, ast.Assign)
        and len(owner.targets) == 1
        and isinstance(owner.targets[0], ast.Name)
    ):
        scope = owner
        while scope in parents and not isinstance(scope, ast.FunctionDef):
            scope = parents[scope]
        if isinstance(scope, ast.FunctionDef):
            local = owner.targets[0].id
            stores = [
                n
                for n in ast.walk(scope)
                if isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, ast.Store)
            ]
            if len(stores) == 1:
                uses = [
                    n
                    for n in ast.walk(scope)
                    if isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, ast.Load)
                ]
                source = lines.segment(fact)
                for use in sorted(uses, key=lambda n: (n.lineno, n.col_offset), reverse=True):
                    lines.replace_span(use, source)
                lines.replace_lines(owner.lineno, owner.end_lineno, [])
                return True
    # The construct whose condition the fact is part of.
    top = fact
    while isinstance(parents[top], ast.expr):
        parent = parents[top]
        if _skip_decorator(parent) and parent.args[0] is top:
            break
        if isinstance(parent, ast.IfExp) and parent.test is top:
            value = _value(top, names, path)
            if value is not _UNKNOWN:
                lines.replace_span(parent, lines.segment(parent.body if value else parent.orelse))
                return True
        if isinstance(parent, ast.BoolOp):
            values = [_value(v, names, path) for v in parent.values]
            if all(v is _UNKNOWN for v in values):
                top = parent
                continue
            known = [v for v in values if v is not _UNKNOWN]
            is_and = isinstance(parent.op, ast.And)
            if any(bool(v) != is_and for v in known):
                lines.replace_span(parent, repr(not is_and))
                return True
            rest = [n for n, v in zip(parent.values, values, strict=True) if v is _UNKNOWN]
            joiner = " and " if is_and else " or "
            lines.replace_span(
                parent, joiner.join(lines.segment(n) for n in rest) if rest else repr(is_and)
            )
            return True
        top = parent
    holder = parents[top]
    value = _value(top, names, path)
    if isinstance(holder, ast.If) and holder.test is top and value is not _UNKNOWN:
        _fold_if(lines, holder, bool(value), path)
        return True
    if (skip := _skip_decorator(holder)) and holder.args[0] is top and value is not _UNKNOWN:
        always = bool(value) == (skip == "skipIf")
        statement = parents[holder]
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            _drop_decorated(lines, tree, {holder: always})
            return True
        if (
            isinstance(statement, ast.Assign)
            and statement in tree.body
            and isinstance(statement.targets[0], ast.Name)
        ):
            alias = statement.targets[0].id
            decorators = {
                dec: always
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.ClassDef)
                for dec in node.decorator_list
                if isinstance(dec, ast.Name) and dec.id == alias
            }
            first, last = statement.lineno, statement.end_lineno
            _drop_decorated(lines, tree, decorators)
            # The alias is above its uses: its lines have not moved.
            lines.replace_lines(first, last, [])
            return True
    lines.replace_span(fact, _fact_text(fact, path))
    return True


def _drop_import_names(lines: _Lines, tree: ast.Module, drop: set[str]) -> None:
    """``from torch_acc... import`` lines without the names in ``drop`` (a line left with
    none goes)."""
    for node in sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)),
        key=lambda n: n.lineno,
        reverse=True,
    ):
        if not (node.module or "").startswith("torch_acc"):
            continue
        keep = [a for a in node.names if (a.asname or a.name) not in drop]
        if len(keep) == len(node.names):
            continue
        node.names = keep
        new = [(lines.indent(node.lineno) + ast.unparse(node) + "\n").encode()] if keep else []
        lines.replace_lines(node.lineno, node.end_lineno, new)


def _patch_helpers() -> dict[str, str]:
    """Rule 6's helpers: ``torch_acc._patches.<helper>`` -> its in-tree home."""
    tree = ast.parse((_ROOT / "torch_acc/_patches.py").read_text())
    changes = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "SOURCE_CHANGES"
    )
    return {
        f"torch_acc._patches.{c['helper']}": f"{c['module']}._{c['helper']}"
        for c in changes
        if "helper" in c
    }


def _drop_runtime_patching(lines: _Lines, path: str) -> None:
    """Rule 6 for the code that calls ``_patches``: in-tree its changes are in the source.

    ``_patches.apply()`` goes; ``_patches.original("f")`` is ``torch.accelerator.f``, which
    in-tree honours the choice itself; a test of ``_patches``' own machinery (one that uses
    a name imported from it that has no in-tree home) goes with that import.
    """
    tree = ast.parse(lines.text())
    helpers = _patch_helpers()
    standalone = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch_acc._patches":
            standalone.update(
                a.asname or a.name
                for a in node.names
                if f"torch_acc._patches.{a.name}" not in helpers
            )
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(n, ast.Name) and n.id in standalone for n in ast.walk(node)
        ):
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            edits.append(("lines", first, node.end_lineno, node))
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value) == "_patches.apply()"
        ):
            edits.append(("lines", node.lineno, node.end_lineno, node))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "torch_acc"
            and [a.name for a in node.names] == ["_patches"]
            and node.col_offset > 0
        ):
            edits.append(("lines", node.lineno, node.end_lineno, node))
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "_patches.original"
            and isinstance(node.args[0], ast.Constant)
        ):
            edits.append(("span", node.lineno, node.col_offset, node))
    # Bottom-up, so that earlier positions stay valid; a span inside a dropped function is
    # dropped with it.
    dropped = []
    for kind, first, second, node in sorted(edits, key=lambda e: (e[1], e[2]), reverse=True):
        if any(d.lineno <= node.lineno <= d.end_lineno for d in dropped):
            continue
        if kind == "lines":
            lines.replace_lines(first, second, [])
            dropped.append(node)
        else:
            lines.replace_span(node, f"torch.accelerator.{node.args[0].value}")
    _drop_import_names(lines, ast.parse(lines.text()), standalone)


def _used_names(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _drop_unused_imports(lines: _Lines, used_before: set[str]) -> None:
    """Module-level imports that only the dropped code used go with it."""
    tree = ast.parse(lines.text())
    unused = _used_names(tree)
    for node in reversed(tree.body):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        bound = [(a.asname or a.name.split(".")[0]) for a in node.names]
        gone = [b for b in bound if b in used_before and b not in unused]
        if gone and len(gone) == len(bound):
            lines.replace_lines(node.lineno, node.end_lineno, [])
        elif gone:
            node.names = [a for a, b in zip(node.names, bound, strict=True) if b not in gone]
            lines.lines[node.lineno - 1 : node.end_lineno] = [(ast.unparse(node) + "\n").encode()]


def resolve_python(text: str, path: str) -> str:
    """Rules 6 and 9 for a carried Python file: no ``_compat``, no ``_patches``, no exec.

    Each use of a ``_compat`` fact takes the base's value (``PY_FACTS``): a condition that
    becomes known keeps the branch the base takes (``if``, ``x if c else y``, ``and``/``or``),
    a skip decorator known to skip drops its test (one known not to skip goes itself), a local
    bound to a fact is replaced by it, and any other use becomes the value's source. Then the
    uses of ``_patches`` go (``_drop_runtime_patching``). An unresolved use of either module
    or a call of ``exec``/``eval``/``compile`` is an error naming the file and line.
    """
    lines = _Lines(text)
    used_before = _used_names(ast.parse(text))
    while _fold_one(lines, path):
        pass
    _drop_runtime_patching(lines, path)
    for node in ast.walk(ast.parse(lines.text())):
        if isinstance(node, ast.Name) and node.id in STANDALONE_ONLY:
            raise SeriesRuleError(
                f"{path}:{node.lineno}: in-tree code uses the standalone-only {node.id} "
                f"(not carried by the series; tools/series_rules.py rules 6 and 9)"
            )
    _drop_import_names(lines, ast.parse(lines.text()), set(STANDALONE_ONLY))
    _drop_unused_imports(lines, used_before)
    out = lines.text()
    for node in ast.walk(ast.parse(out)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_CALLS
        ):
            raise SeriesRuleError(
                f"{path}:{node.lineno}: forbidden in-tree construct {node.func.id}(): in-tree "
                "code is edited, not generated or patched at run time"
            )
    return out


# --- Rule 10: reviewable patches -------------------------------------------------------------

#: The most lines a patch may change (added plus removed), unless it adds one cohesive new
#: file (a ``.cpp`` with its ``.h`` counts as one; listing it in ``BUILD_LISTS`` is part of
#: adding it).
MAX_PATCH_LINES = 1500
BUILD_LISTS = ("build_variables.bzl",)


def check_patch_size(subject: str, numstat: str) -> None:
    """Rule 10 for one patch, given ``git show --numstat --format=`` of its commit: an
    oversized patch is an error naming it and its largest files."""
    rows = []
    for line in numstat.splitlines():
        added, removed, name = line.split("\t")
        rows.append((int(added) + int(removed), int(removed), name))
    total = sum(r[0] for r in rows)
    if total <= MAX_PATCH_LINES:
        return
    added = [r for r in rows if r[2] not in BUILD_LISTS]
    stems = {Path(name).with_suffix("").as_posix() for _, _, name in added}
    if len(stems) == 1 and all(removed == 0 for _, removed, _ in added):
        return
    largest = ", ".join(f"{name} ({n})" for n, _, name in sorted(rows, reverse=True)[:3])
    raise SeriesRuleError(
        f"patch {subject!r} changes {total} lines, more than {MAX_PATCH_LINES}: split it "
        f"(largest: {largest})"
    )
