r"""How the standalone sources become in-tree PyTorch sources: one rule each.

``tools/gen_series.py`` applies these rules; ``tools/README.md`` lists them. Nothing else
differs between what the standalone package builds and what the patch series carries.
"""

import re
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent

#: Rule 1 (C++ core): every ``csrc/acc/*.{h,cpp}`` goes verbatim to ``torch/csrc/acc/``.
#: ``csrc/standalone.cpp`` stays out: in-tree, ``torch/csrc/Module.cpp`` calls
#: ``torch::acc::initModule``.
CPP_DIR = ("csrc/acc", "torch/csrc/acc")

#: Rule 2 (Python modules): each standalone module has one in-tree home.
MODULES = {
    "torch_acc._C": "torch._C._acc",
    "torch_acc._autocast": "torch.utils._acc_autocast",
    "torch_acc.backend_registration": "torch.utils.backend_registration",
    "torch_acc._compat": "torch.utils._acc_compat",
    "torch_acc._fallback": "torch.utils._acc_fallback",
    "torch_acc._patches": "torch.utils._acc_patches",
    "torch_acc.library": "torch.utils._acc_library",
    "torch_acc.payload": "torch.utils._acc_payload",
    "torch_acc.registry": "torch.utils._acc_registry",
    "torch_acc.backends.numpy": "torch.testing._internal.acc_numpy_backend",
    # Public names: in-tree, the registry's functions are torch.accelerator's and torch.utils'.
    "torch_acc.DeviceGuard": "torch._C._acc.DeviceGuard",
    "torch_acc.PrivateUse1Hooks": "torch._C._acc.PrivateUse1Hooks",
    "torch_acc.current_accelerator": "torch.accelerator.current_accelerator",
    "torch_acc.register_backend": "torch.utils.register_backend",
    "torch_acc.set_current_accelerator": "torch.accelerator.set_current_accelerator",
}

#: Rule 3 (files): where each carried standalone file goes. ``backend_registration.py`` is
#: merged into the existing module (rule 5); the stub gets its in-tree name.
FILES = {
    "torch_acc/_autocast.py": "torch/utils/_acc_autocast.py",
    "torch_acc/_compat.py": "torch/utils/_acc_compat.py",
    "torch_acc/_fallback.py": "torch/utils/_acc_fallback.py",
    "torch_acc/_patches.py": "torch/utils/_acc_patches.py",
    "torch_acc/library.py": "torch/utils/_acc_library.py",
    "torch_acc/payload.py": "torch/utils/_acc_payload.py",
    "torch_acc/registry.py": "torch/utils/_acc_registry.py",
    "torch_acc/_C.pyi": "torch/_C/_acc/__init__.pyi",
}
#: Rule 3 for packages: every module of a carried package goes to the in-tree package (the
#: reference NumPy backend is PyTorch's test backend there; its modules import each other
#: relatively, so only the package needs a home in MODULES).
PACKAGES = {
    "torch_acc/backends/numpy": "torch/testing/_internal/acc_numpy_backend",
}
FILES.update(
    {
        f"{src}/{path.name}": f"{dst}/{path.name}"
        for src, dst in PACKAGES.items()
        for path in sorted((_ROOT / src).glob("*.py"))
    }
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
]
TEST_PREFIX = "test_privateuseone_python_backend_"

#: Rule 8 (C++ tests): googletest files under ``test/cpp/`` go to their place in the tree, where
#: CMake globs them (``c10/test/CMakeLists.txt`` builds every ``*_test.cpp``).
CPP_TESTS = {
    "test/cpp/NoOpDeviceGuardImpl_test.cpp": "c10/test/core/impl/NoOpDeviceGuardImpl_test.cpp",
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


def _package_of(module: str) -> str | None:
    """The carried package (rule 3 for packages) that ``module`` is a submodule of, or None."""
    packages = {src.replace("/", ".") for src in PACKAGES}
    return next((p for p in packages if module.startswith(p + ".")), None)


def rewrite_imports(text: str, path: str) -> str:
    """Rule 2 applied to a Python file: every ``from torch_acc... import x`` is rewritten.

    ``from torch_acc import _C`` becomes ``from torch._C import _acc as _C``;
    ``from torch_acc.backend_registration import f`` becomes
    ``from torch.utils.backend_registration import f``. Any other mention of the package in
    code is an error, so nothing standalone can leak into the series unnoticed.
    """

    def one(module: str, name: str, alias: str) -> str:
        full = f"{module}.{name}"
        if full in MODULES:
            module, name = _split(MODULES[full])
        elif module in MODULES:
            module = MODULES[module]
        elif (package := _package_of(module)) is not None:
            module = MODULES[package] + module[len(package):]
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
    for lineno, line in enumerate(out.splitlines(), 1):
        code = line.split("#", 1)[0]
        if re.search(r"\bimport torch_acc\b|\btorch_acc\.", code):
            raise ValueError(f"{path}:{lineno}: standalone reference left in-tree: {line.strip()}")
    return out
