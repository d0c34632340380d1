"""Payloads of the ``jax`` backend: a cell per payload slot that holds an immutable jax.Array.

A jax.Array never changes. torch_acc keeps one payload object per slot (a tensor, its views
and its detached aliases share it), so the object bound to the slot is a small mutable cell,
:class:`JaxPayload`, whose ``array`` is replaced, never written:

- an in-place or ``out=`` kernel on a whole tensor returns a new cell, which torch_acc binds to
  the slot (``rebind``); every tensor on the slot reads the new array;
- a write through a view (``x[1:].add_(1)``, ``x[0] = 3``) goes through :func:`copy_into` with
  a :class:`JaxView`: the new values are scattered into the base array functionally
  (``array.at[index].set(values)``) and the base cell takes the result, so the base and every
  other view see the write, as on CPU.

A :class:`JaxView` is what :func:`as_strided` returns for a view; its ``array`` is gathered from
the base cell when read, so a view read after a write sees it.
"""

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch

from torch_acc.device_module import current_device

#: The device name this backend registers.
DEVICE = "jax"

jax.config.update("jax_enable_x64", True)

TORCH_TO_JAX = {
    torch.bool: jnp.bool_,
    torch.uint8: jnp.uint8,
    torch.uint16: jnp.uint16,
    torch.uint32: jnp.uint32,
    torch.uint64: jnp.uint64,
    torch.int8: jnp.int8,
    torch.int16: jnp.int16,
    torch.int32: jnp.int32,
    torch.int64: jnp.int64,
    torch.float16: jnp.float16,
    torch.bfloat16: jnp.bfloat16,
    torch.float32: jnp.float32,
    torch.float64: jnp.float64,
    torch.complex64: jnp.complex64,
    torch.complex128: jnp.complex128,
}
JAX_TO_TORCH = {np.dtype(v): k for k, v in TORCH_TO_JAX.items()}
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def jax_dtype(dtype: torch.dtype, op: str | None = None):
    """The JAX dtype of a torch dtype; a ``NotImplementedError`` naming the backend (and
    ``op``) if JAX has none (as the ``npy`` backend's ``np_dtype``)."""
    try:
        return TORCH_TO_JAX[dtype]
    except KeyError:
        raise NotImplementedError(
            ("" if op is None else f"{op}: ")
            + f"the {DEVICE} backend does not support dtype {dtype}: expected one of "
            f"{', '.join(str(d) for d in TORCH_TO_JAX)}"
        ) from None


def torch_dtype(dtype) -> torch.dtype:
    try:
        return JAX_TO_TORCH[np.dtype(dtype)]
    except KeyError:
        raise TypeError(
            f"the {DEVICE} backend has no torch dtype for the JAX dtype {dtype}"
        ) from None


class JaxPayload:
    """The payload of a slot: a cell holding a jax.Array (replaced, never written).

    ``layout`` is None for a row-major payload, else the element strides of a dense one laid
    out in another order (a channels-last result, as CPU gives for channels-last inputs); the
    array itself is always in logical order, ``strides`` (bytes) tells torch_acc the layout.
    """

    __slots__ = ("array", "shape", "dtype", "layout", "strides")

    def __init__(self, array, layout=None):
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = JAX_TO_TORCH[array.dtype]
        self.layout = layout
        self.strides = None if layout is None else tuple(s * array.dtype.itemsize for s in layout)

    def __repr__(self) -> str:
        return f"JaxPayload({self.array!r})"


class JaxView:
    """The payload of a view: ``size``/``stride``/``offset`` (elements) into a base cell."""

    __slots__ = ("base", "shape", "stride", "offset", "dtype")

    def __init__(self, base: JaxPayload, size, stride, offset):
        self.base = base
        self.shape = tuple(size)
        self.stride = tuple(stride)
        self.offset = offset
        self.dtype = base.dtype

    @property
    def array(self):
        base = self.base
        if self.offset == 0 and self.shape == base.shape:
            if base.layout is None and _contiguous(self.shape, self.stride):
                return base.array
            if base.layout is not None and self.stride == base.layout:
                return base.array
        fn = _view_function(base.shape, base.layout, self.shape, self.stride, self.offset)
        if fn is not None:
            return fn(base.array)
        return strided(memory(base), self.shape, self.stride, self.offset)

    def __repr__(self) -> str:
        return f"JaxView({self.array!r})"


def _order(layout) -> tuple:
    """The dimensions of a dense layout from the outermost in memory to the innermost."""
    return tuple(sorted(range(len(layout)), key=lambda d: -layout[d]))


def memory(cell: JaxPayload):
    """The elements of a cell in memory order, flat."""
    return _flat(cell.array, cell.layout)


def _flat(array, layout):
    if layout is None:
        return array.reshape(-1)
    return array.transpose(_order(layout)).reshape(-1)


def set_memory(cell: JaxPayload, flat) -> None:
    """Gives ``cell`` the elements ``flat`` (in memory order)."""
    if cell.layout is None:
        cell.array = flat.reshape(cell.shape)
        return
    order = _order(cell.layout)
    permuted = flat.reshape(tuple(cell.shape[d] for d in order))
    cell.array = permuted.transpose(tuple(np.argsort(order)))


def dense_layout(shape, strides):
    """``strides`` if they lay ``shape`` out densely in some order other than row-major, else
    None (row-major, or not dense: such a result is given row-major)."""
    strides = tuple(strides)
    if _contiguous(shape, strides):
        return None
    expected = 1
    for d in sorted(range(len(shape)), key=lambda d: (strides[d], shape[d])):
        if shape[d] != 1 and strides[d] != expected:
            return None
        expected *= shape[d]
    return strides


