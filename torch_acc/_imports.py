r"""Work that waits for a module to be imported.

Setting up a backend registers it with parts of torch that take seconds to import (Dynamo,
inductor) and that most programs never load: :func:`when_imported` runs that registration
when the module is first imported (right after it executes, before the import statement
returns), or at once where it is loaded already.
"""

import importlib.abc
import sys
import threading
from collections.abc import Callable

__all__ = ["when_imported"]

_pending: dict[str, list[Callable[[], None]]] = {}
_lock = threading.RLock()


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback()`` once the module ``name`` is imported: now if it is, else right after
    it executes, in the thread that imports it. An exception of ``callback`` is raised by that
    import."""
    with _lock:
        if name not in sys.modules:
            if _Finder not in map(type, sys.meta_path):
                sys.meta_path.insert(0, _Finder())
            _pending.setdefault(name, []).append(callback)
            return
    callback()


class _Finder(importlib.abc.MetaPathFinder):
    """Finds a waited-for module with the finders after it and runs the callbacks once its
    loader has executed it."""

    def find_spec(self, fullname, path, target=None):
        with _lock:
            if fullname not in _pending:
                return None
        for finder in sys.meta_path:
            if isinstance(finder, _Finder):
                continue
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        with _lock:
            callbacks = _pending.pop(self._name, [])
        for callback in callbacks:
            callback()

    def __getattr__(self, attr):
        # get_source, get_filename, is_package...: inspect and linecache ask the loader.
        return getattr(self._loader, attr)
