"""Random numbers of the ``jax`` backend: a ``torch.Generator`` over JAX PRNG keys.

A generator is a seed and a counter. Every draw folds the counter into the seed's key
(``jax.random.fold_in``) and advances it, so that a generator's state is two integers:
``get_state()`` is those as 16 bytes, and ``set_state`` replays from any saved point.
"""

import jax
import jax.numpy as jnp
import torch

from ._kernels import kernel
from ._payload import DEVICE

_DEFAULT_SEED = 67280421310721


class JaxGenerator:
    """A ``jax`` device's generator: ``manual_seed``, ``initial_seed``, ``get_state``,
    ``set_state`` (a CPU ``torch.uint8`` tensor of 16 bytes: seed, counter)."""

    def __init__(self, seed: int = _DEFAULT_SEED):
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> None:
        self._seed = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
        self._counter = 0

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> torch.Tensor:
        words = torch.tensor(
            [self._seed - (1 << 64) if self._seed >= 1 << 63 else self._seed, self._counter],
            dtype=torch.int64,
        )
        return words.view(torch.uint8).clone()

    def set_state(self, state: torch.Tensor) -> None:
        if state.dtype != torch.uint8 or state.numel() != 16:
            raise RuntimeError(
                f"the {DEVICE} backend's generator state is 16 bytes (torch.uint8), but got "
                f"{state.numel()} elements of {state.dtype}"
            )
        seed, counter = state.contiguous().view(torch.int64).tolist()
        self._seed = seed & 0xFFFF_FFFF_FFFF_FFFF
        self._counter = counter

    def next_key(self):
        key = jax.random.fold_in(jax.random.key(self._seed & 0xFFFF_FFFF), self._counter)
        key = jax.random.fold_in(key, self._seed >> 32)
        self._counter += 1
        return key


def _key(generator: JaxGenerator):
    """A fresh key of ``generator`` (the bridge passes the device's default one when the
    caller gives none)."""
    return generator.next_key()


def _float_dtype(x):
    return x.dtype if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.float32


def _uniform_(x, from_=0.0, to=1.0, *, generator=None):
    return jax.random.uniform(_key(generator), x.shape, _float_dtype(x), from_, to).astype(x.dtype)


def _normal_(x, mean=0.0, std=1.0, *, generator=None):
    return (jax.random.normal(_key(generator), x.shape, _float_dtype(x)) * std + mean).astype(
        x.dtype
    )


def _bernoulli_(x, p=0.5, *, generator=None):
    return jax.random.bernoulli(_key(generator), p, x.shape).astype(x.dtype)


def _bernoulli(x, *, generator=None):
    return jax.random.bernoulli(_key(generator), x, x.shape).astype(x.dtype)


def _exponential_(x, lambd=1.0, *, generator=None):
    return (jax.random.exponential(_key(generator), x.shape, _float_dtype(x)) / lambd).astype(
        x.dtype
    )


def _random_range(x, low, high, generator):
    if x.dtype == jnp.bool_:
        return jax.random.bernoulli(_key(generator), 0.5, x.shape)
    return jax.random.randint(_key(generator), x.shape, low, high, dtype=jnp.int64).astype(x.dtype)


def _default_high(x):
    if jnp.issubdtype(x.dtype, jnp.integer):
        return int(jnp.iinfo(x.dtype).max) + 1
    if x.dtype == jnp.bool_:
        return 2
    return 1 << int(jnp.finfo(x.dtype).nmant + 1)


def _random_(x, *, generator=None):
    return _random_range(x, 0, min(_default_high(x), 1 << 63 - 1), generator)


def _random_to(x, to, *, generator=None):
    return _random_range(x, 0, to, generator)


def _random_from(x, from_, to=None, *, generator=None):
    return _random_range(x, from_, _default_high(x) if to is None else to, generator)


def _randperm_out(n, *, generator, out):
    return jax.random.permutation(_key(generator), n).astype(out.dtype)


_RANDOM = {
    "uniform_.default": _uniform_,
    "normal_.default": _normal_,
    "bernoulli_.float": _bernoulli_,
    "bernoulli.default": _bernoulli,
    "exponential_.default": _exponential_,
    "random_.default": _random_,
    "random_.to": _random_to,
    "random_.from": _random_from,
    "randperm.generator_out": _randperm_out,
}

KERNELS = {name: kernel(name, fn) for name, fn in _RANDOM.items()}
