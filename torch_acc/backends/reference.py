r"""The passthrough backend: device ``"ref"``, whose payloads are CPU tensors.

Every ATen operator that has a CPU kernel runs that kernel on the payloads, through one
generic kernel registered for each: ``ref`` computes what CPU computes, so what it does
differently from CPU is the framework's doing (views, in-place and ``out=`` handling,
autograd, type checks), and what it costs over CPU is the framework's cost (the bridge).

Its generator holds a CPU ``torch.Generator``: after ``torch.manual_seed(s)``, random
operators on ``ref`` draw what CPU's draw after the same seed.

Example::

    >>> # xdoctest: +SKIP
    >>> import torch
    >>> from torch_acc.backends import reference
    >>> reference.setup()
    'ref'
    >>> torch.arange(4.0, device="ref").view(2, 2).t().contiguous()
    tensor([[0., 2.],
            [1., 3.]], device='ref:0')
"""


import torch

from torch_acc import library
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.device_module import PrivateUse1Hooks

__all__ = [
    "DEVICE",
    "OPINFO_NOTES",
    "PAYLOAD_FUNCTIONS",
    "CpuGenerator",
    "passthrough_kernel",
    "passthrough_ops",
    "setup",
]

#: The device name this backend registers.
DEVICE = "ref"

#: Operators with a CPU kernel that the passthrough leaves to the framework, and why.
_LEFT_TO_THE_FRAMEWORK = {
    "aten::set_": "rebinds a tensor's storage: a payload tensor has a payload, not a storage",
    "aten::_local_scalar_dense": "the framework reads a value through to_cpu",
    "aten::record_stream": "streams are the device guard's",
}


#: Operators without a CPU kernel (their CompositeExplicitAutograd one runs for every device)
#: that the passthrough runs on the payloads all the same: ``convolution`` and its backward
#: lead a device that is not CPU to ``convolution_overrideable``, the scatters of views read
#: the storage of their input (``clone_preserve_strides``), which a payload tensor has not.
_COMPOSITES = (
    "convolution",
    "convolution_backward",
    "slice_scatter",
    "select_scatter",
    "diagonal_scatter",
    "as_strided_scatter",
)

#: OpInfo entries ``python -m torch_acc.testing.opinfo`` does not run on this backend, and why.
OPINFO_NOTES = {
    **{
        entry: ("skip", "takes or makes a sparse tensor: a payload tensor is strided")
        for entry in ("to_sparse", "sparse.sampled_addmm", "sparse.mm.reduce")
    },
    "as_strided.partial_views": (
        "values",
        "reads storage outside the sample's view, which a copy to the device does not carry "
        "(PyTorch expects every device to differ from CPU here)",
    ),
}


class CpuGenerator:
    """The state of one ``torch.Generator`` of the ``ref`` device: a CPU generator, seeded as
    CPU's default one is, which the random kernels draw from."""

    def __init__(self):
        self.generator = torch.Generator()

    def manual_seed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def initial_seed(self) -> int:
        return self.generator.initial_seed()

    def get_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def set_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


class _Hooks(PrivateUse1Hooks):
    def get_new_generator(self, device_index: int) -> CpuGenerator:
        return CpuGenerator()

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]


def _has_cpu_kernel(op) -> bool:
    name = op._schema.name + (f".{op._schema.overload_name}" if op._schema.overload_name else "")
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")


def passthrough_ops() -> list[str]:
    """The overloads (``"add.Tensor"``) ``ref`` runs through CPU's kernel: every ATen
    operator with a CPU kernel and no ``PrivateUse1`` kernel yet, except views (the framework
    makes them, sharing the payload), ``out=`` overloads whose functional overload has a CPU
    kernel (the framework writes the functional result into the ``out=`` tensors, resizing
    them as CPU does) and the operators the framework keeps."""
    names = []
    for qualified in torch._C._dispatch_get_all_op_names():
        name, _, overload = qualified.partition(".")
        if not name.startswith("aten::") or name in _LEFT_TO_THE_FRAMEWORK:
            continue
        if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CPU"):
            continue
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"):
            continue
        packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
        op = None if packet is None else getattr(packet, overload or "default", None)
        if op is None:
            continue
        schema = op._schema
        functional = library.functional_overload(op)
        outs = any(a.is_out for a in schema.arguments)
        if outs and functional is not None and _has_cpu_kernel(functional):
            continue
        if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            continue
        names.append(f"{name.removeprefix('aten::')}.{overload}" if overload else
                     name.removeprefix("aten::"))
    return sorted(names + [n for n in _COMPOSITES if n not in names])


_CPU = torch.device("cpu")
_NUMBER = bool | int | float | complex


