"""Elementwise kernels of the ``npy`` backend: arithmetic, math functions, comparisons.

Type promotion follows PyTorch (``_common.result_type``; Python numbers are weak scalars).
float16 and bfloat16 are computed in float32 and rounded back, as PyTorch does on the CPU;
integer and bool inputs of floating-point functions give the default float dtype. NumPy's
floating-point warnings are silenced inside the kernels; integer division by zero raises
``RuntimeError("ZeroDivisionError")`` like PyTorch. Functions NumPy lacks come from
``scipy.special``.
"""

import functools
import math
import re
import warnings

import ml_dtypes
import numpy as np
import scipy.special as sp
import torch

from torch_acc import versions

from ._common import (
    check_no_internal_overlap,
    checked_scalar,
    convertible,
    copy_into,
    kind,
    LOW_FLOATS,
    np_dtype,
    NUMPY_TO_TORCH,
    result_type,
    scalar_type_name,
    unsupported,
    with_cpu_layout,
)

_ndarray = np.ndarray
_BF16 = np.dtype(ml_dtypes.bfloat16)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_LOW = LOW_FLOATS

# NumPy's floating-point warnings (overflow, division by zero, invalid value, casts of nan
# and inf) mean nothing here: PyTorch gives inf and nan silently. The slower paths run in
# np.errstate; the hot ones skip it (it costs microseconds a call) and rely on this filter,
# which matches the warnings NumPy raises from the frames of the backend's modules (the
# casts of ``copy_into`` included).
warnings.filterwarnings(
    "ignore", category=RuntimeWarning, module=re.escape(__package__) + r"(\.|$)"
)


def _default_float() -> np.dtype:
    return np.dtype(np_dtype(torch.get_default_dtype()))


def _is_float(dt) -> bool:
    return dt.kind == "f" or dt == _BF16


def _compute(dt):
    """The dtype to compute in for a result of dtype ``dt``."""
    return _F32 if dt in _LOW else dt


def _cast(x, dt):
    """An operand (array or Python number) as an array of dtype ``dt``; Python ints wrap
    around like PyTorch's casts (``int8 + 1000``)."""
    if isinstance(x, np.ndarray):
        return x if x.dtype == dt else x.astype(dt)
    if isinstance(x, np.generic):
        return np.asarray(x).astype(dt)
    if isinstance(x, int) and not isinstance(x, bool) and dt.kind in "iu":
        info = np.iinfo(dt)
        if not info.min <= x <= info.max:
            x = (x - info.min) % (1 << info.bits) + info.min if dt.kind == "i" else x % (
                1 << info.bits)
    return np.array(x).astype(dt)


def _array(r):
    """``r``, a ufunc's result, as an array: NumPy gives a scalar for 0-d operands, which,
    as a payload, could not be written to (nor viewed)."""
    return r if type(r) is _ndarray else np.asarray(r)


def _finish(r, dt):
    r = np.asarray(r)
    return r if r.dtype == dt else r.astype(dt)


def _zero_division():
    return RuntimeError("ZeroDivisionError")


# --- unary ----------------------------------------------------------------------------------


def _float_unary(name, f, complex_ok=True, ufunc=None):
    """A floating-point function: bool and integer inputs give the default float dtype.
    ``ufunc``: ``f`` is a NumPy ufunc (warnings come from this module's frame)."""
    ufunc = isinstance(f, np.ufunc) if ufunc is None else ufunc

    def kernel(x):
        dt = x.dtype
        if dt.kind == "f" and dt.itemsize >= 4:
            if ufunc:  # the hot path: the module's warning filter, no errstate
                return np.asarray(f(x))
            with np.errstate(all="ignore"):
                return np.asarray(f(x))
        if dt.kind == "c":
            if not complex_ok:
                raise unsupported(name, dt)
            with np.errstate(all="ignore"):
                return np.asarray(f(x))
        out = _default_float() if dt.kind in "biu" else dt
        with np.errstate(all="ignore"):
            return _finish(f(x.astype(_compute(out))), out)

    kernel.__name__ = name
    return kernel


def _same_unary(name, f, ints=None, bools=None, complex_ok=True):
    """A function whose result has the input's dtype; ``ints``/``bools`` handle those dtypes
    (``"copy"`` for the identity), None to refuse them."""

    def kernel(x):
        dt = x.dtype
        if dt.kind == "f" and dt.itemsize >= 4 or dt.kind == "c" and complex_ok:
            with np.errstate(all="ignore"):
                return np.asarray(f(x))
        if dt.kind in "iu" or dt.kind == "b":
            g = ints if dt.kind in "iu" else bools
            if g is None:
                raise unsupported(name, dt)
            if g == "copy":
                return x.copy()
            with np.errstate(all="ignore"):
                return _finish(g(x), dt)
        if dt in _LOW:
            with np.errstate(all="ignore"):
                return _finish(f(x.astype(_F32)), dt)
        raise unsupported(name, dt)

    kernel.__name__ = name
    return kernel


def _bool_unary(name, f, ints, bools=None):
    """A predicate: the result is bool; ``ints`` gives the (constant) answer for integers."""

    def kernel(x):
        dt = x.dtype
        if dt.kind == "i" and ints is None:
            return np.asarray(x < 0)
        if dt.kind in "iub":
            if bools is not None and dt.kind == "b":
                return np.asarray(bools(x))
            return np.full(x.shape, bool(ints), _BOOL)
        if dt in _LOW:
            x = x.astype(_F32)
        return np.asarray(f(x))

    kernel.__name__ = name
    return kernel


def _real_only(kernel, error, message):
    """``kernel``, refusing complex inputs with CPU's own error for them."""

    @functools.wraps(kernel)
    def refusing(x):
        if x.dtype.kind == "c":
            raise error(message)
        return kernel(x)

    return refusing


def _reciprocal(x):
    # CPU's complex reciprocal is its division 1 / x: 1 / 0j is inf+nanj (NumPy's: nan+nanj).
    return np.true_divide(1, x) if x.dtype.kind == "c" else np.reciprocal(x)


def _sqrt(x):
    # NumPy's float32 sqrt is several times slower when it allocates its own result.
    return np.sqrt(x, out=np.empty_like(x))


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _sigmoid(x):
    if x.dtype.kind == "c":
        return _array(1 / (1 + np.exp(-x)))
    return _array(sp.expit(x))


def _sign(x):
    return np.where(np.isnan(x), np.zeros((), x.dtype), np.sign(x)) if x.dtype.kind == "f" \
        else np.sign(x)


def _sgn(x):
    if x.dtype.kind == "c":
        a = np.abs(x)
        return np.where(a == 0, np.zeros((), x.dtype), x / np.where(a == 0, 1, a))
    return _sign(x)


def _frac(x):
    return x - np.trunc(x)


def _digamma(x):
    r = sp.psi(x)
    # PyTorch: -inf at +0 and inf at -0 (the limits from the right and from the left),
    # whatever SciPy gives there; nan at negative integers.
    return np.where(x == 0, np.copysign(np.asarray(np.inf, r.dtype), -x), r)


def _lgamma(x):
    # lgamma(-inf) is inf (the gamma function's magnitude grows without bound); SciPy: -inf.
    r = sp.gammaln(x)
    return np.where(x == -np.inf, np.asarray(np.inf, r.dtype), r)