def _contiguous(shape, stride) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(stride), strict=True):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


#: How many times each view geometry was read, until it is jitted.
_uses: dict = {}
_jitted: dict = {}
#: A geometry read this often gets one jitted function (one dispatch instead of a slice,
#: reshape and transpose each); rarer ones are not worth a compilation.
_JIT_AFTER = 3


def _view_function(base_shape, layout, shape, stride, offset):
    key = (base_shape, layout, shape, stride, offset)
    fn = _jitted.get(key)
    if fn is not None:
        return fn
    uses = _uses.get(key, 0) + 1
    if uses < _JIT_AFTER:
        if len(_uses) > 65536:
            _uses.clear()
        _uses[key] = uses
        return None

    def view(array):
        return strided(_flat(array, layout), shape, stride, offset)

    if len(_jitted) > 4096:
        _jitted.clear()
    fn = _jitted[key] = jax.jit(view)
    return fn


def strided(flat, shape, stride, offset):
    """The view ``(shape, stride, offset)`` of the flat array ``flat``: static slices and
    reshapes where the view's dimensions nest (every one a whole number of the next one's
    steps, as basic indexing, transposes and expands give), else a gather."""
    shape, stride = tuple(shape), tuple(stride)
    if 0 in shape:
        return jnp.zeros(shape, flat.dtype)
    dims = [d for d in range(len(shape)) if shape[d] != 1 and stride[d] != 0]
    order = sorted(dims, key=lambda d: -stride[d])
    nested = all(
        stride[a] % stride[b] == 0 and stride[a] >= shape[b] * stride[b]
        for a, b in zip(order, order[1:], strict=False)
    )
    if not nested:
        return flat[_index(shape, stride, offset)]
    if not order:
        value = flat[offset]
    else:
        first = order[0]
        span = shape[first] * stride[first]
        seg = flat[offset : offset + span]
        if seg.shape[0] < span:
            seg = jnp.pad(seg, (0, span - seg.shape[0]))
        value = seg.reshape(shape[first], stride[first])
        for d in order[1:]:
            value = value[..., : shape[d] * stride[d]]
            value = value.reshape(value.shape[:-1] + (shape[d], stride[d]))
        value = value[..., 0]
        # Dimensions in stride order, then in the view's order.
        value = value.transpose(tuple(np.argsort([dims.index(d) for d in order])))
    kept = tuple(shape[d] if d in dims else 1 for d in range(len(shape)))
    return jnp.broadcast_to(value.reshape(kept), shape)


@functools.lru_cache(maxsize=1024)
def _index(shape, stride, offset) -> np.ndarray:
    """The flat indices of a strided view's elements, in its (row-major) order."""
    index = np.full(shape, offset, dtype=np.int64)
    for dim, (n, s) in enumerate(zip(shape, stride, strict=True)):
        along = np.arange(n, dtype=np.int64) * s
        index = index + along.reshape((n,) + (1,) * (len(shape) - dim - 1))
    return index


def array(payload):
    """The jax.Array of a payload (a cell or a view)."""
    return payload.array


def device(index: int):
    """The JAX device of ``jax:index``."""
    return jax.devices()[index]


def as_strided(payload, size, stride, storage_offset):
    base = payload.base if type(payload) is JaxView else payload
    return JaxView(base, size, stride, storage_offset)


def to_cpu(payload) -> torch.Tensor:
    arr = np.array(payload.array)
    if arr.dtype == _BFLOAT16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def from_cpu(tensor: torch.Tensor, index: int | None = None):
    jax_dtype(tensor.dtype)
    tensor = tensor.resolve_conj().resolve_neg().contiguous()
    if tensor.dtype == torch.bfloat16:
        host = tensor.view(torch.int16).numpy().view(_BFLOAT16)
    else:
        host = tensor.numpy()
    if index is None:
        index = current_device()
    # On JAX's CPU devices device_put aliases a suitably aligned NumPy array over a CPU
    # tensor's memory (``may_alias=False`` notwithstanding, JAX 0.10): the payload would see
    # later writes into the CPU tensor (``x.to("jax")`` followed by ``x.add_``). A copy that
    # nothing else holds is safe to alias.
    return JaxPayload(jax.device_put(host.copy(), device(index)))


def _values(src, shape, dtype):
    value = src.array if type(src) in (JaxPayload, JaxView) else jnp.asarray(src)
    want = jax_dtype(dtype)
    if value.dtype == want and value.shape == tuple(shape):
        return value  # arrays are immutable: the new cell shares it
    try:
        return jnp.broadcast_to(value.astype(want), shape)
    except ValueError:
        raise RuntimeError(
            f"copy_: the source of shape {list(value.shape)} does not broadcast to the "
            f"destination's shape {list(shape)} ({DEVICE} backend)"
        ) from None


def copy_into(dst, src):
    """A new cell for a whole payload; for a view, the values scattered into its base cell."""
    value = _values(src, dst.shape, dst.dtype)
    if type(dst) is JaxPayload:
        return JaxPayload(value, dst.layout)
    if any(s == 0 and n > 1 for n, s in zip(dst.shape, dst.stride, strict=True)):
        raise RuntimeError(
            "copy_: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location. Please clone() the tensor before performing "
            "the operation."
        )
    base = dst.base
    index = _index(dst.shape, dst.stride, dst.offset)
    set_memory(base, memory(base).at[index.reshape(-1)].set(value.reshape(-1)))
    return dst
