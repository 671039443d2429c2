"""Expression helpers shared by the plugin: NaN/inf tests on the bits, and erf/erfc in float64.

The torch.special functions themselves come from `polyduct.decomp` (see `ops.py`); they build on
the op set, and through it on `erf`/`erfc` here. Series and continued fractions are unrolled to a
fixed number of terms (Halide expressions have no loops).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import halide as hl

E = Any
F64 = hl.Float(64)
_SQRT_PI = math.sqrt(math.pi)


def ex(x: E) -> hl.Expr:
    """`x` (Expr, Var, RVar, FuncRef, Param or number) as an `hl.Expr`."""
    return x if isinstance(x, hl.Expr) else hl.Expr(x)


def via64(fn: Callable[..., E], *xs: E) -> E:
    """fn evaluated in float64 (libm accuracy and special values) and rounded back."""
    x = ex(xs[0])
    if x.type().bits() == 64:
        return fn(*xs)
    return hl.cast(x.type(), fn(*(hl.cast(hl.Float(64), v) for v in xs)))


def c(x: E, value: float) -> E:
    """`value` as a constant of x's type."""
    return hl.cast(ex(x).type(), value)


def is_float(x: E) -> bool:
    """Whether x is a floating-point expression."""
    t = ex(x).type()
    return bool(t.is_float() or t.is_bfloat())


def _magnitude_bits(x: E) -> tuple[E, int]:
    """x's bits without the sign, as an integer, and the bit pattern of +inf in that width."""
    x = ex(x)
    width = x.type().bits()
    it = hl.Int(width)
    bits = hl.reinterpret(it, x) & hl.cast(it, (1 << (width - 1)) - 1)
    exponent = {16: 5, 32: 8, 64: 11}[width] if not x.type().is_bfloat() else 8
    return bits, ((1 << exponent) - 1) << (width - 1 - exponent)


def isnan(x: E) -> E:
    """x is NaN, decided on the bits.

    Halide's own `is_nan`/`is_inf`/`is_finite` rewrite their whole argument for strict float
    semantics and visit shared subexpressions once per use: on the deep DAGs of unrolled special
    functions that is exponential in time and memory. Integer tests on the bits visit nothing.
    """
    bits, inf = _magnitude_bits(x)
    return bits > hl.cast(bits.type(), inf)


def isinf(x: E) -> E:
    """x is +inf or -inf, decided on the bits (see `isnan`)."""
    bits, inf = _magnitude_bits(x)
    return bits == hl.cast(bits.type(), inf)


def isfinite(x: E) -> E:
    """x is neither inf nor NaN, decided on the bits (see `isnan`)."""
    bits, inf = _magnitude_bits(x)
    return bits < hl.cast(bits.type(), inf)


def w64(x: E) -> E:
    """x widened to float64."""
    return hl.cast(F64, x)


def back(x: E, value: E, *others: E) -> E:
    """float64 `value` rounded to x's type; NaN wherever x or one of `others` is NaN."""
    nan = isnan(ex(x))
    for other in others:
        nan = nan | isnan(ex(other))
    value = hl.select(nan, hl.f64(float("nan")), value)
    return hl.cast(ex(x).type(), value)


def exp_neg_sq(x: E) -> E:
    """exp(-x^2) of a float64 x without the rounding error of x^2 (which exp scales by x^2).

    x = hi + lo with hi holding 26 significant bits, so hi^2 is exact and the rest is small.
    |x| is capped at 30 (exp(-900) is 0), so infinities give 0; NaN is the caller's to handle.
    """
    x = hl.min(hl.abs(x), hl.f64(30.0))
    split = x * hl.f64(134217729.0)  # 2^27 + 1 (Dekker)
    hi = split - (split - x)
    lo = x - hi
    return hl.exp(-(hi * hi)) * hl.exp(-(lo * (hi + hi + lo)))


def _erf_series(x: E) -> E:
    # erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (1*3*...*(2n+1)); for |x| <= 1/2.
    x2 = x * x
    term, acc = x, x
    for n in range(1, 24):
        term = term * (2.0 * x2) / (2.0 * n + 1.0)
        acc = acc + term
    return acc * exp_neg_sq(x) * hl.f64(2.0 / _SQRT_PI)


def _erfc_cf(x: E) -> E:
    # sqrt(pi) exp(x^2) erfc(x) = 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), for x >= 2.5.
    tail = x
    for k in range(60, 0, -1):
        tail = x + (k / 2.0) / tail
    return hl.f64(1.0) / tail / hl.f64(_SQRT_PI)