def _i0(x):
    return sp.i0(x)


def _angle(x):
    if x.dtype.kind == "c":
        return np.angle(x)
    return np.where(np.isnan(x), x, np.where(x < 0, np.asarray(np.pi, x.dtype),
                                              np.zeros((), x.dtype)))


def _abs(x):
    dt = x.dtype
    if dt.kind == "b":
        raise unsupported("abs", dt)
    if dt == _BF16:
        return _finish(np.abs(x.astype(_F32)), dt)
    return np.asarray(np.abs(x))


def _angle_kernel(x):
    dt = x.dtype
    if dt.kind in "biu":
        out = _default_float()
        return _finish(_angle(x.astype(out)), out)
    with np.errstate(all="ignore"):
        if dt in _LOW:
            return _finish(_angle(x.astype(_F32)), dt)
        return np.asarray(_angle(x))


def _neg(x):
    if x.dtype.kind == "b":
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    if x.dtype == _BF16:
        return _finish(np.negative(x.astype(_F32)), x.dtype)
    return np.asarray(np.negative(x))


def _bitwise_not(x):
    if x.dtype.kind == "b":
        return np.asarray(np.logical_not(x))
    if x.dtype.kind in "iu":
        return np.asarray(np.invert(x))
    raise unsupported("bitwise_not", x.dtype)


def _logical_not(x):
    if x.dtype == _BF16:
        x = x.astype(_F32)
    return np.asarray(np.logical_not(x))


def _round(x, *, decimals=0):
    dt = x.dtype
    if dt.kind == "b":
        raise unsupported("round", dt)  # as CPU ("round_vml_cpu" not implemented for 'Bool')
    if dt.kind in "iu":
        if decimals:
            raise unsupported("round", dt)
        return x.copy()
    if dt.kind == "c":
        raise unsupported("round", dt)
    c = _compute(dt)
    xc = x.astype(c) if c != dt else x
    with np.errstate(all="ignore"):
        if decimals == 0:
            r = np.rint(xc)
        elif decimals > 0:
            ten = np.asarray(10.0 ** decimals, c)
            r = np.rint(xc * ten) / ten
        else:
            ten = np.asarray(10.0 ** -decimals, c)
            r = np.rint(xc / ten) * ten
    return _finish(r, dt)


def _nan_to_num(x, nan=None, posinf=None, neginf=None):
    dt = x.dtype
    if dt.kind in "iub":
        return x.copy()
    c = _compute(dt)
    real = np.dtype(c.char.lower()) if dt.kind == "c" else dt
    if real == _F32 and dt in _LOW:
        real = dt
    info = ml_dtypes.finfo(real) if real == _BF16 else np.finfo(real)
    nan = 0.0 if nan is None else nan
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    xc = x.astype(c) if c != dt else x
    with np.errstate(all="ignore"):
        r = np.nan_to_num(xc, nan=nan, posinf=posinf, neginf=neginf)
    return _finish(r, dt)


def _stepwise(name, f):
    """A function PyTorch computes op by op in the tensor's dtype: float16 and bfloat16 round
    after every step (``f(v, r)`` calls ``r`` on each intermediate result)."""

    def kernel(x, *args):
        dt = x.dtype
        if dt in _LOW:
            def r(v):
                return v.astype(dt).astype(_F32)
        else:
            def r(v):
                return v
        return _float_unary(name, lambda v: f(v, r, *args), complex_ok=False)(x)

    kernel.__name__ = name
    return kernel


def _logit_steps(v, r, eps=None):
    if eps is not None:
        lo = np.asarray(eps, v.dtype)
        v = np.clip(v, r(lo), r(1 - lo))
    return np.log(r(v / r(1 - v)))


def _log_ndtr(v):
    # PyTorch's formula (closer to its float32 results than scipy.special.log_ndtr).
    t = v * np.asarray(math.sqrt(0.5), v.dtype)
    two = np.asarray(2, v.dtype)
    return np.where(v < -1, np.log(sp.erfcx(-t) / two) - t * t, np.log1p(-sp.erfc(t) / two))


def _polygamma(n, x):
    def f(v):
        if n == 0:
            return _digamma(v)
        if n == 1:
            return _trigamma(v)
        return sp.polygamma(n, v).astype(v.dtype)

    return _float_unary("polygamma", f, complex_ok=False)(x)


def _trigamma(x):
    # Reflection for negative arguments, as PyTorch: psi1(1-x) + psi1(x) = pi^2 / sin^2(pi x)
    neg = x < 0.5
    xr = np.where(neg, 1 - x, x)
    r = sp.polygamma(1, xr)
    s = np.sin(np.pi * x)
    refl = np.pi * np.pi / (s * s) - r
    return np.where(neg, refl, r).astype(x.dtype)


def _mvlgamma(x, p):
    def f(v):
        if (v <= (p - 1) / 2).any():
            raise RuntimeError(f"All elements must be greater than (p-1)/2, p = {p}")
        return _mvlgamma_sum(v, p)

    return _float_unary("mvlgamma", f, complex_ok=False)(x)


def _mvlgamma_sum(v, p):
    r = np.asarray(p * (p - 1) / 4 * math.log(math.pi), v.dtype)
    total = np.zeros(v.shape, v.dtype) + r
    for j in range(p):
        total = total + sp.gammaln(v - np.asarray(j / 2, v.dtype))
    return total


def _special(name, f):
    def g(v):
        return np.asarray(f(v)).astype(v.dtype, copy=False)

    return _float_unary(name, g, complex_ok=False)


# --- binary ---------------------------------------------------------------------------------


def _same(a, b):
    return type(a) is _ndarray and type(b) is _ndarray and a.dtype is b.dtype


def _operands(a, b, *, to_float=False):
    """(a, b as arrays of the compute dtype, the result dtype)."""
    dt = result_type(kind(a), kind(b))
    if to_float and dt.kind in "biu":
        dt = _default_float()
    c = _compute(dt)
    return _cast(a, c), _cast(b, c), dt


def _is_bool(x) -> bool:
    return isinstance(x, bool) or getattr(x, "dtype", None) == _BOOL


def _check_alpha(dt, alpha):
    """CPU's checks of ``add``'s and ``sub``'s ``alpha`` against the result dtype ``dt``,
    whatever its value (``alpha=1.0`` with integers is refused too)."""
    if type(alpha) is int:
        return
    if isinstance(alpha, bool):
        if dt != _BOOL:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif dt.kind in "biu":
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number."
        )
    elif isinstance(alpha, complex) and dt.kind != "c":
        raise RuntimeError(
            "For non-complex input tensors, argument alpha must not be a complex number."
        )


