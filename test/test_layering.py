# Owner(s): ["module: PrivateUse1"]
"""The Python core's modules are layered: each imports only modules below it.

``LAYERS`` is the declared order, lowest first. A module imports (at its top or inside a
function) only modules listed before it, never reads another module's private (``_name``)
attributes, and imports without any module above it loaded. A function-level import of a
torch_acc module is listed in ``LAZY_IMPORTS`` with its reason.
"""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from torch.testing._internal.common_utils import run_tests, TestCase

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch_acc"

#: The core modules of ``torch_acc``, lowest first; the package's ``__init__`` is above them
#: all, and the reference backends, ``testing`` and ``demo`` above that (public API only).
LAYERS = [
    "_C",  # the compiled extension
    "_compat",  # version differences
    "_imports",  # work that waits for a module to be imported
    "versions",  # the version facts a backend may read (public)
    "payload",  # payload tensors: wrap, payload, layout, describe
    "record",  # one record per backend, the slot check
    "_ipc",  # processes: sharing, fork
    "library",  # kernels, payload functions, serialization, IPC registration
    "_fallback",  # the decomposition fallback
    "_autocast",  # autocast kernels
    "compile",  # the per-device compile backend, inductor's refusal
    "device_module",  # the default torch.<name> module
    "distributed",  # the acc c10d backend
    "_patches",  # run-time patches of a stock wheel (callbacks, no upward import)
    "backend_registration",  # setup
    "registry",  # records and binds named backends
    "accelerator",  # the current-accelerator choice
]
#: Files of the package outside the core, above ``__init__``.
ABOVE = {"__init__", "demo"}

#: Function-level imports of torch_acc modules, each with why it is not at the module's top.
LAZY_IMPORTS = {
    # The helpers are copied into torch modules in-tree (torch/_tensor.py...), which cannot
    # import torch.utils._acc while torch loads.
    ("_patches", "_C"): "in-tree helper",
    ("_patches", "_ipc"): "in-tree helper",
    ("_patches", "library"): "in-tree helper",
    ("_patches", "compile"): "in-tree helper",
    ("_patches", "_imports"): "apply() only: the module imports nothing of torch_acc at its top",
    ("_patches", "_compat"): "apply() only: the module imports nothing of torch_acc at its top",
    # Loads torch.distributed, only where torch has it.
    ("backend_registration", "distributed"): "import cost",
}

#: Reads of another module's private names that cannot be avoided: none.
PRIVATE_ALLOWED: set[tuple[str, str]] = set()

#: What is written against torch_acc's public API only, as a backend or a test kit outside
#: this repository would be: no private module or name of the package is imported or read.
PUBLIC_API_USERS = ["backends", "testing", "demo.py"]


def _private_reads(tree: ast.Module, names) -> list[ast.Attribute]:
    """Reads ``x._attr`` (not dunders) in ``tree`` of a name ``x`` in ``names``."""
    return [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in names
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]


def _module_names() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }


def _imports(tree: ast.Module) -> list[tuple[str, str, bool]]:
    """``(torch_acc module imported, name it is bound to, at the module's top)`` for each
    import of a torch_acc module, and ``(module, name, top)`` for each name imported from one
    (with ``module`` the module it comes from)."""
    top = set(map(id, tree.body))
    modules = _module_names()
    found = []
    for node in ast.walk(tree):
        at_top = id(node) in top
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "torch_acc":
                continue
            if len(parts) == 1:
                for a in node.names:
                    found.append((a.name, a.asname or a.name, at_top))
            else:
                for a in node.names:
                    found.append((parts[1], f"{parts[1]}.{a.name}", at_top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "torch_acc" and len(parts) > 1 and parts[1] in modules:
                    found.append((parts[1], a.asname or a.name, at_top))
    return found


class TestLayering(TestCase):
    def test_every_module_has_a_layer(self):
        self.assertEqual(
            sorted(p.stem for p in PACKAGE.glob("*.py")),
            sorted(set(LAYERS[1:]) | ABOVE),
        )

    def test_imports_point_down(self):
        wrong = []
        for i, name in enumerate(LAYERS[1:], 1):
            tree = ast.parse((PACKAGE / f"{name}.py").read_text())
            for imported, _, at_top in _imports(tree):
                if imported not in LAYERS[:i]:
                    wrong.append(f"{name} imports {imported}, which is not below it")
                elif not at_top and (name, imported) not in LAZY_IMPORTS:
                    wrong.append(f"{name} imports {imported} in a function (not in LAZY_IMPORTS)")
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_no_private_names_of_other_modules(self):
        modules = _module_names()
        wrong = []
        for name in [*LAYERS[1:], *sorted(ABOVE)]:
            tree = ast.parse((PACKAGE / f"{name}.py").read_text())
            aliases = {}
            for imported, bound, _ in _imports(tree):
                if "." not in bound:
                    aliases[bound] = imported
                    continue
                attr = bound.split(".", 1)[1]
                if attr.startswith("_") and attr not in modules:
                    if (name, bound) not in PRIVATE_ALLOWED:
                        wrong.append(f"{name} imports {bound}")
            for node in _private_reads(tree, aliases):
                read = f"{aliases[node.value.id]}.{node.attr}"
                if (name, read) not in PRIVATE_ALLOWED:
                    wrong.append(f"{name}:{node.lineno} reads {read}")
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_backends_and_the_kit_use_public_names_only(self):
        wrong = []
        files = [f for part in PUBLIC_API_USERS
                 for f in ([PACKAGE / part] if part.endswith(".py")
                           else sorted((PACKAGE / part).rglob("*.py")))]
        self.assertGreater(len(files), 10)
        for path in files:
            where = path.relative_to(ROOT)
            tree = ast.parse(path.read_text())
            bound = set()  # names bound to torch_acc or to something imported from it
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                        node.module.split(".")[0] == "torch_acc":
                    parts = node.module.split(".")[1:] + [a.name for a in node.names]
                    for a in node.names:
                        bound.add(a.asname or a.name)
                    if any(p.startswith("_") for p in parts):
                        wrong.append(f"{where}:{node.lineno} imports "
                                     f"{node.module}: {[a.name for a in node.names]}")
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] != "torch_acc":
                            continue
                        bound.add((a.asname or a.name).split(".")[0])
                        if any(p.startswith("_") for p in a.name.split(".")[1:]):
                            wrong.append(f"{where}:{node.lineno} imports {a.name}")
            for node in _private_reads(tree, bound):
                wrong.append(f"{where}:{node.lineno} reads {node.value.id}.{node.attr}")
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_each_layer_imports_without_those_above(self):
        # The package's __init__ imports everything: the modules are loaded here as members of
        # an empty package of the same path, one layer at a time.
        script = textwrap.dedent(
            f"""
            import importlib, sys, types
            import torch
            package = types.ModuleType("torch_acc")
            package.__path__ = [{str(PACKAGE)!r}]
            sys.modules["torch_acc"] = package
            layers = {LAYERS!r}
            for i, name in enumerate(layers):
                importlib.import_module("torch_acc." + name)
                loaded = {{m.split(".")[1] for m in sys.modules if m.startswith("torch_acc.")}}
                above = sorted(loaded - set(layers[: i + 1]))
                if above:
                    sys.exit(f"importing {{name}} loaded {{above}}, which are above it")
            print("ok")
            """
        )
        # Without the torch.backends entry points, which would import the whole package.
        env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=False, env=env
        )
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        self.assertEqual(out.stdout.strip(), "ok")


if __name__ == "__main__":
    run_tests()
