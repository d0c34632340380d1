r"""``torch.compile`` on the devices of Python backends: the per-device compile backend.

Inductor refuses a Python backend's device with one error (:func:`refuse_inductor`), and
``torch.compile(backend="per_device")`` gives each graph to the compiler its device's backend
registered (:func:`register_compile_backend`), kept in the backend's record.
"""

import threading

import torch

from torch_acc import record
from torch_acc._imports import when_imported

__all__ = [
    "COMPILE_BACKEND",
    "inductor_refusal",
    "refuse_inductor",
    "register_compile_backend",
    "register_dynamo_backend",
]

#: The name of the ``torch.compile`` backend that hands a graph to the compiler its device's
#: backend registered (:func:`register_compile_backend`).
COMPILE_BACKEND = "per_device"

_dynamo_backend_registered = False
#: Guards the one above; setup holds its own lock while it registers the Dynamo backend.
_compile_lock = threading.Lock()


def refuse_inductor(name: str) -> None:
    """Make ``torch.compile``'s default backend, inductor, refuse the device with one error.

    Inductor generates code that reads tensors' storages, which a Python backend's tensors do
    not have; without a code generator registered for the device it fails somewhere inside
    lowering (on torch 2.6 with ``'NoneType' object is not callable``). A backend with a
    compiler of its own registers it with :func:`register_compile_backend`, and
    ``torch.compile(backend="per_device")`` uses it.
    """

    def refuse(*args, **kwargs):
        raise RuntimeError(inductor_refusal(name))

    def register():
        from torch._inductor.codegen.common import register_backend_for_device

        register_backend_for_device(name, refuse, refuse)

    # When inductor is imported: it takes seconds to import, and most programs never do.
    when_imported("torch._inductor.codegen.common", register)


def inductor_refusal(name: str) -> str:
    """The error of inductor asked to compile for the Python backend ``name``."""
    return (
        f"inductor cannot compile for {name}: tensors on {name} have no storage for "
        f"generated code to read. Use torch.compile(backend={COMPILE_BACKEND!r}), which "
        f"runs the compiler the {name} backend registers with register_compile_backend "
        "(aot_eager where it registers none), or backend='aot_eager' (or 'eager')"
    )


def register_compile_backend(device, compiler_fn, *, aot: bool = True) -> None:
    r"""Register the compiler that ``torch.compile`` uses for graphs on ``device``.

    ``torch.compile(model, backend="per_device")`` gives a graph whose inputs (and parameters)
    are on ``device`` to ``compiler_fn``; a graph on a device without a registered compiler
    (the CPU, another backend) runs with ``aot_eager``. One graph is compiled for one device:
    a graph with inputs on two devices that both registered compilers is an error.

    Args:
        device (str or torch.device): a Python backend's device type (``"npy"``), set up or
            registered (``register_backend``); not an index.
        compiler_fn: ``compiler_fn(graph_module, example_inputs)``, a callable that runs the
            graph: called with positional tensors, it returns what ``graph_module`` returns.
            This is a ``torch.compile`` backend's signature (a JAX ``jit``, a NumPy graph
            executor...).
        aot (bool): with ``True`` (the default), ``compiler_fn`` gets the ATen-level forward
            and backward graphs of AOTAutograd (as inductor does), whose example inputs are
            fake tensors, and needs no autograd of its own; with ``False``, Dynamo's
            torch-level graph, which it must run with autograd if gradients are wanted.

    Registering again replaces the device's compiler; what was compiled with the previous one
    keeps it until ``torch._dynamo.reset()``.

    Example::

        >>> # xdoctest: +SKIP
        >>> def compiler(gm, example_inputs):
        ...     print(gm.graph)
        ...     return gm.forward
        >>> register_compile_backend("npy", compiler)
        >>> torch.compile(model.to("npy"), backend="per_device")(x.to("npy"))
    """
    if isinstance(device, torch.device):
        if device.index is not None:
            raise ValueError(
                f"register_compile_backend takes a device type, but got {device} (with an "
                f"index): use {device.type!r}"
            )
        device = device.type
    if not isinstance(device, str):
        raise TypeError(
            f"expected device to be a str or torch.device, but got {type(device).__qualname__}"
        )
    backend = record.get(device)
    if backend is None:
        raise ValueError(
            f"cannot register a compile backend for {device!r}: it is not a Python backend "
            "set up or registered in this process (expected one of: "
            f"{', '.join(map(repr, record.names())) or 'none'})"
        )
    if not callable(compiler_fn):
        raise TypeError(
            f"cannot register a compile backend for {device!r}: expected compiler_fn to be "
            f"callable, but got {type(compiler_fn).__qualname__}"
        )
    backend.compiler = (compiler_fn, bool(aot))
    register_dynamo_backend()


def register_dynamo_backend() -> None:
    """Registers :data:`COMPILE_BACKEND` with ``torch._dynamo`` (once), when Dynamo is
    imported: it takes seconds to import, and ``torch.compile`` imports it."""
    global _dynamo_backend_registered
    with _compile_lock:
        if _dynamo_backend_registered:
            return
        _dynamo_backend_registered = True

    def register():
        from torch._dynamo import register_backend

        register_backend(_compile_for_device, name=COMPILE_BACKEND)

    when_imported("torch._dynamo", register)


def _graph_devices(gm, example_inputs) -> list[str]:
    """The device types of a graph's tensors: inputs, parameters and buffers, in order."""
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    tensors += list(gm.parameters()) + list(gm.buffers())
    return list(dict.fromkeys(t.device.type for t in tensors))


def _compiler(device: str):
    """The ``(compiler_fn, aot)`` the backend of ``device`` registered, or None."""
    backend = record.get(device)
    return None if backend is None else backend.compiler


def _compile_for_device(gm, example_inputs):
    """The ``torch_acc`` compile backend: the compiler of the graph's device, or aot_eager."""
    compilers = {
        d: c for d in _graph_devices(gm, example_inputs) if (c := _compiler(d)) is not None
    }
    devices = list(compilers)
    if len(devices) > 1:
        raise RuntimeError(
            f"cannot compile one graph for {devices[0]} and {devices[1]}: both registered a "
            f"compile backend, and backend={COMPILE_BACKEND!r} gives a graph to one device's "
            "compiler. Move the inputs to one device"
        )
    # Dynamo and AOTAutograd are imported here, when a graph is compiled (import cost).
    if not devices:
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example_inputs)
    compiler_fn, aot = compilers[devices[0]]
    if not aot:
        return compiler_fn(gm, example_inputs)
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_compiler

    return aot_autograd(fw_compiler=make_boxed_compiler(compiler_fn))(gm, example_inputs)