def _arith(uf, a, b, alpha=1):
    if uf is np.subtract and (_is_bool(a) or _is_bool(b)):
        raise versions.BOOL_SUBTRACTION_ERROR(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    dt = result_type(kind(a), kind(b))
    _check_alpha(dt, alpha)
    c = _compute(dt)
    a, b = _cast(a, c), _cast(b, c)
    with np.errstate(all="ignore"):
        if dt.kind == "c":
            return _finish(np.add(a, _complex_alpha_times(b, alpha, uf)), dt)
        if alpha != 1:
            # PyTorch casts alpha to the tensors' dtype (float16 0.3 is 0.2998...).
            b = b * _cast(_cast(alpha, dt) if dt != c else alpha, c)
        return _finish(uf(a, b), dt)


def _complex_alpha_times(b, alpha, uf):
    """CPU's complex ``add``/``sub`` add ``alpha * other`` (``-alpha`` for ``sub``), a complex
    product even where alpha is 1, whose ``0 * inf`` makes nan: ``(1+0j) + (inf+0j)`` has the
    real part inf and the imaginary part nan."""
    return np.multiply(b, -alpha if uf is np.subtract else alpha, dtype=b.dtype)


def _laid_out_fast(r, a, b):
    """``r``, the new result of a binary operator on arrays ``a`` and ``b``, as an array laid
    out as CPU lays it out. The common case costs three attribute reads: operands of one
    shape and layout, without dimensions of size one and without stride 0, whose layout NumPy
    and CPU both keep (they differ only where strides tie)."""
    shape = a.shape
    strides = a.strides
    if shape == b.shape and 1 not in shape and strides == b.strides and 0 not in strides:
        return r if type(r) is _ndarray else np.asarray(r)
    return with_cpu_layout(np.asarray(r), (a, b))


def _add(a, b, alpha=1):
    if type(a) is _ndarray and type(b) is _ndarray and a.dtype is b.dtype \
            and type(alpha) is int and alpha == 1 and a.dtype.kind != "c":
        return _laid_out_fast(a + b, a, b)  # the hot path
    return with_cpu_layout(_arith(np.add, a, b, alpha), (a, b))


def _sub(a, b, alpha=1):
    if type(a) is _ndarray and type(b) is _ndarray and a.dtype is b.dtype \
            and type(alpha) is int and alpha == 1 and a.dtype.kind not in "bc":
        return _laid_out_fast(a - b, a, b)
    return with_cpu_layout(_arith(np.subtract, a, b, alpha), (a, b))


def _rsub(a, b, alpha=1):
    return _sub(b, a, alpha=alpha)


def _mul(a, b):
    if type(a) is _ndarray and type(b) is _ndarray and a.dtype is b.dtype:
        return _laid_out_fast(np.logical_and(a, b) if a.dtype is _BOOL else a * b, a, b)
    dt = result_type(kind(a), kind(b))
    c = _compute(dt)
    x, y = _cast(a, c), _cast(b, c)
    with np.errstate(all="ignore"):
        r = _finish(np.logical_and(x, y) if dt == _BOOL else np.multiply(x, y), dt)
    return with_cpu_layout(r, (a, b))


def _div(a, b):
    if _same(a, b) and (a.dtype.kind == "f" and a.dtype.itemsize >= 4 or a.dtype.kind == "c"):
        return _laid_out_fast(np.true_divide(a, b), a, b)
    x, y, dt = _operands(a, b, to_float=True)
    with np.errstate(all="ignore"):
        return with_cpu_layout(_finish(np.true_divide(x, y), dt), (a, b))


def _check_int_divisor(a, b):
    """CPU's ZeroDivisionError, where a zero divisor meets an element (none for an empty
    result)."""
    if np.any(b == 0) and math.prod(np.broadcast_shapes(np.shape(a), np.shape(b))):
        raise _zero_division()


def _floor_divide(a, b):
    a, b, dt = _operands(a, b)
    if dt.kind in "iu":
        _check_int_divisor(a, b)
    elif dt.kind in "bc":
        raise unsupported("floor_divide", dt)  # as CPU ("div_floor_cpu" for 'Bool')
    with np.errstate(all="ignore"):
        return _finish(np.floor_divide(a, b), dt)


def _is_scalar(b, shape) -> bool:
    """Whether CPU's TensorIterator takes ``b`` for a scalar: one value for the whole result
    of ``shape`` (a number, or a tensor whose strides are 0 wherever the result's sizes are
    not 1). Its float16 and bfloat16 division kernels divide by a scalar in float32."""
    strides = np.broadcast_to(b, shape).strides
    return all(st == 0 or n == 1 for st, n in zip(strides, shape, strict=True))


def _trunc_divide(a, b):
    divisor = b
    a, b, dt = _operands(a, b)
    if dt.kind == "b":
        raise unsupported("div", dt)  # as CPU ("div_trunc_cpu" for 'Bool')
    with np.errstate(all="ignore"):
        if dt.kind in "iu":
            _check_int_divisor(a, b)
            q = np.floor_divide(a, b)
            fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
            return _finish(q + fix.astype(q.dtype), dt)
        if dt.kind == "c":
            raise unsupported("div", dt)
        q = np.true_divide(a, b)
        if dt in _LOW and not _is_scalar(divisor, q.shape):
            # Else CPU divides in the dtype: the quotient is rounded before it is truncated.
            q = q.astype(dt).astype(_F32)
        return _finish(np.trunc(q), dt)


def _div_mode(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return _div(a, b)
    if rounding_mode == "trunc":
        return _trunc_divide(a, b)
    if rounding_mode == "floor":
        return _floor_divide(a, b)
    raise RuntimeError(
        "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
        f"'{rounding_mode}'"
    )


def _int_mod(name, uf):
    def kernel(a, b):
        # The operands rounded to the result's dtype first, as CPU's kernel reads them: a
        # float16 remainder by 0.1 is one by float16(0.1).
        a, b, dt = _common(a, b)
        if dt.kind in "iu":
            _check_int_divisor(a, b)
        elif dt.kind in "bc":
            raise unsupported(name, dt)  # as CPU ("remainder_cpu" for 'Bool')
        with np.errstate(all="ignore"):
            return _finish(uf(a, b), dt)

    kernel.__name__ = name
    return kernel


def _remainder(a, b):
    """CPU's remainder: fmod's result moved into the divisor's sign. Unlike NumPy's, a zero
    keeps fmod's sign, the dividend's (``-2.0 % 2.0`` is -0.0)."""
    if a.dtype.kind in "iu":
        return np.remainder(a, b)
    mod = np.fmod(a, b)
    return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


def _int_pow(a, b):
    neg = b < 0
    if not np.any(neg):
        return np.power(a, b)
    one = np.ones((), a.dtype)
    r = np.power(a, np.where(neg, np.zeros((), b.dtype), b))
    odd = (b % 2) != 0
    special = np.where(a == 1, one, np.where(a == -1, np.where(odd, -one, one), 0 * one))
    return np.where(neg, special, r)


def _pow(a, b):
    if _same(a, b) and a.dtype.kind == "f" and a.dtype.itemsize >= 4:
        if a.dtype == _F32:
            return _finish(np.power(a, b, dtype=np.float64), _F32)
        return np.asarray(np.power(a, b))
    dt = result_type(kind(a), kind(b))
    if dt == _BOOL and isinstance(b, np.ndarray):
        # CPU has no bool kernel; a Python bool exponent, 0 or 1, is a fill or a copy there.
        raise unsupported("pow", dt)
    if dt.kind in "iu" and not isinstance(b, np.ndarray) and b < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    c = _compute(dt)
    if dt.kind == "c":
        with np.errstate(all="ignore"):
            return _finish(_complex_pow(a, b, c), dt)
    a, b = _cast(a, c), _cast(b, c)
    with np.errstate(all="ignore"):
        if dt.kind in "iu":
            return _finish(_int_pow(a, b), dt)
        if dt.kind == "b":
            return _finish(np.power(a.astype(np.uint8), b.astype(np.uint8)), dt)
        if c == _F32:
            # NumPy's float32 power is off by an ulp far more often than PyTorch's powf.
            return _finish(np.power(a, b, dtype=np.float64), dt)
        return _finish(np.power(a, b), dt)


def _complex_pow(a, b, c):
    """CPU's complex ``pow`` in dtype ``c``: C's ``cpow``, ``exp(b * log(a))`` (so ``0 ** 0``
    is nan, and ``0 ** -3`` is inf+nanj), but for the exponents CPU's Tensor_Scalar kernel
    computes otherwise (0, 1, 0.5, -0.5, -1, 2, 3, -2) and a Python base of 1 (ones)."""
    if not isinstance(a, np.ndarray) and a == 1:
        return np.ones(np.shape(b), c)
    x = _cast(a, c)
    if not isinstance(b, np.ndarray) and complex(b).imag == 0:
        special = {
            0: lambda: np.ones(x.shape, c),
            1: x.copy,
            0.5: lambda: np.sqrt(x),
            -0.5: lambda: 1 / np.sqrt(x),
            -1: lambda: 1 / x,
            2: lambda: x * x,
            3: lambda: x * x * x,
            -2: lambda: 1 / (x * x),
        }.get(complex(b).real)
        if special is not None:
            return special()
    return np.exp(_c99_multiply(_cast(b, c), np.log(x)))


def _c99_multiply(x, y):
    """``x * y`` as C's complex product (libgcc's ``__mulsc3``, which ``cpow`` uses): the
    naive product, but where both its parts are nan and an operand is infinite, an infinity
    recovered from the operands' signs (C99 Annex G), where NumPy's product stays nan."""
    r = np.asarray(x * y)
    lost = np.isnan(r.real) & np.isnan(r.imag)
    if not lost.any():
        return r
    a, b, c, d = (np.broadcast_to(v, r.shape) for v in (x.real, x.imag, y.real, y.imag))
    ac, bd, ad, bc = a * c, b * d, a * d, b * c

    def unit(v):  # an infinite part as +-1, a finite one as +-0
        return np.copysign(np.isinf(v).astype(v.dtype), v)

    def finite(v):  # nan as +-0
        return np.where(np.isnan(v), np.copysign(np.zeros((), v.dtype), v), v)

    x_inf = np.isinf(a) | np.isinf(b)
    y_inf = np.isinf(c) | np.isinf(d)
    products_inf = np.isinf(ac) | np.isinf(bd) | np.isinf(ad) | np.isinf(bc)
    a, b = np.where(x_inf, unit(a), a), np.where(x_inf, unit(b), b)
    c, d = np.where(x_inf, finite(c), c), np.where(x_inf, finite(d), d)
    c, d = np.where(y_inf, unit(c), c), np.where(y_inf, unit(d), d)
    a, b = np.where(y_inf, finite(a), a), np.where(y_inf, finite(b), b)
    scaled = ~x_inf & ~y_inf & products_inf
    a, b, c, d = (np.where(scaled, finite(v), v) for v in (a, b, c, d))
    recalc = lost & (x_inf | y_inf | products_inf)
    inf = np.asarray(np.inf, a.dtype)
    recovered = np.empty_like(r)
    recovered.real = inf * (a * c - b * d)
    recovered.imag = inf * (a * d + b * c)
    return np.where(recalc, recovered, r)


def _float_binary(name, f, complex_ok=False, ints_ok=True):
    """A floating-point function of two operands: integers promote to the default float
    (``ints_ok``; else, as CPU, operands that promote to an integer or bool are refused)."""

    def kernel(a, b):
        if _same(a, b) and a.dtype.kind == "f" and a.dtype.itemsize >= 4:
            with np.errstate(all="ignore"):
                return _finish(f(a, b), a.dtype)
        if not ints_ok:
            dt = result_type(kind(a), kind(b))
            if dt.kind in "biu":
                raise unsupported(name, dt)
        a, b, dt = _operands(a, b, to_float=True)
        if dt.kind == "c" and not complex_ok:
            raise unsupported(name, dt)
        with np.errstate(all="ignore"):
            return _finish(f(a, b), dt)

    kernel.__name__ = name
    return kernel


def _promoting_binary(name, f, complex_ok=True, float_ok=True, bool_ok=True, bool_f=None):
    """A function of two operands computed in their promoted dtype."""

    def kernel(a, b):
        a, b, dt = _operands(a, b)
        if (dt.kind == "c" and not complex_ok or _is_float(dt) and not float_ok
                or dt.kind == "b" and not bool_ok):
            raise unsupported(name, dt)
        with np.errstate(all="ignore"):
            if dt.kind == "b" and bool_f is not None:
                return _finish(bool_f(a, b), dt)
            return _finish(f(a, b), dt)

    kernel.__name__ = name
    return kernel


def _common(a, b):
    """(a, b as arrays of their promoted dtype, then of its compute dtype; that dtype): as
    CPU's comparisons, which round both operands to the promoted dtype (``float16 == 0.1``
    compares with ``float16(0.1)``) before they compare."""
    dt = result_type(kind(a), kind(b))
    c = _compute(dt)
    a, b = _cast(a, dt), _cast(b, dt)
    return (a, b, dt) if c is dt else (a.astype(c), b.astype(c), dt)


def _compare(name, uf, ordered=True):
    def kernel(a, b):
        if _same(a, b) and a.dtype is not _BF16:
            if ordered and a.dtype.kind == "c":
                raise unsupported(name, a.dtype)
            return np.asarray(uf(a, b))
        a, b, dt = _common(a, b)
        if ordered and dt.kind == "c":
            raise unsupported(name, dt)
        return np.asarray(uf(a, b))

    kernel.__name__ = name
    return kernel


def _truth(x):
    if isinstance(x, np.ndarray):
        if x.dtype == _BOOL:
            return x
        if x.dtype == _BF16:
            x = x.astype(_F32)
        return x != 0
    return np.asarray(bool(x))


def _logical(uf):
    def kernel(a, b):
        if not _same(a, b):
            a, b, _ = _common(a, b)
        return np.asarray(uf(_truth(a), _truth(b)))

    return kernel


def _bitwise(name, uf):
    return _promoting_binary(name, uf, complex_ok=False, float_ok=False)


def _shift(name, left):
    def kernel(a, b):
        a, b, dt = _operands(a, b)
        if dt.kind not in "iu":
            raise unsupported(name, dt)
        bits = dt.itemsize * 8
        sb = b.astype(np.dtype(f"i{dt.itemsize}")) if dt.kind == "u" else b
        with np.errstate(all="ignore"):
            if left:
                bad = (sb < 0) | (b >= bits)
                r = np.left_shift(a, np.where(bad, np.zeros((), dt), b))
                return _finish(np.where(bad, np.zeros((), dt), r), dt)
            limit = bits - (1 if dt.kind == "i" else 0)
            bad = (sb < 0) | (b >= limit)
            if dt.kind == "u":
                r = np.right_shift(a, np.where(bad, np.zeros((), dt), b))
                return _finish(np.where(bad, np.zeros((), dt), r), dt)
            return _finish(np.right_shift(a, np.where(bad, np.asarray(limit, dt), b)), dt)

    kernel.__name__ = name
    return kernel


def _minmax(name, uf):
    def kernel(a, b):
        if _same(a, b) and a.dtype.kind in "fiub" and a.dtype is not _BF16:
            return np.asarray(uf(a, b))
        a, b, dt = _operands(a, b)
        if dt.kind == "c":
            raise RuntimeError(f"{name} not implemented for complex tensors.")
        return _finish(uf(a, b), dt)

    kernel.__name__ = name
    return kernel


def _xlogy(a, b):
    return np.where(np.isnan(b), b, np.where(a == 0, np.zeros((), a.dtype), a * np.log(b)))


def _xlog1py(a, b):
    return np.where(np.isnan(b), b, np.where(a == 0, np.zeros((), a.dtype), a * np.log1p(b)))


def _copysign(a, b):
    return np.copysign(a, b)


def _heaviside(a, b):
    dt = result_type(kind(a), kind(b))
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype):
        raise RuntimeError(
            "heaviside is not yet implemented for tensors with different dtypes"
        )
    if dt.kind == "c":
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    c = _compute(dt)
    a, b = _cast(a, c), _cast(b, c)
    zero = np.zeros((), c)
    one = np.ones((), c)
    return _finish(np.where(a == 0, b, np.where(a > 0, one, zero)), dt)


def _nextafter(a, b):
    dt = result_type(kind(a), kind(b))
    if not _is_float(dt):
        raise unsupported("nextafter", dt)
    if dt == _BF16:
        a, b = _cast(a, _F32), _cast(b, _F32)
        # Step one bfloat16 ulp: the next float32 rounded would not move.
        ai = a.astype(_BF16)
        up = ai.view(np.uint16).astype(np.int32)
        same = a == b
        sign = np.signbit(a)
        towards_up = (b > a) != sign
        step = np.where(towards_up, 1, -1)
        zero = a == 0
        r = (up + step).astype(np.uint16).view(_BF16)
        tiny = np.where(b > a, 1, 0x8001).astype(np.uint16).view(_BF16)
        r = np.where(zero, tiny, r)
        r = np.where(same | np.isnan(a) | np.isnan(b), (a + b).astype(_BF16), r)
        return _finish(np.where(same, b.astype(_BF16), r), dt)
    return _finish(np.nextafter(_cast(a, dt), _cast(b, dt)), dt)


def _logaddexp(a, b):
    if a.dtype.kind != "c":
        return np.logaddexp(a, b)
    a, b = np.broadcast_arrays(a, b)
    first = a.real >= b.real
    hi, lo = np.where(first, a, b), np.where(first, b, a)
    r = hi + np.log1p(np.exp(lo - hi))
    # Equal infinities: exp(inf - inf) is nan; the sum is the infinity itself.
    same_inf = np.isinf(hi.real) & (hi == lo)
    return np.where(same_inf, hi, r)


def _zeta(a, b):
    return sp.zeta(a, b)


def _igamma(a, b):
    return sp.gammainc(a, b)


def _igammac(a, b):
    return sp.gammaincc(a, b)


def _frexp(x):
    dt = x.dtype
    if not _is_float(dt):
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    with np.errstate(all="ignore"):
        m, e = np.frexp(x.astype(_F32) if dt == _BF16 else x)
    return _finish(m, dt), _finish(e, np.dtype(np.int32))


def _complex(real, imag):
    dt = real.dtype
    if dt.kind != "f" or imag.dtype != dt:
        raise RuntimeError(
            f"Expected both inputs to be Half, Float or Double tensors but got "
            f"{NUMPY_TO_TORCH.get(dt, dt)} and {NUMPY_TO_TORCH.get(imag.dtype, imag.dtype)}")
    if dt == _F16:
        raise unsupported("complex", dt)
    c = np.complex64 if dt == _F32 else np.complex128
    out = np.empty(np.broadcast_shapes(real.shape, imag.shape), c)
    out.real = real
    out.imag = imag
    return out


def _polar(r, theta):
    out = _complex(r, theta)
    with np.errstate(all="ignore"):
        out.real = r * np.cos(theta)
        out.imag = r * np.sin(theta)
    return out


# --- orthogonal polynomials (PyTorch's special_*_polynomial_*): p(x, n) -------------------


def _poly_table(x, n, first, step):
    """p_n(x) by the three-term recurrence ``p_{k+1} = step(x, k, p_k, p_{k-1})``, p_0 = 1,
    p_1 = first(x); 0 for n < 0 (n truncated to an integer, as PyTorch's cast)."""
    with np.errstate(all="ignore"):
        ni = np.trunc(n).astype(np.int64) if n.dtype.kind in "fc" else n.astype(np.int64)
    x, ni = np.broadcast_arrays(x, ni)
    one = np.ones((), x.dtype)
    out = np.where(ni == 0, one, np.zeros((), x.dtype))
    top = int(ni.max()) if ni.size else 0
    if top >= 1:
        p, q = np.broadcast_to(one, x.shape), first(x)
        out = np.where(ni == 1, q, out)
        for k in range(1, top):
            p, q = q, step(x, k, q, p)
            out = np.where(ni == k + 1, q, out)
    return out, ni


def _chebyshev(kind_, shifted=False):
    first = {"t": lambda x: x, "u": lambda x: 2 * x, "v": lambda x: 2 * x - 1,
             "w": lambda x: 2 * x + 1}[kind_]

    def f(x, n):
        if shifted:
            x = 2 * x - 1
        out, ni = _poly_table(x, n, first, lambda x, k, q, p: 2 * x * q - p)
        one = np.ones((), x.dtype)
        odd = ni % 2 != 0
        nf = ni.astype(x.dtype)
        big = np.abs(x) < 1
        with np.errstate(all="ignore"):
            if kind_ == "t":
                edge = np.where((x > 0) | ~odd, one, -one)
                trig = np.cos(nf * np.arccos(x))
                out = np.where((ni > 6) & big, trig, out)
            elif kind_ == "u":
                edge = np.where((x > 0) | ~odd, nf + 1, -(nf + 1))
                a = np.arccos(x)
                sa = np.sin(a)
                trig = np.where(sa != 0, np.sin((nf + 1) * a) / sa,
                                (nf + 1) * np.cos((nf + 1) * a) / x)
                out = np.where((ni > 8) & big, trig, out)
            elif kind_ == "v":
                edge = np.where(x > 0, one, np.where(~odd, 2 * ni + 1, -(2 * ni + 1))
                                .astype(x.dtype))
            else:
                edge = np.where(x > 0, (2 * ni + 1).astype(x.dtype), np.where(~odd, one, -one))
        out = np.where((np.abs(x) == 1) & (ni >= 0), edge, out)
        return np.where(ni < 0, np.zeros((), x.dtype), out)

    return f


def _hermite_h(x, n):
    return _poly_table(x, n, lambda x: 2 * x, lambda x, k, q, p: 2 * x * q - 2 * k * p)[0]


def _hermite_he_step(x, k, q, p):
    if x.dtype == _F32:
        # PyTorch's compiled loop fuses x * q - (k * p) into one fma; so do we.
        kp = (k * p).astype(np.float64)
        return (x.astype(np.float64) * q.astype(np.float64) - kp).astype(_F32)
    return x * q - k * p


def _hermite_he(x, n):
    return _poly_table(x, n, lambda x: x, _hermite_he_step)[0]


def _laguerre(x, n):
    out, ni = _poly_table(x, n, lambda x: 1 - x,
                          lambda x, k, q, p: ((2 * k + 1 - x) * q - k * p) / (k + 1))
    out = np.where((x == 0) & (ni >= 0), np.ones((), x.dtype), out)
    return out


def _legendre(x, n):
    out, ni = _poly_table(x, n, lambda x: x,
                          lambda x, k, q, p: ((2 * k + 1) * x * q - k * p) / (k + 1))
    one = np.ones((), x.dtype)
    edge = np.where((x > 0) | (ni % 2 == 0), one, -one)
    return np.where((np.abs(x) == 1) & (ni >= 0), edge, out)


def _polynomials():
    fns = {f"chebyshev_polynomial_{k}": _chebyshev(k) for k in "tuvw"}
    fns.update({f"shifted_chebyshev_polynomial_{k}": _chebyshev(k, True) for k in "tuvw"})
    fns.update(hermite_polynomial_h=_hermite_h, hermite_polynomial_he=_hermite_he,
               laguerre_polynomial_l=_laguerre, legendre_polynomial_p=_legendre)
    table = {}
    for name, fn in fns.items():
        k = _float_binary(f"special_{name}", fn)
        for overload in ("", ".x_scalar", ".n_scalar"):
            table[f"special_{name}{overload}"] = k
    return table


# --- several operands -----------------------------------------------------------------------


_CLAMP_COMPLEX = "clamp is not supported for complex types"


def _clamp_name(min, max) -> str:
    return "clamp" if min is not None and max is not None else (
        "clamp_min" if min is not None else "clamp_max")


def _clamp(x, min=None, max=None):
    """``clamp`` with Python numbers as bounds. As CPU: a floating-point ``x`` keeps its dtype
    (a complex bound must be real, as its conversion to double asks); others promote, to
    anything but complex; bool has no kernel."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    complex_bound = isinstance(min, complex) or isinstance(max, complex)
    if x.dtype.kind == "c" or complex_bound and not _is_float(x.dtype):
        raise NotImplementedError(_CLAMP_COMPLEX)
    if complex_bound:
        if any(isinstance(v, complex) and v.imag for v in (min, max)):
            raise RuntimeError("value cannot be converted to type double without overflow")
        min, max = (v.real if isinstance(v, complex) else v for v in (min, max))
    return _clamped(_clamp_name(min, max), x, min, max)


def _clamp_scalar_bound(x, min, max):
    """``clamp_min`` and ``clamp_max`` with a Python number: CPU refuses a complex one."""
    if x.dtype.kind == "c" or isinstance(min, complex) or isinstance(max, complex):
        raise NotImplementedError(_CLAMP_COMPLEX)
    return _clamped(_clamp_name(min, max), x, min, max)


def _clamp_tensor(x, min=None, max=None):
    """``clamp.Tensor``: with one bound CPU computes ``maximum`` or ``minimum`` (bool
    included); with both, its clamp kernel, which has no bool."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    name = _clamp_name(min, max)
    return _clamped({"clamp_min": "maximum", "clamp_max": "minimum"}.get(name, name), x, min,
                    max, bools=name != "clamp")


def _clamped(name, x, min, max, bools=False):
    kinds = [kind(x)] + [kind(v) for v in (min, max) if v is not None]
    dt = result_type(*kinds)
    if dt.kind == "c" or dt == _BOOL and not bools:
        raise unsupported(name, dt)
    # Python numbers convert to the result's dtype as on the CPU: refused where they overflow.
    lo, hi = (v if v is None or isinstance(v, np.ndarray) else checked_scalar(v, dt)
              for v in (min, max))
    c = _compute(dt)
    r = _cast(x, c)
    with np.errstate(all="ignore"):
        if lo is not None:
            r = np.maximum(r, _cast(lo, c))
        if hi is not None:
            r = np.minimum(r, _cast(hi, c))
    return _finish(r, dt)


def _clamp_min(x, min):
    return _clamp_scalar_bound(x, min, None)


def _clamp_max(x, max):
    return _clamp_scalar_bound(x, None, max)


def _clamp_min_tensor(x, min):
    return _clamp_tensor(x, min, None)


def _clamp_max_tensor(x, max):
    return _clamp_tensor(x, None, max)


def _lerp(x, end, weight):
    """CPU's ``lerp``: operands of one floating-point or complex dtype, the result's; a Python
    ``weight`` is converted to it (a complex one must be real for a real ``x``)."""
    for other, what in ((end, "end"), (weight, "weight")):
        if isinstance(other, np.ndarray) and other.dtype != x.dtype:
            raise RuntimeError(
                f"lerp: expected dtype {scalar_type_name(NUMPY_TO_TORCH[x.dtype])} for `{what}`, "
                f"but got dtype {scalar_type_name(NUMPY_TO_TORCH[other.dtype])}")
    dt = x.dtype
    if dt.kind in "biu":
        raise unsupported("lerp", dt)
    if isinstance(weight, complex) and dt.kind != "c":
        if weight.imag:
            name = "double" if dt == _F64 else "float"
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        weight = weight.real
    c = _compute(dt)
    a, b, w = _cast(x, c), _cast(end, c), _cast(weight, c)
    with np.errstate(all="ignore"):
        # PyTorch's formula: from the nearer end, for accuracy at both.
        small = np.abs(w) < 0.5
        r = np.where(small, a + w * (b - a), b - (b - a) * (1 - w))
    return _finish(r, dt)


def _addcmul(x, t1, t2, *, value=1):
    dt = result_type(kind(x), kind(t1), kind(t2))
    c = _compute(dt)
    with np.errstate(all="ignore"):
        return _finish(_cast(x, c) + _cast(value, c) * _cast(t1, c) * _cast(t2, c), dt)


def _addcdiv(x, t1, t2, *, value=1):
    dt = result_type(kind(x), kind(t1), kind(t2))
    if dt.kind in "iub":
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release "
            "addcdiv will perform a true division of tensor1 and tensor2."
        )
    c = _compute(dt)
    with np.errstate(all="ignore"):
        # In CPU's order, (value * t1) / t2: it decides complex inf and nan results.
        return _finish(_cast(x, c) + _cast(value, c) * _cast(t1, c) / _cast(t2, c), dt)


