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
