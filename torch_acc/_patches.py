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


#: The change the series' _tensor patch makes to ``Tensor._reduce_ex_internal`` in
#: ``torch/_tensor.py`` (the same line in torch 2.6 and 2.13).
TENSOR_REDUCE_OLD = "cpu_tensor = self.cpu()"
TENSOR_REDUCE_NEW = "cpu_tensor = self.detach().cpu()"


def save_detached_cpu_copy() -> None:
    """Saving a storage-less tensor that requires grad (the series' _tensor patch).

    ``torch.save`` stores such a tensor as a CPU copy plus its ``requires_grad`` flag. The copy
    was ``self.cpu()``, which for a tensor that requires grad is a non-leaf of the autograd
    graph, so loading failed to set ``requires_grad`` on the tensor made from it. The copy is
    detached now; the flag, saved beside it, is set on load as before.
    """
    cls = torch.Tensor
    if getattr(cls._reduce_ex_internal, "_torch_acc_patched", False):
        return
    source = textwrap.dedent(inspect.getsource(cls._reduce_ex_internal))
    if TENSOR_REDUCE_NEW in source:
        return  # a torch with the series applied
    if source.count(TENSOR_REDUCE_OLD) != 1:
        raise RuntimeError(
            f"torch {torch.__version__}: Tensor._reduce_ex_internal no longer has "
            f"{TENSOR_REDUCE_OLD!r}; the runtime mirror of the series' _tensor patch needs "
            "updating (torch_acc/_patches.py)"
        )
    namespace = dict(vars(torch._tensor))
    code = compile(
        "from __future__ import annotations\n"
        + source.replace(TENSOR_REDUCE_OLD, TENSOR_REDUCE_NEW),
        torch._tensor.__file__,
        "exec",
    )
    exec(code, namespace)  # noqa: S102 - the same function, with the one line changed
    patched = namespace["_reduce_ex_internal"]
    patched._torch_acc_patched = True
    cls._reduce_ex_internal = patched


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


_ORIGINALS: dict[str, object] = {}


def original(name: str):
    """The torch function a patch replaced (``"current_accelerator"``...)."""
    return _ORIGINALS.get(name) or getattr(torch.accelerator, name)


def accelerator_choice() -> None:
    """``torch.accelerator`` and ``torch.get_device_module()`` report the chosen accelerator.

    Upstream, ``torch.accelerator.set_current_accelerator`` makes ``at::getAccelerator``
    honour the choice. A stock wheel's C++ cannot be changed from Python, so only these
    Python entry points see it: ``torch.accelerator.current_accelerator``, ``device_count``,
    ``is_available``, and ``torch.get_device_module()`` without an argument. C++ callers of
    ``at::getAccelerator`` (``torch.accelerator.current_device_index``, ``set_device_index``,
    ``current_stream``, ``synchronize``, pinned memory's default device, the autograd engine)
    still see the build's accelerator (PrivateUse1 once a Python backend is bound).
    """
    if _ORIGINALS:
        return
    from torch_acc import registry

    acc = torch.accelerator
    _ORIGINALS.update(
        current_accelerator=acc.current_accelerator,
        device_count=acc.device_count,
        is_available=acc.is_available,
        get_device_module=torch.get_device_module,
    )

    def chosen_module(choice):
        return _ORIGINALS["get_device_module"](choice.type)

    @functools.wraps(acc.current_accelerator)
    def current_accelerator(*args, **kwargs):
        choice = registry._choice()
        if choice is registry._UNSET:
            return _ORIGINALS["current_accelerator"](*args, **kwargs)
        check_available = kwargs.get("check_available", args[0] if args else False)
        if choice is None or (check_available and not chosen_module(choice).is_available()):
            return None
        return choice

    @functools.wraps(acc.device_count)
    def device_count():
        choice = registry._choice()
        if choice is registry._UNSET:
            return _ORIGINALS["device_count"]()
        return 0 if choice is None else chosen_module(choice).device_count()

    @functools.wraps(acc.is_available)
    def is_available():
        choice = registry._choice()
        if choice is registry._UNSET:
            return _ORIGINALS["is_available"]()
        return choice is not None and chosen_module(choice).is_available()

    @functools.wraps(torch.get_device_module)
    def get_device_module(device=None):
        choice = registry._choice()
        if device is None and choice is not registry._UNSET:
            return torch.cpu if choice is None else chosen_module(choice)
        return _ORIGINALS["get_device_module"](device)

    acc.current_accelerator = current_accelerator
    acc.device_count = device_count
    acc.is_available = is_available
    torch.get_device_module = get_device_module


@functools.cache
def apply() -> None:
    """Apply every patch (once per process)."""
    print_through_cpu()
    meta_utils_payload_storage()
    save_detached_cpu_copy()