# erfc on [0.5, 2.5) by Taylor series about 8 centres 0.25 apart (|h| <= 1/8): 1 - erf would
# lose up to 8 bits there, the continued fraction converges too slowly below 2.5.
_TAYLOR_LOW, _TAYLOR_STEP, _TAYLOR_CENTRES, _TAYLOR_TERMS = 0.5, 0.25, 8, 16


def _erfc_taylor_coeffs(x0: float) -> list[float]:
    """erfc^(n)(x0) / n! for n = 0..TERMS: (-1)^n 2/sqrt(pi) H_{n-1}(x0) exp(-x0^2) / n!."""
    hermite = [1.0, 2.0 * x0]
    for n in range(1, _TAYLOR_TERMS):
        hermite.append(2.0 * x0 * hermite[n] - 2.0 * n * hermite[n - 1])
    scale = 2.0 / _SQRT_PI * math.exp(-x0 * x0)
    out = [math.erfc(x0)]
    for n in range(1, _TAYLOR_TERMS + 1):
        out.append((-1) ** n * scale * hermite[n - 1] / math.factorial(n))
    return out


_TAYLOR = [
    _erfc_taylor_coeffs(_TAYLOR_LOW + _TAYLOR_STEP * (k + 0.5)) for k in range(_TAYLOR_CENTRES)
]


def _erfc_taylor(x: E) -> E:
    """erfc for x in [0.5, 2.5): Horner on the Taylor coefficients of the nearest centre."""
    k = hl.clamp(hl.cast(hl.Int(32), (x - _TAYLOR_LOW) / _TAYLOR_STEP), 0, _TAYLOR_CENTRES - 1)
    h = x - (hl.f64(_TAYLOR_LOW + 0.5 * _TAYLOR_STEP) + hl.cast(F64, k) * _TAYLOR_STEP)
    acc = hl.f64(0.0)
    for n in range(_TAYLOR_TERMS, -1, -1):
        acc = acc * h + hl.mux(k, [hl.f64(coeffs[n]) for coeffs in _TAYLOR])
    return acc


def _erfc_pos(x: E) -> E:
    """erfc for x >= 0.5, relative accuracy (Taylor below 2.5, continued fraction above)."""
    big = _erfc_cf(hl.max(x, 2.5)) * exp_neg_sq(hl.max(x, 2.5))
    return hl.select(x >= 2.5, big, _erfc_taylor(hl.min(x, 2.5)))


def erf64(x: E) -> E:
    """erf of a float64 expression: series below |x| = 1/2, 1 - erfc above."""
    ax = hl.abs(x)
    mag = hl.select(ax < 0.5, _erf_series(hl.min(ax, 0.5)), 1.0 - _erfc_pos(hl.max(ax, 0.5)))
    return hl.select(isnan(x), x, hl.select(x < 0.0, -mag, mag))


def erfc64(x: E) -> E:
    """erfc of a float64 expression (relative accuracy for x >= 0.5, 1 - erf below)."""
    out = hl.select(x >= 0.5, _erfc_pos(hl.max(x, 0.5)), 1.0 - erf64(hl.min(x, 0.5)))
    return hl.select(isnan(x), x, out)


def erf(x: E) -> E:
    """Error function."""
    return back(x, erf64(w64(x)))


def erfc(x: E) -> E:
    """Complementary error function."""
    return back(x, erfc64(w64(x)))


def signbit(x: E) -> E:
    """Sign bit of a float (true for -0.0 and negative NaN)."""
    x = ex(x)
    width = x.type().bits()
    return hl.reinterpret(hl.Int(width), x) < 0


def _wrapping(op: Any, a: E, b: E, zero: E | None) -> E:
    """`op(a, b)` on integers, wrapping as torch's do. Halide takes signed arithmetic of 32 bits
    or more not to overflow and rewrites by it (`max(x + x, 0)` of INT_MAX gave -2, `int64(-x)`
    of INT_MIN +2**31: halide seed 9103, programs 3273 and 3444). int32 is computed in int64 and
    narrowed (which wraps); int64 in uint64. Its operands first get the pipeline's opaque `zero`
    added: Halide folds `uint64(int64(f))` of a float f into `uint64(f)`, which saturates a
    negative f (program 4813)."""
    t = a.type()
    if not t.is_int() or t.bits() < 32:
        return op(a, b)
    if t.bits() == 32:
        wide = hl.Int(64)
        return hl.cast(t, op(hl.cast(wide, a), hl.cast(wide, b)))
    if zero is not None:
        a, b = a + hl.cast(t, zero), b + hl.cast(t, zero)
    u = hl.UInt(t.bits())
    return hl.reinterpret(t, op(hl.reinterpret(u, a), hl.reinterpret(u, b)))