def _inplace(op, name):
    """The in-place overload of ``op``: its result written into ``self``, which keeps its
    dtype (a result PyTorch would not cast to it is an error, as on the CPU)."""

    def kernel(self, *args, **kwargs):
        check_no_internal_overlap(name, self)
        value = op(self, *args, **kwargs)
        if np.shape(value) != self.shape:
            raise RuntimeError(
                f"{name}: output with shape {list(self.shape)} doesn't match the broadcast "
                f"shape {list(np.shape(value))}"
            )
        dt = getattr(value, "dtype", None)
        if dt is not None and dt != self.dtype:
            have, want = NUMPY_TO_TORCH[np.dtype(dt)], NUMPY_TO_TORCH[self.dtype]
            if not torch.can_cast(have, want):
                raise RuntimeError(
                    f"{name}: result type {scalar_type_name(have)} can't be cast to the desired "
                    f"output type {scalar_type_name(want)}"
                )
        if type(self) is _ndarray and self.flags.writeable:
            np.copyto(self, value, casting="unsafe")
            return self
        return copy_into(self, value)

    kernel.__name__ = name
    return kernel


def _out(op, name):
    """The ``out=`` overload of ``op``: its result written into ``out``, in ``out``'s dtype.
    The bridge has checked the call against CPU's meta function (the dtype cast) and resized
    ``out`` as CPU would; an ``out`` some of whose elements share memory is refused here, and
    a payload that cannot be written into is replaced by the result (the bridge binds it)."""

    def kernel(*args, out, **kwargs):
        check_no_internal_overlap(name, out)
        value = op(*args, **kwargs)
        if type(out) is _ndarray and out.flags.writeable and np.shape(value) == out.shape:
            np.copyto(out, value, casting="unsafe")
            return out
        return value if value.dtype == out.dtype else value.astype(out.dtype)

    kernel.__name__ = name
    return kernel


