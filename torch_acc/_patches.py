r"""Runtime patches that give stock torch wheels what the patch series changes in-tree.

One function per upstream change, each applied once by :func:`apply`, version-guarded where
the change is not needed on every release.
"""

import functools

import torch

__all__ = ["apply"]


def print_through_cpu() -> None:
    """Tensor printing formats a CPU copy of a Python backend's tensor.

    ``torch/_tensor_str.py`` does so for xla, lazy, ipu and mtia tensors, whose printing
    would otherwise run a dozen small operators on the device; the same holds for a Python
    backend, whose backend may not have those operators at all.
    """
    original = torch._tensor_str._tensor_str

    @functools.wraps(original)
    def _tensor_str(self, indent):
        if self.device.type == torch._C._get_privateuse1_backend_name():
            self = self.to("cpu")
        return original(self, indent)

    torch._tensor_str._tensor_str = _tensor_str


@functools.cache
def apply() -> None:
    """Apply every patch (once per process)."""
    print_through_cpu()
