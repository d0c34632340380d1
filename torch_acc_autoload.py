r"""torch_acc's ``torch.backends`` entry points, which ``import torch`` runs.

They live outside the ``torch_acc`` package on purpose. Importing any module of the package
runs ``torch_acc/__init__.py`` first, which loads the compiled extension ``torch_acc._C``;
when that cannot load (torch_acc built against another torch, as after upgrading torch), an
entry point inside the package would make ``import torch`` itself fail ("Failed to load the
backend extension"). This module imports only the standard library; its entry points catch
every error of importing torch_acc or registering a backend and turn it into one warning that
names the cause and the fix, and torch stays usable without torch_acc's backends.
"""

import importlib
import importlib.util
import sys
import warnings

__all__ = ["jax", "npy", "ref"]

#: The error of ``import torch_acc``, once it has failed: reported by the first entry point.
_import_error: Exception | None = None


def jax() -> None:
    """Records the ``jax`` backend (``torch_acc.backends.jax``, the ``[jax]`` extra); binds
    nothing. Without JAX installed it records nothing, silently: the extra is optional."""
    if importlib.util.find_spec("jax") is None:
        return
    _register("jax", "torch_acc.backends.jax")


def npy() -> None:
    """Records the ``npy`` backend (``torch_acc.backends.numpy``); binds nothing."""
    _register("npy", "torch_acc.backends.numpy")


def ref() -> None:
    """Records the ``ref`` backend (``torch_acc.backends.reference``); binds nothing."""
    _register("ref", "torch_acc.backends.reference")


def _register(name: str, module: str) -> None:
    global _import_error
    if _import_error is not None:
        return
    try:
        registry = importlib.import_module("torch_acc.registry")
    except Exception as e:  # noqa: BLE001 - import torch must not fail for torch_acc
        _import_error = e
        warnings.warn(_import_failed(e), stacklevel=3)
        return
    # By name: the backend's module (and NumPy, JAX...) is imported when it is bound, not by
    # ``import torch``. autoload turns any error into a warning.
    registry.autoload(name, module)


def _extension_failed(error: BaseException | None) -> bool:
    """Whether ``error``, or an error it was raised from, is the extension failing to load."""
    while error is not None:
        if isinstance(error, ImportError) and (
            error.name == "torch_acc._C" or "undefined symbol" in str(error)
        ):
            return True
        error = error.__cause__ or error.__context__
    return False


def _import_failed(error: Exception) -> str:
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", "unknown")
    cause = f"{type(error).__name__}: {error}"
    if _extension_failed(error):
        return (
            f"torch_acc's backends are not available: its compiled extension torch_acc._C "
            f"cannot be loaded ({cause}). It was most likely built against another torch than "
            f"this one ({version}); rebuild torch_acc against this torch "
            "(`pip install --no-build-isolation -e .` in its source tree, or ./build.sh). "
            "torch works without it; TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading backends"
        )
    return (
        f"torch_acc's backends are not available: importing torch_acc failed ({cause}). "
        "torch works without it; TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading backends"
    )
