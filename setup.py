"""Builds the standalone extension torch_acc._C against the installed torch."""

import os
from pathlib import Path

import numpy
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).resolve().parent


def _include_root() -> str:
    """A folder in which ``torch/csrc/acc`` is ``csrc/acc``.

    The core includes its own headers by their in-tree paths
    (``<torch/csrc/acc/...>``), so that the same files build standalone and
    inside a PyTorch checkout. This folder comes first on the include path,
    before torch's own headers (torch >= 2.10 ships a ``torch/csrc/acc`` too).
    """
    root = ROOT / "build" / "include"
    link = root / "torch" / "csrc" / "acc"
    link.parent.mkdir(parents=True, exist_ok=True)
    target = os.path.relpath(ROOT / "csrc" / "acc", link.parent)
    if not link.is_symlink() or os.readlink(link) != target:
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return str(root)


sources = ["csrc/standalone.cpp"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "acc").glob("*.cpp")
)


def _kineto_include() -> list[str]:
    """kineto's headers, where the torch wheel was built with kineto (the profiler's
    PrivateUse1 plugin, csrc/acc/compat.h's TORCH_ACC_PROFILER_KINETO_PLUGIN)."""
    if not torch.autograd.kineto_available():
        return []
    return [str(Path(torch.__file__).parent / "include" / "kineto")]


def _build_macros() -> list[tuple[str, None]]:
    # As torch itself was built: its headers declare kineto's parts under USE_KINETO, and
    # torch._C has c10d's classes under USE_DISTRIBUTED.
    flags = {
        "USE_KINETO": torch.autograd.kineto_available(),
        "USE_DISTRIBUTED": torch.distributed.is_available(),
    }
    return [(name, None) for name, on in flags.items() if on]


def _extensions() -> list:
    # build.sh builds the extension itself, into a folder per torch version, then installs
    # the package in editable mode with TORCH_ACC_SKIP_EXTENSION=1: an editable install
    # would otherwise compile it all again in a temporary folder.
    if os.environ.get("TORCH_ACC_SKIP_EXTENSION") == "1":
        return []
    return [
        CppExtension(
            "torch_acc._C",
            sources,
            # NumPy payloads' fields are read through NumPy's C API, as torch
            # itself does (USE_NUMPY, torch/csrc/utils/numpy_stub.h).
            include_dirs=[_include_root(), numpy.get_include(), *_kineto_include()],
            define_macros=[("USE_NUMPY", None), *_build_macros()],
            # Without debug information unless TORCH_ACC_DEBUG=1 (for gdb, sanitizers):
            # torch's headers make it most of the compile time (about half).
            extra_compile_args=[
                "-O2",
                "-fvisibility=hidden",
                "-g" if os.environ.get("TORCH_ACC_DEBUG") == "1" else "-g0",
            ],
        )
    ]


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": BuildExtension},
)
