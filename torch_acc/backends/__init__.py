"""Reference backends built on torch_acc's public API.

``torch_acc.backends`` is also callable: ``torch_acc.backends()`` lists the registered
backends (:func:`torch_acc.registry.backends`), as the package and the function share the name.
"""

import sys
import types

from torch_acc import registry


class _CallableModule(types.ModuleType):
    def __call__(self) -> dict[str, bool]:
        return registry.backends()


sys.modules[__name__].__class__ = _CallableModule