def passthrough_kernel(name: str):
    """The kernel of ``name`` (``"add.Tensor"``): CPU's kernel on the payloads. What each
    call must convert is worked out from the schema here, once: the generator arguments
    (CPU's kernel takes the generator's CPU generator), the tensor arguments the bridge may
    give as Python numbers, the device of a factory, the ``out=`` tensors."""
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")
    arguments = op._schema.arguments
    creates = any(a.name == "device" for a in arguments)
    positional = [a for a in arguments if not a.kwarg_only]
    # The bridge gives a CPU scalar (a Python number wrapped by torch, or a 0-dim CPU tensor)
    # as a Python number; CPU's kernel takes it as the wrapped number torch would make.
    numbers = tuple(i for i, a in enumerate(positional) if str(a.type) == "Tensor")
    generators = tuple(i for i, a in enumerate(positional) if "Generator" in str(a.type))
    kw_generators = tuple(
        a.name for a in arguments if a.kwarg_only and "Generator" in str(a.type)
    )
    convert = numbers + generators
    # Keyword arguments given as their default (None, or an int or bool: types whose equal
    # values are the same value) are left out: CPU's kernel gets the same values, and
    # torch.ops parses each keyword it is given (microseconds each).
    defaults = tuple(
        (a.name, a.default_value, type(a.default_value))
        for a in arguments
        if a.kwarg_only
        and a.has_default_value()
        and type(a.default_value) in (type(None), int, bool)
    )
    outs = tuple(a.name for a in arguments if a.is_out)
    disable_modes = torch._C._DisableTorchDispatch
    modes = torch._C._len_torch_dispatch_stack

    def kernel(*args, **kwargs):
        if convert:
            args = list(args)
            for i in numbers:
                if i < len(args) and isinstance(args[i], _NUMBER):
                    args[i] = library.wrapped_number(args[i])
            for i in generators:
                if i < len(args) and isinstance(args[i], CpuGenerator):
                    args[i] = args[i].generator
        for key in kw_generators:
            value = kwargs.get(key)
            if isinstance(value, CpuGenerator):
                kwargs[key] = value.generator
        for key, default, kind in defaults:
            value = kwargs.get(key, kwargs)
            if type(value) is kind and value == default:
                del kwargs[key]
        if creates:
            kwargs["device"] = _CPU
            kwargs.pop("pin_memory", None)
        given = None
        if outs:
            # CPU's kernel may resize an out= tensor (one the framework could not size
            # first): it gets a view of its own, so that the payload keeps its shape.
            given = {key: kwargs[key] for key in outs if kwargs.get(key) is not None}
            for key, p in given.items():
                kwargs[key] = p.as_strided(p.shape, p.stride(), p.storage_offset())
        if modes():
            # The payloads are plain CPU tensors: a dispatch mode the caller entered saw the
            # operator on ref already, and must not see it again on CPU.
            with disable_modes():
                result = op(*args, **kwargs)
        else:
            result = op(*args, **kwargs)
        if not given:
            return result
        # The given payload where it was written as it is; a resized one as the new payload,
        # in CPU's layout, which the bridge binds to the tensor (resizing it as CPU did).
        results = tuple(
            given[key] if kwargs[key].shape == given[key].shape else kwargs[key]
            for key in outs
        )
        return results if len(results) > 1 else results[0]

    kernel.__name__ = kernel.__qualname__ = f"ref_{packet}_{overload or 'default'}"
    return kernel


def _to_cpu(payload):
    return payload


def _from_cpu(tensor):
    return tensor.clone()


def _copy_into(dst, src):
    return dst.copy_(src)


#: The payload functions (``library.impl_payload``) of a backend whose payloads are CPU
#: tensors.
PAYLOAD_FUNCTIONS = {
    "as_strided": library.cpu_as_strided,
    "to_cpu": _to_cpu,
    "from_cpu": _from_cpu,
    "copy_into": _copy_into,
}

_registered = False


def setup() -> str:
    """Set up the ``ref`` device and register its kernels (idempotent). Returns ``"ref"``."""
    global _registered
    setup_privateuseone_for_python_backend(DEVICE, hook=_Hooks())
    if not _registered:
        library.impl_payload(**PAYLOAD_FUNCTIONS)
        for name in passthrough_ops():
            # The bridge runs CPU's kernel itself, and calls the Python kernel only for the
            # operators that take a generator.
            library.impl(name, passthrough_kernel(name), cpu_passthrough=True)
        library.impl_element_size_views(lambda payload, dtype: payload.view(dtype))
        # Its payloads are CPU tensors and its kernels CPU's: a forked child uses them as it
        # uses CPU tensors.
        library.declare_fork_safe()
        _registered = True
    return DEVICE
