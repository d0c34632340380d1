"""Random kernels of the ``npy`` backend and its generator, which ``torch.manual_seed`` seeds."""

import ml_dtypes
import numpy as np
import torch

from ._common import check_no_internal_overlap, DEVICE, LOW_FLOATS, NUMPY_TO_TORCH, unsupported

_LOW = LOW_FLOATS


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


_BF16 = np.dtype(ml_dtypes.bfloat16)


def _draw_dtype(dtype: np.dtype):
    """The float dtype to draw in for a tensor of ``dtype`` (float32 for the narrow floats)."""
    if dtype == np.float64 or dtype == np.complex128:
        return np.float64
    return np.float32


def _store(self, op, draw):
    """Fill ``self`` with ``draw(shape)``: refused before drawing, as CPU refuses, where two of
    its elements share memory (an expanded tensor)."""
    check_no_internal_overlap(op, self)
    self[...] = draw(self.shape)
    return self


def _fill(self, op, draw):
    """Fill ``self`` with ``draw(shape, dtype)``; complex tensors get real and imaginary parts
    drawn independently, as torch does through ``view_as_real``."""
    dtype = _draw_dtype(self.dtype)
    if self.dtype.kind == "c":
        def draw_pairs(shape):
            pair = draw(shape + (2,), dtype)
            return pair[..., 0] + 1j * pair[..., 1]

        return _store(self, op, draw_pairs)
    return _store(self, op, lambda shape: draw(shape, dtype))


def _check_float(self, op):
    if self.dtype.kind not in "fc" and self.dtype != _BF16:
        raise NotImplementedError(
            f"{op} is not implemented for {NUMPY_TO_TORCH[self.dtype]} on the {DEVICE} backend "
            "(it needs a floating point tensor, as on CPU)"
        )


def _normal_(self, mean=0.0, std=1.0, *, generator):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    _check_float(self, "normal_")
    if self.dtype.kind == "c":
        std = std / np.sqrt(2)
    rng = generator.numpy
    return _fill(self, "normal_",
                 lambda shape, dt: rng.standard_normal(shape, dt) * dt(std) + dt(mean))


def _uniform_(self, from_=0.0, to=1.0, *, generator):
    if from_ > to:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}"
        )
    _check_float(self, "uniform_")
    rng = generator.numpy
    return _fill(self, "uniform_",
                 lambda shape, dt: rng.random(shape, dt) * dt(to - from_) + dt(from_))


def _check_p(p, op):
    if not 0 <= p <= 1:
        raise RuntimeError(f"{op} expects p to be in [0, 1], but got p={p}")


def _bernoulli_(self, p=0.5, *, generator):
    if isinstance(p, np.ndarray):
        p = np.asarray(p, np.float64)
        if p.size and not ((p >= 0) & (p <= 1)).all():
            raise RuntimeError("bernoulli_: all elements of p must be in [0, 1]")
    else:
        _check_p(p, "bernoulli_")
    return _store(self, "bernoulli_", lambda shape: generator.numpy.random(shape) < p)


def _bernoulli(self, p=None, *, generator):
    if p is None:
        probs = np.asarray(self, np.float64)
        if probs.size and not ((probs >= 0) & (probs <= 1)).all():
            raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    else:
        _check_p(p, "bernoulli")
        probs = p
    return np.asarray(generator.numpy.random(self.shape) < probs).astype(self.dtype)


def _random_high(dtype: np.dtype) -> int:
    """One past the largest value ``random_()`` draws for ``dtype`` (as torch's CPU kernel)."""
    if dtype == np.bool_:
        return 2
    if dtype == _BF16:
        return 2 ** (ml_dtypes.finfo(dtype).nmant + 1) + 1
    if dtype.kind == "f":
        return 2 ** (np.finfo(dtype).nmant + 1) + 1
    if dtype.kind == "c":
        raise NotImplementedError(f"random_ is not implemented for complex tensors on {DEVICE}")
    return int(np.iinfo(dtype).max) + 1


def _random_(self, low=0, high=None, *, generator):
    if high is None:
        high = _random_high(self.dtype)
    if low >= high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    return _store(self, "random_",
                  lambda shape: generator.numpy.integers(low, high, shape, dtype=np.int64))


def _random_to(self, high, *, generator):
    return _random_(self, 0, high, generator=generator)


def _randperm_out(n, *, generator, out):
    return generator.numpy.permutation(n).astype(out.dtype)


def _exponential_(self, lambd=1.0, *, generator):
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    _check_float(self, "exponential_")
    rng = generator.numpy
    return _fill(self, "exponential_",
                 lambda shape, dt: rng.standard_exponential(shape, dt) / dt(lambd))


def _geometric_(self, p, *, generator):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _store(self, "geometric_", lambda shape: generator.numpy.geometric(p, shape))


def _log_normal_(self, mean=1.0, std=2.0, *, generator):
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    _check_float(self, "log_normal_")
    return _store(self, "log_normal_", lambda shape: generator.numpy.lognormal(mean, std, shape))


def _cauchy_(self, median=0.0, sigma=1.0, *, generator):
    if sigma <= 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    _check_float(self, "cauchy_")
    return _store(self, "cauchy_",
                  lambda shape: median + sigma * generator.numpy.standard_cauchy(shape))


def _multinomial(self, num_samples, replacement=False, *, generator):
    if self.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if self.dtype.kind != "f" and self.dtype != _BF16:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: "
            f"{NUMPY_TO_TORCH[self.dtype]}"
        )
    n = self.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    rows = np.asarray(self, np.float64).reshape(-1, n)
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    sums = rows.sum(axis=1)
    if (sums <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    out = np.empty((len(rows), num_samples), np.int64)
    rng = generator.numpy
    for i, (row, total) in enumerate(zip(rows, sums, strict=True)):
        if not replacement and np.count_nonzero(row) < num_samples:
            raise RuntimeError("invalid multinomial distribution (with replacement=False, not "
                               "enough non-negative category to sample)")
        out[i] = rng.choice(n, num_samples, replace=replacement, p=row / total)
    return out.reshape(self.shape[:-1] + (num_samples,))


def _rrelu_with_noise(self, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    _check_float(self, "rrelu_with_noise")
    if self.dtype.kind == "c":
        raise unsupported("leaky_relu_cpu" if not training else "rrelu_with_noise_out_cpu",
                          self.dtype)
    # CPU's result is contiguous, whatever the input's layout; float16 and bfloat16 are
    # computed in float32 (the slopes unrounded) and rounded once.
    x = self.astype(np.float32) if self.dtype in _LOW else self
    if not training:
        slope = (lower + upper) / 2
        return np.where(x >= 0, x, x * x.dtype.type(slope)).astype(self.dtype, order="C")
    r = generator.numpy.uniform(lower, upper, self.shape).astype(x.dtype)
    # As CPU: an input of zero draws a slope too (its gradient).
    negative = self <= 0
    noise[...] = np.where(negative, r, 1)
    return np.where(negative, x * r, x).astype(self.dtype, order="C")


KERNELS = {
    "rrelu_with_noise": _rrelu_with_noise,
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
    "exponential_": _exponential_,
    "geometric_": _geometric_,
    "log_normal_": _log_normal_,
    "cauchy_": _cauchy_,
    "multinomial": _multinomial,
}
