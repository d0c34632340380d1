"""Random kernels of the ``npy`` backend and its generator, which ``torch.manual_seed`` seeds."""

import numpy as np
import torch

from ._common import DEVICE


class NumpyGenerator:
    """The state of one ``torch.Generator`` of the ``npy`` device: a NumPy PCG64 generator.

    ``numpy`` is the ``numpy.random.Generator`` the random kernels draw from. The state as
    torch sees it (``get_state()``) is the seed followed by the PCG64 state, as bytes.
    """

    #: The seed of a new generator: the one torch gives its CPU and CUDA generators.
    DEFAULT_SEED = 67280421310721
    _FIELDS = (("seed", 8), ("state", 16), ("inc", 16), ("has_uint32", 1), ("uinteger", 4))
    STATE_SIZE = sum(n for _, n in _FIELDS)

    def __init__(self, seed: int = DEFAULT_SEED):
        self.manual_seed(seed)
    def manual_seed(self, seed: int) -> None:
        self._seed = int(seed)
        self.numpy = np.random.Generator(np.random.PCG64(self._seed))

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> torch.Tensor:
        pcg = self.numpy.bit_generator.state
        values = {"seed": self._seed, **pcg["state"], "has_uint32": pcg["has_uint32"],
                  "uinteger": pcg["uinteger"]}
        data = b"".join(values[name].to_bytes(n, "little") for name, n in self._FIELDS)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)

    def set_state(self, state: torch.Tensor) -> None:
        if state.numel() != self.STATE_SIZE:
            raise ValueError(
                f"expected a {DEVICE} generator state of {self.STATE_SIZE} bytes, but got "
                f"{state.numel()}"
            )
        data, values, start = bytes(state.numpy()), {}, 0
        for name, n in self._FIELDS:
            values[name] = int.from_bytes(data[start:start + n], "little")
            start += n
        self.manual_seed(values["seed"])
        self.numpy.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": values["state"], "inc": values["inc"]},
            "has_uint32": values["has_uint32"],
            "uinteger": values["uinteger"],
        }


def _normal_(self, mean=0.0, std=1.0, *, generator):
    self[...] = generator.numpy.normal(mean, std, self.shape)
    return self


def _uniform_(self, from_=0.0, to=1.0, *, generator):
    self[...] = generator.numpy.uniform(from_, to, self.shape)
    return self


def _bernoulli_(self, p=0.5, *, generator):
    self[...] = generator.numpy.random(self.shape) < p
    return self


def _bernoulli(self, p=None, *, generator):
    return (generator.numpy.random(self.shape) < (self if p is None else p)).astype(self.dtype)


def _random_high(dtype: np.dtype) -> int:
    """One past the largest value ``random_()`` draws for ``dtype`` (as torch's CPU kernel)."""
    if dtype == np.bool_:
        return 2
    if dtype.kind == "f":
        return 2 ** (np.finfo(dtype).nmant + 1) + 1
    return int(np.iinfo(dtype).max) + 1


def _random_(self, low=0, high=None, *, generator):
    if high is None:
        high = _random_high(self.dtype)
    if low >= high:
        raise ValueError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    self[...] = generator.numpy.integers(low, high, self.shape, dtype=np.int64)
    return self


def _random_to(self, high, *, generator):
    return _random_(self, 0, high, generator=generator)


def _randperm_out(n, *, generator, out):
    return generator.numpy.permutation(n).astype(out.dtype)


KERNELS = {
    "normal_": _normal_,
    "uniform_": _uniform_,
    "bernoulli_.float": _bernoulli_,
    "bernoulli_.Tensor": _bernoulli_,
    "bernoulli": _bernoulli,
    "bernoulli.p": _bernoulli,
    "random_": _random_,
    "random_.from": _random_,
    "random_.to": _random_to,
    "randperm.generator_out": _randperm_out,
}