def iadd(a: E, b: E, zero: E | None = None) -> E:
    """a + b of integers, wrapping (see `_wrapping`)."""
    return _wrapping(lambda x, y: x + y, ex(a), ex(b), zero)


def isub(a: E, b: E, zero: E | None = None) -> E:
    return _wrapping(lambda x, y: x - y, ex(a), ex(b), zero)


def imul(a: E, b: E, zero: E | None = None) -> E:
    return _wrapping(lambda x, y: x * y, ex(a), ex(b), zero)


def fabs(x: E) -> E:
    """|x|: floats clear the sign bit (Halide's abs of a float64 widened from -0.0f kept it:
    hypot(-0, -0) was -0, 1 / hypot -inf; halide seed 9103, program 4926)."""
    x = ex(x)
    if not is_float(x):
        return hl.abs(x)
    bits = x.type().bits()
    u = hl.UInt(bits)
    return hl.reinterpret(x.type(), hl.reinterpret(u, x) & ~(hl.cast(u, 1) << (bits - 1)))


def iabs(x: E, zero: E | None = None) -> E:
    """|x| of a signed integer, wrapping: abs(INT64_MIN) is INT64_MIN, as torch's. Halide's
    abs is unsigned, and cast back to the signed type it was taken to be non-negative: a
    copysign by +1 of its float then kept the sign (halide seed 9103, program 5408)."""
    x = ex(x)
    return hl.select(x < hl.cast(x.type(), 0), neg(x, zero), x)


def neg(x: E, zero: E | None = None) -> E:
    """-x; floats flip the sign bit (Halide's 0 - x would lose -0.0), integers wrap."""
    x = ex(x)
    if not is_float(x):
        return isub(hl.cast(x.type(), 0), x, zero)
    it = hl.Int(x.type().bits())
    return hl.reinterpret(
        x.type(), hl.reinterpret(it, x) ^ (hl.cast(it, 1) << (x.type().bits() - 1))
    )


def split64(x: E) -> tuple[E, E]:
    """x = hi + lo with hi the top 26 significant bits (mask, so no overflow)."""
    hi = hl.reinterpret(hl.Float(64), hl.reinterpret(hl.Int(64), x) & hl.i64(-(1 << 27)))
    return hi, x - hi


def two_sum(a: E, b: E) -> tuple[E, E]:
    """(a + b rounded, its rounding error) exactly (Knuth), in the order StrictFloat keeps."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def opaque(value: E, zero: E | None) -> E:
    """`value` with its bits XOR-ed with `zero`, a run-time zero the compiler cannot see
    (`runtime.opaque_zero`): the same value, about which neither Halide nor LLVM can reason.
    None: `value` as it is."""
    if zero is None:
        return value
    value = ex(value)
    bits = hl.UInt(value.type().bits())
    return hl.reinterpret(value.type(), hl.reinterpret(bits, value) ^ hl.cast(bits, zero))


def alone(product: E, nofuse: E | None) -> E:
    """`product` as a value LLVM cannot fuse into a following add or subtract.

    Error-free transformations need each product rounded on its own, but LLVM's NVPTX backend
    contracts `a*b + c` into `fma.rn.f64` whatever the target's StrictFloat says. Made `opaque`
    with `nofuse` (`runtime.nofuse`), the product reaches the add through an integer operation,
    which no FMA pattern matches. None: the product as it is (host targets honour StrictFloat;
    their code stays as it was).
    """
    return opaque(product, nofuse)


def div(a: E, b: E, zero: E | None) -> E:
    """Float `a / b`, IEEE also for a divisor that folds to a constant zero (x / 0.0, the
    variance of one element): Halide refuses to compile a division by a constant zero, so the
    divisor is made `opaque` with `zero` (`runtime.opaque_zero`)."""
    return ex(a) / opaque(b, zero)


__all__ = [
    "alone",
    "c",
    "div",
    "erf",
    "erfc",
    "ex",
    "is_float",
    "isfinite",
    "isinf",
    "isnan",
    "neg",
    "opaque",
    "signbit",
    "split64",
    "two_sum",
    "via64",
]
