r"""Runtime patches that give stock torch wheels what the patch series changes in-tree.

One function per upstream change, each applied once by :func:`apply`, version-guarded where
the change is not needed on every release.
"""

import functools
import inspect
import textwrap

import torch

__all__ = ["apply", "untyped_storage_of"]

#: The change the series' meta_utils patch makes to ``MetaTensorDescriber.describe_tensor``
#: in ``torch/_subclasses/meta_utils.py`` (the same line in torch 2.6 to 2.13).
META_UTILS_OLD = "storage = self.describe_storage(t.untyped_storage(), trace=trace)"
META_UTILS_NEW = "storage = self.describe_storage(_untyped_storage_of(t), trace=trace)"


def untyped_storage_of(t: torch.Tensor) -> torch.UntypedStorage:
    """The storage of ``t``, or for a payload tensor the meta storage standing for its payload.

    Payload tensors have no storage, but meta and fake conversion describe which tensors share
    data through their storages: every tensor on one payload gets the same meta storage, as
    large as the payload.
    """
    from torch_acc import _C

    if not _C.is_payload_tensor(t):
        return t.untyped_storage()
    token = _C.storage_token(t)
    if token is None:
        token = torch.UntypedStorage(_C.payload_nbytes(t), device="meta")
        _C.set_storage_token(t, token)
    return token


def meta_utils_payload_storage() -> None:
    """Meta and fake conversion of payload tensors (the series' meta_utils patch)."""
    from torch._subclasses import meta_utils

    if hasattr(meta_utils, "_untyped_storage_of"):
        return  # a torch with the series applied
    cls = meta_utils.MetaTensorDescriber
    source = textwrap.dedent(inspect.getsource(cls.describe_tensor))
    if META_UTILS_OLD not in source:
        raise RuntimeError(
            f"torch {torch.__version__}: MetaTensorDescriber.describe_tensor no longer has "
            f"{META_UTILS_OLD!r}; the runtime mirror of the series' meta_utils patch needs "
            "updating (torch_acc/_patches.py)"
        )
    namespace = dict(vars(meta_utils), _untyped_storage_of=untyped_storage_of)
    code = compile(
        "from __future__ import annotations\n" + source.replace(META_UTILS_OLD, META_UTILS_NEW),
        meta_utils.__file__,
        "exec",
    )
    exec(code, namespace)  # noqa: S102 - the same function, with the one line changed
    cls.describe_tensor = namespace["describe_tensor"]


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
    meta_utils_payload_storage()