def _fast_inplace(uf, op, name):
    """``add_``/``sub_``/``mul_``/``div_``: a float or complex ``self`` and ``other`` of its
    dtype computed straight into ``self`` (the optimizers' hot path); the rest through
    :func:`_inplace`."""
    slow = _inplace(op, name)

    def kernel(self, other, alpha=1):
        dt = self.dtype
        if (type(self) is _ndarray and type(other) is _ndarray and other.dtype is dt
                and (dt.kind == "f" and dt.itemsize >= 4 or dt.kind == "c")
                and self.flags.writeable and other.shape == self.shape):
            check_no_internal_overlap(name, self)
            _check_alpha(dt, alpha)
            if dt.kind == "c" and uf in (np.add, np.subtract):
                np.add(self, _complex_alpha_times(other, alpha, uf), out=self)
            else:
                if alpha != 1:
                    other = np.multiply(other, alpha, dtype=dt)
                uf(self, other, out=self)
            return self
        if type(alpha) is int and alpha == 1:
            return slow(self, other)
        return slow(self, other, alpha=alpha)

    kernel.__name__ = name
    return kernel


def _fill(self, value):
    if isinstance(value, np.ndarray):
        check_no_internal_overlap("fill_", self)
        self[...] = convertible(value, self.dtype).astype(self.dtype)
    elif self.size == 1 and self.dtype in _LOW:
        # CPU's one-element fill converts a float16/bfloat16 value through double, unchecked.
        self[...] = checked_scalar(value, _F64).astype(self.dtype)
    else:
        self[...] = checked_scalar(value, self.dtype)
    return self


