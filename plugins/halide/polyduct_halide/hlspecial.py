"""Special functions as Halide expressions, evaluated in float64 and rounded to the input type.

Series and continued fractions are unrolled to a fixed number of terms (Halide expressions have no
loops); term counts are chosen for full float64 accuracy over the ranges each branch serves.
"""

from __future__ import annotations

import math
from typing import Any

import halide as hl

E = Any
F64 = hl.Float(64)
_SQRT_PI = math.sqrt(math.pi)


def ex(x: E) -> hl.Expr:
    """`x` (Expr, Var, RVar, FuncRef, Param or number) as an `hl.Expr`."""
    return x if isinstance(x, hl.Expr) else hl.Expr(x)


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


def at_inf(x: E, value: E, pos: float, neg: float) -> E:
    """`value`, with torch's results `pos` at +inf and `neg` at -inf."""
    out = hl.select(x == hl.f64(float("inf")), hl.f64(pos), value)
    return hl.select(x == hl.f64(float("-inf")), hl.f64(neg), out)


def _erf_series(x: E) -> E:
    # erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (1*3*...*(2n+1)); positive terms only.
    x2 = x * x
    term, acc = x, x
    for n in range(1, 90):
        term = term * (2.0 * x2) / (2.0 * n + 1.0)
        acc = acc + term
    return acc * hl.exp(-x2) * hl.f64(2.0 / _SQRT_PI)


def _erfc_cf(x: E) -> E:
    # sqrt(pi) exp(x^2) erfc(x) = 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), for x >= 2.
    tail = x
    for k in range(120, 0, -1):
        tail = x + (k / 2.0) / tail
    return hl.f64(1.0) / tail / hl.f64(_SQRT_PI)


def erf64(x: E) -> E:
    """erf of a float64 expression."""
    ax = hl.abs(x)
    small = _erf_series(hl.min(ax, 3.0))
    big = 1.0 - _erfc_cf(hl.max(ax, 3.0)) * hl.exp(-ax * ax)
    mag = hl.select(ax < 3.0, small, big)
    return hl.select(isnan(x), x, hl.select(x < 0.0, -mag, mag))


def erfc64(x: E) -> E:
    """erfc of a float64 expression."""
    big = _erfc_cf(hl.max(x, 2.0)) * hl.exp(-x * x)
    return hl.select(x >= 2.0, big, 1.0 - erf64(hl.min(x, 2.0)))


def erfcx64(x: E) -> E:
    """exp(x^2) erfc(x) of a float64 expression."""
    big = _erfc_cf(hl.max(x, 2.0))
    mid = hl.exp(x * x) * erfc64(hl.min(x, 2.0))
    out = hl.select(x >= 2.0, big, mid)
    return hl.select(isnan(x), x, hl.select(x == float("inf"), hl.f64(0.0), out))


def erf(x: E) -> E:
    """Error function."""
    return back(x, erf64(w64(x)))


def erfc(x: E) -> E:
    """Complementary error function."""
    return back(x, erfc64(w64(x)))


def erfcx(x: E) -> E:
    """Scaled complementary error function."""
    return back(x, erfcx64(w64(x)))


__all__ = ["c", "erf", "erfc", "erfcx", "ex", "is_float"]
