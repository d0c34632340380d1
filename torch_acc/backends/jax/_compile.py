"""``torch.compile(backend="per_device")`` on ``jax``: an FX graph lowered to one ``jax.jit``.

AOTAutograd gives the compiler ATen-level graphs (the forward, and the backward); each node
calls an aten overload. Every one with a lowering (``_kernels.LOWERINGS``) becomes that
function of jax arrays, with the result dtypes of the operator's meta function, and the whole
graph one traced, jitted function of the inputs' arrays. A graph with an operator that has no
lowering (or draws random numbers) runs op by op on the device instead.
"""

import warnings

import jax
import torch

import torch_acc

from ._kernels import cast_results, LOWERINGS
from ._payload import DEVICE, JaxPayload

_aten = torch.ops.aten
_VIEWS = {
    _aten.view.default: lambda x, size: x.reshape(size),
    _aten._unsafe_view.default: lambda x, size: x.reshape(size),
    _aten.reshape.default: lambda x, size: x.reshape(size),
    _aten.permute.default: lambda x, dims: x.transpose(dims),
    _aten.t.default: lambda x: x.T,
    _aten.transpose.int: lambda x, a, b: jax.numpy.swapaxes(x, a, b),
    _aten.expand.default: lambda x, size: jax.numpy.broadcast_to(
        x, tuple(x.shape[i - len(size) + x.ndim] if n == -1 else n for i, n in enumerate(size))
    ),
    _aten.unsqueeze.default: lambda x, d: jax.numpy.expand_dims(x, d % (x.ndim + 1)),
    _aten.squeeze.dim: lambda x, d: x.squeeze(d % x.ndim) if x.ndim and x.shape[d] == 1 else x,
    _aten.squeeze.dims: lambda x, ds: x.squeeze(
        tuple(d % x.ndim for d in ds if x.ndim and x.shape[d] == 1)
    ),
    _aten.detach.default: lambda x: x,
    _aten.alias.default: lambda x: x,
    _aten.select.int: lambda x, d, i: jax.numpy.take(x, i, axis=d),
    _aten.slice.Tensor: lambda x, d=0, start=None, end=None, step=1: x[
        (slice(None),) * (d % x.ndim) + (slice(start, end, step),)
    ],
}



def _full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    """``full_like`` in a graph (eagerly, ``device=`` may name another device: no kernel)."""
    if device is not None and torch.device(device).type != DEVICE:
        raise _Unsupported(f"full_like on {device}")
    return jax.numpy.full(x.shape, fill_value, dtype=x.dtype)


#: Lowerings for graphs only.
_GRAPH_ONLY = {_aten.full_like.default: _full_like}


class _Unsupported(Exception):
    pass


def _lowering(op):
    if op in _VIEWS:
        return _VIEWS[op], False
    if op in _GRAPH_ONLY:
        return _GRAPH_ONLY[op], True
    name = op._schema.name.split("::")[-1]
    if name.endswith("_"):
        raise _Unsupported(str(op))
    if name.startswith("_foreach_"):
        return _foreach(op, name.removeprefix("_foreach_")), True
    fn = LOWERINGS.get(f"{name}.{op._overloadname}")
    if fn is None:
        raise _Unsupported(str(op))
    return fn, True


def _foreach(op, name: str):
    """``_foreach_<name>`` (what the optimizers' foreach paths give a graph): the lowering of
    ``<name>`` on the i-th element of each list argument (tensors and scalars alike)."""
    if op._overloadname == "ScalarAndTensor":  # _foreach_pow(scalar, exponents)
        fn = LOWERINGS.get(f"{name}.Scalar")
        if fn is None:
            raise _Unsupported(str(op))
        return lambda scalar, tensors: [fn(scalar, t) for t in tensors]
    if op._overloadname == "Tensor" and name in ("addcmul", "addcdiv"):
        # Their scalars tensor holds one value per element, not one operand for all.
        raise _Unsupported(str(op))
    fn = LOWERINGS.get(f"{name}.Tensor") or LOWERINGS.get(f"{name}.default")
    if fn is None:
        raise _Unsupported(str(op))

    def run(tensors, *args, **kwargs):
        def element(value, i):
            return value[i] if isinstance(value, list | tuple) else value

        return [
            fn(t, *(element(a, i) for a in args), **{k: element(v, i) for k, v in kwargs.items()})
            for i, t in enumerate(tensors)
        ]

    return run


def _lower(gm: torch.fx.GraphModule):
    """A function of jax arrays that computes ``gm``; raises _Unsupported where it cannot."""
    nodes = list(gm.graph.nodes)
    plan = []
    for node in nodes:
        if node.op == "call_function":
            if node.target is getattr:
                raise _Unsupported("getattr")
            if isinstance(node.target, torch._ops.OpOverload):
                plan.append((node, *_lowering(node.target)))
            elif node.target.__name__ == "getitem":
                plan.append((node, None, False))
            else:
                raise _Unsupported(str(node.target))
        elif node.op in ("call_module", "call_method", "get_attr"):
            raise _Unsupported(node.op)

    output = next(node for node in reversed(nodes) if node.op == "output")

    def run(*arrays):
        env = {}
        placeholders = iter(arrays)
        for node in nodes:
            if node.op == "placeholder":
                env[node] = next(placeholders)
        for node, fn, cast in plan:
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
            if fn is None:
                env[node] = args[0][args[1]]
                continue
            result = fn(*args, **kwargs)
            if cast:
                result = cast_results(result, _dtypes(node))
            env[node] = result
        return torch.fx.node.map_arg(output.args[0], lambda n: env[n])

    return run


def _dtypes(node):
    vals = node.meta.get("val")
    if vals is None:
        return None
    vals = vals if isinstance(vals, tuple | list) else (vals,)
    return tuple(v.dtype if isinstance(v, torch.Tensor) else None for v in vals)


def compile_graph(gm: torch.fx.GraphModule, example_inputs):
    """The ``per_device`` compiler of ``jax``: ``gm`` as one ``jax.jit`` function."""
    try:
        jitted = jax.jit(_lower(gm))
    except _Unsupported as e:
        warnings.warn(
            f"jax: a graph of torch.compile(backend='per_device') has an operator without a "
            f"lowering ({e}); it runs op by op",
            stacklevel=2,
        )
        return gm.forward
    device = None
    traced = False

    def compiled(*inputs):
        nonlocal device, jitted, traced
        if jitted is None:
            return gm.forward(*inputs)
        arrays = []
        for t in inputs:
            if not isinstance(t, torch.Tensor):
                arrays.append(t)
            elif t.device.type == "cpu":
                arrays.append(jax.numpy.asarray(t.detach().numpy()))
            else:
                device = t.device
                arrays.append(torch_acc.payload(t).array)
        if traced:
            outs = jitted(*arrays)
        else:
            try:
                outs = jitted(*arrays)
            except Exception as e:  # noqa: BLE001 - not traceable: op by op, which names any error
                warnings.warn(
                    f"jax: a graph of torch.compile(backend='per_device') could not be traced "
                    f"as one jax.jit ({type(e).__name__}: {e}); it runs op by op",
                    stacklevel=2,
                )
                jitted = None
                return gm.forward(*inputs)
            traced = True
        flat = outs if isinstance(outs, tuple | list) else (outs,)
        result = [
            torch_acc.wrap(JaxPayload(o), device=device) if isinstance(o, jax.Array) else o
            for o in flat
        ]
        return result if isinstance(outs, tuple | list) else result[0]

    return compiled