def _zero(self):
    self[...] = 0
    return self


_conj_physical = _same_unary("_conj_physical", np.conjugate, ints="copy", bools="copy")


def _unary_table():
    fu = _float_unary
    table = {
        "acos": fu("acos", np.arccos),
        "acosh": fu("acosh", np.arccosh),
        "asin": fu("asin", np.arcsin),
        "asinh": fu("asinh", np.arcsinh),
        "atan": fu("atan", np.arctan),
        "atanh": fu("atanh", np.arctanh),
        "cos": fu("cos", np.cos),
        "cosh": fu("cosh", np.cosh),
        "sin": fu("sin", np.sin),
        "sinh": fu("sinh", np.sinh),
        "tan": fu("tan", np.tan),
        "tanh": fu("tanh", np.tanh),
        "exp": fu("exp", np.exp),
        "exp2": fu("exp2", np.exp2),
        "expm1": fu("expm1", np.expm1),
        "log": fu("log", np.log),
        "log10": fu("log10", np.log10),
        "log1p": fu("log1p", np.log1p),
        "log2": fu("log2", np.log2),
        "sqrt": fu("sqrt", _sqrt, ufunc=True),
        "rsqrt": fu("rsqrt", _rsqrt),
        "reciprocal": fu("reciprocal", _reciprocal, ufunc=True),
        "sigmoid": fu("sigmoid", _sigmoid),
        "sinc": fu("sinc", np.sinc),
        "deg2rad": _real_only(fu("deg2rad", np.deg2rad), RuntimeError,
                              "deg2rad is not supported for complex tensors."),
        "rad2deg": _real_only(fu("rad2deg", np.rad2deg), RuntimeError,
                              "rad2deg is not supported for complex tensors."),
        "erf": fu("erf", sp.erf, complex_ok=False),
        "erfc": fu("erfc", sp.erfc, complex_ok=False),
        "erfinv": fu("erfinv", sp.erfinv, complex_ok=False),
        "lgamma": fu("lgamma", _lgamma, complex_ok=False),
        "digamma": fu("digamma", _digamma, complex_ok=False),
        "i0": fu("i0", _i0, complex_ok=False),
        "special_i0e": _special("special_i0e", sp.i0e),
        "special_i1": _special("special_i1", sp.i1),
        "special_i1e": _special("special_i1e", sp.i1e),
        "special_ndtri": _special("special_ndtri", sp.ndtri),
        "special_log_ndtr": _special("special_log_ndtr", _log_ndtr),
        "special_erfcx": _special("special_erfcx", sp.erfcx),
        "special_entr": _special("special_entr", sp.entr),
        "special_bessel_j0": _special("special_bessel_j0", sp.j0),
        "special_bessel_j1": _special("special_bessel_j1", sp.j1),
        "special_bessel_y0": _special("special_bessel_y0", sp.y0),
        "special_bessel_y1": _special("special_bessel_y1", sp.y1),
        "special_modified_bessel_i0": _special("special_modified_bessel_i0", sp.i0),
        "special_modified_bessel_i1": _special("special_modified_bessel_i1", sp.i1),
        "special_modified_bessel_k0": _special("special_modified_bessel_k0", sp.k0),
        "special_modified_bessel_k1": _special("special_modified_bessel_k1", sp.k1),
        "special_scaled_modified_bessel_k0": _special("special_scaled_modified_bessel_k0",
                                                      sp.k0e),
        "special_scaled_modified_bessel_k1": _special("special_scaled_modified_bessel_k1",
                                                      sp.k1e),
        "special_spherical_bessel_j0": _special("special_spherical_bessel_j0",
                                                lambda v: sp.spherical_jn(0, v)),
        "special_airy_ai": _special("special_airy_ai", lambda v: sp.airy(v)[0]),
        "abs": _abs,
        "angle": _angle_kernel,
        "neg": _neg,
        "sign": _same_unary("sign", _sign, ints=np.sign, bools="copy", complex_ok=False),
        "sgn": _same_unary("sgn", _sgn, ints=np.sign, bools="copy"),
        "ceil": _same_unary("ceil", np.ceil, ints="copy", complex_ok=False),
        "floor": _same_unary("floor", np.floor, ints="copy", complex_ok=False),
        "trunc": _same_unary("trunc", np.trunc, ints="copy", complex_ok=False),
        "frac": _same_unary("frac", _frac, complex_ok=False),
        "_conj_physical": _conj_physical,
        "bitwise_not": _bitwise_not,
        "logical_not": _logical_not,
        "isnan": _bool_unary("isnan", np.isnan, False),
        "isinf": _bool_unary("isinf", np.isinf, False),
        "isfinite": _bool_unary("isfinite", np.isfinite, True),
        "isposinf": _bool_unary("isposinf", np.isposinf, False),
        "isneginf": _bool_unary("isneginf", np.isneginf, False),
        "signbit": _real_only(_bool_unary("signbit", np.signbit, None), NotImplementedError,
                              "signbit is not implemented for complex tensors."),
        "round": _round,
        "round.decimals": _round,
        "nan_to_num": _nan_to_num,
        "logit": _stepwise("logit", _logit_steps),
        "polygamma": _polygamma,
        "mvlgamma": _mvlgamma,
    }
    return table


def _binary_table():
    table = {}
    for name, uf in (("eq", np.equal), ("ne", np.not_equal)):
        k = _compare(name, uf, ordered=False)
        table[f"{name}.Tensor"] = table[f"{name}.Scalar"] = k
    for name, uf in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                     ("ge", np.greater_equal)):
        k = _compare(name, uf)
        table[f"{name}.Tensor"] = table[f"{name}.Scalar"] = k
    for name, uf in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                     ("logical_xor", np.logical_xor)):
        table[name] = _logical(uf)
        table[f"{name}_"] = _inplace(table[name], f"{name}_")
    for name, uf in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                     ("bitwise_xor", np.bitwise_xor)):
        k = _bitwise(name, uf)
        table[f"{name}.Tensor"] = table[f"{name}.Scalar"] = table[f"{name}.Scalar_Tensor"] = k
    dunder = {"bitwise_and": "__and__", "bitwise_or": "__or__", "bitwise_xor": "__xor__"}
    for name, d in dunder.items():
        table[f"{d}.Tensor"] = table[f"{d}.Scalar"] = table[f"{name}.Tensor"]
    for left, names in ((True, ("bitwise_left_shift", "__lshift__")),
                        (False, ("bitwise_right_shift", "__rshift__"))):
        k = _shift(names[0], left)
        for n in names:
            table[f"{n}.Tensor"] = k
        table[f"{names[0]}.Tensor_Scalar"] = table[f"{names[0]}.Scalar_Tensor"] = k
        table[f"{names[1]}.Scalar"] = k
    for name, uf in (("maximum", np.maximum), ("minimum", np.minimum), ("fmax", np.fmax),
                     ("fmin", np.fmin)):
        table[name] = _minmax(name, uf)
    remainder = _int_mod("remainder", _remainder)
    fmod = _int_mod("fmod", np.fmod)
    table.update({
        "remainder.Tensor": remainder,
        "remainder.Scalar": remainder,
        "remainder.Scalar_Tensor": remainder,
        "fmod.Tensor": fmod,
        "fmod.Scalar": fmod,
        "floor_divide": _floor_divide,
        "floor_divide.Scalar": _floor_divide,
        "pow.Tensor_Tensor": _pow,
        "pow.Tensor_Scalar": _pow,
        "pow.Scalar": _pow,
        "atan2": _float_binary("atan2", np.arctan2),
        "hypot": _float_binary("hypot", np.hypot, ints_ok=False),
        "copysign.Tensor": _float_binary("copysign", _copysign),
        "copysign.Scalar": _float_binary("copysign", _copysign),
        "logaddexp": _float_binary("logaddexp", _logaddexp, complex_ok=True, ints_ok=False),
        "logaddexp2": _float_binary("logaddexp2", np.logaddexp2, ints_ok=False),
        "xlogy.Tensor": _float_binary("xlogy", _xlogy),
        "xlogy.Scalar_Self": _float_binary("xlogy", _xlogy),
        "xlogy.Scalar_Other": _float_binary("xlogy", _xlogy),
        "special_xlog1py": _float_binary("special_xlog1py", _xlog1py),
        "special_xlog1py.self_scalar": _float_binary("special_xlog1py", _xlog1py),
        "special_xlog1py.other_scalar": _float_binary("special_xlog1py", _xlog1py),
        "special_zeta": _float_binary("special_zeta", _zeta),
        "special_zeta.self_scalar": _float_binary("special_zeta", _zeta),
        "special_zeta.other_scalar": _float_binary("special_zeta", _zeta),
        "igamma": _float_binary("igamma", _igamma, ints_ok=False),
        "igammac": _float_binary("igammac", _igammac, ints_ok=False),
        "nextafter": _nextafter,
        "heaviside": _heaviside,
        "frexp.Tensor": _frexp,
        "complex": _complex,
        "polar": _polar,
        **_polynomials(),
        "gcd": _promoting_binary("gcd", np.gcd, complex_ok=False, float_ok=False, bool_ok=False),
        "lcm": _promoting_binary("lcm", np.lcm, complex_ok=False, float_ok=False, bool_ok=False),
    })
    return table


def _laid_out(table, scalars):
    """The out-of-place kernels of ``table`` with results laid out as CPU's TensorIterator
    lays them out (:func:`with_cpu_layout`); in-place kernels as they are."""

    def lay_out(kernel):
        @functools.wraps(kernel)
        def laid_out(*args, **kwargs):
            return with_cpu_layout(kernel(*args, **kwargs), args, scalars)

        return laid_out

    return {name: kernel if name.split(".")[0].endswith("_") and not name.startswith("__")
            else lay_out(kernel) for name, kernel in table.items()}


KERNELS = {
    "add.Tensor": _add,
    "add.Scalar": _add,
    "sub.Tensor": _sub,
    "sub.Scalar": _sub,
    "rsub.Tensor": _rsub,
    "rsub.Scalar": _rsub,
    "mul.Tensor": _mul,
    "mul.Scalar": _mul,
    "div.Tensor": _div,
    "div.Scalar": _div,
    # DDP's reducer writes each gradient into its bucket with mul.out.
    "add.out": _out(_add, "add"),
    "sub.out": _out(_sub, "sub"),
    "mul.out": _out(_mul, "mul"),
    "div.out": _out(_div, "div"),
    **_laid_out({
        "div.Tensor_mode": _div_mode,
        "div.Scalar_mode": _div_mode,
        "lerp.Scalar": _lerp,
        "lerp.Tensor": _lerp,
        "addcmul": _addcmul,
        "addcdiv": _addcdiv,
    }, scalars=True),
    "add_.Tensor": _fast_inplace(np.add, _add, "add_"),
    "sub_.Tensor": _fast_inplace(np.subtract, _sub, "sub_"),
    "mul_.Tensor": _fast_inplace(np.multiply, _mul, "mul_"),
    "div_.Tensor": _fast_inplace(np.true_divide, _div, "div_"),
    "lerp_.Scalar": _inplace(_lerp, "lerp_"),
    "lerp_.Tensor": _inplace(_lerp, "lerp_"),
    "addcmul_": _inplace(_addcmul, "addcmul_"),
    "conj_physical_": _inplace(_conj_physical, "conj_physical_"),
    "addcdiv_": _inplace(_addcdiv, "addcdiv_"),
    **_laid_out({
        "clamp": _clamp,
        "clamp.Tensor": _clamp_tensor,
        "clamp_min": _clamp_min,
        "clamp_min.Tensor": _clamp_min_tensor,
        "clamp_max": _clamp_max,
        "clamp_max.Tensor": _clamp_max_tensor,
    }, scalars=False),
    "fill_.Scalar": _fill,
    "fill_.Tensor": _fill,
    "zero_": _zero,
    **_laid_out(_unary_table(), scalars=False),
    **_laid_out(_binary_table(), scalars=True),
}
