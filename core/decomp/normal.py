"""Error-function and normal-distribution family: erfcx, erfinv, ndtr, ndtri, log_ndtr, and the
spherical Bessel j0.

erfinv and ndtri share one solver: an initial guess (Giles' single-precision erfinv polynomial, or
the asymptotic tail t ~ sqrt(-log c - log(t sqrt(pi)))) refined by three Newton steps, on
erf(t) - a for a <= 1/2 and on log(erfc(t)) - log(c) (through erfcx) in the tails, so that tail
probabilities keep full relative accuracy.
"""

from __future__ import annotations

import math

from polyduct.decomp.base import (
    SpecialOps,
    V,
    addc,
    const,
    eq_c,
    gt_c,
    horner,
    is_f64,
    le_c,
    lt_c,
    mulc,
    nan_like,
    rdiv,
    sel,
    selc,
)

SQRT_PI = math.sqrt(math.pi)
SQRT1_2 = math.sqrt(0.5)
# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision.
GILES_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
GILES_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip


def _double_factorial_odd(k: int) -> float:
    return float(math.prod(range(1, 2 * k, 2)))


def _erfcx_asym_coeffs(terms: int) -> tuple[float, ...]:
    """(-1)^k (2k-1)!! for k = terms..0: erfcx(x) ~ sum_k c_k (1/(2x^2))^k / (x sqrt(pi))."""
    return tuple((-1) ** k * _double_factorial_odd(k) for k in range(terms, -1, -1))


ERFCX_ASYM_F64 = _erfcx_asym_coeffs(14)
ERFCX_ASYM_F32 = _erfcx_asym_coeffs(9)


def erfcx(ops: SpecialOps[V], x: V) -> V:
    """exp(x^2) erfc(x): direct below a threshold (12 in float64, 5 in float32), asymptotic above."""
    f64 = is_f64(ops, x)
    threshold = 12.0 if f64 else 5.0
    big = gt_c(ops, x, threshold)
    xs = sel(ops, big, const(ops, x, 0.0), x)
    direct = ops.mul(ops.exp(ops.mul(xs, xs)), ops.erfc(xs))
    xb = sel(ops, big, x, const(ops, x, threshold + 1.0))
    u = rdiv(ops, 0.5, ops.mul(xb, xb))
    series = horner(ops, u, ERFCX_ASYM_F64 if f64 else ERFCX_ASYM_F32)
    asym = ops.truediv(series, mulc(ops, xb, SQRT_PI))
    return sel(ops, big, asym, direct)


def _initial_guess(ops: SpecialOps[V], a: V, c: V) -> V:
    """Approximate t >= 0 with erf(t) = a, c = 1 - a (float32-accurate except in deep tails)."""
    w = ops.neg(ops.log(ops.mul(c, ops.sub(const(ops, c, 2.0), c))))
    central = horner(ops, addc(ops, w, -2.5), GILES_CENTRAL)
    tail = horner(ops, addc(ops, ops.sqrt(w), -3.0), GILES_TAIL)
    giles = ops.mul(sel(ops, lt_c(ops, w, 5.0), central, tail), a)
    big_l = ops.neg(ops.log(c))
    t = ops.sqrt(big_l)
    for _ in range(3):
        # t^2 = L - log(t sqrt(pi)) + log(1 - 1/(2 t^2)): erfc's asymptotic series, two terms.
        corr = ops.log1p(ops.neg(rdiv(ops, 0.5, ops.mul(t, t))))
        t = ops.sqrt(ops.add(ops.sub(big_l, ops.log(mulc(ops, t, SQRT_PI))), corr))
    return sel(ops, gt_c(ops, w, 10.0), t, giles)


def _newton(ops: SpecialOps[V], t: V, a: V, c: V, log_c: V) -> V:
    """One Newton step towards erf(t) = a (a <= 1/2) or log erfc(t) = log c (tails)."""
    half_sqrt_pi = const(ops, t, 0.5 * SQRT_PI)
    central = ops.mul(ops.mul(ops.sub(ops.erf(t), a), half_sqrt_pi), ops.exp(ops.mul(t, t)))
    scaled = ops.erfcx(t)
    g = ops.sub(ops.sub(ops.log(scaled), ops.mul(t, t)), log_c)
    tail = ops.neg(ops.mul(ops.mul(g, half_sqrt_pi), scaled))
    return ops.sub(t, sel(ops, le_c(ops, a, 0.5), central, tail))


def _solve(ops: SpecialOps[V], a: V, c: V) -> V:
    """t >= 0 with erf(t) = a, where c = 1 - a is given accurately; 0 <= a < 1."""
    t = _initial_guess(ops, a, c)
    log_c = ops.log(c)
    for _ in range(3):
        t = _newton(ops, t, a, c, log_c)
    return t


def erfinv(ops: SpecialOps[V], y: V) -> V:
    """Inverse error function: +-inf at +-1, NaN outside [-1, 1]."""
    a = ops.abs(y)
    inside = lt_c(ops, a, 1.0)
    a_in = sel(ops, inside, a, const(ops, y, 0.0))
    t = _solve(ops, a_in, ops.sub(const(ops, y, 1.0), a_in))
    out = sel(
        ops, inside, t, sel(ops, eq_c(ops, a, 1.0), const(ops, y, math.inf), nan_like(ops, y))
    )
    return ops.copysign(out, y)


def ndtri(ops: SpecialOps[V], p: V) -> V:
    """Inverse of the standard normal CDF: -inf at 0, +inf at 1, NaN outside [0, 1]."""
    lower = lt_c(ops, p, 0.5)
    q = sel(ops, lower, p, ops.sub(const(ops, p, 1.0), p))
    inside = gt_c(ops, q, 0.0)
    c = mulc(ops, sel(ops, inside, q, const(ops, p, 0.5)), 2.0)
    z = mulc(ops, _solve(ops, ops.sub(const(ops, p, 1.0), c), c), math.sqrt(2.0))
    z = sel(ops, inside, z, const(ops, p, math.inf))
    z = sel(ops, lower, ops.neg(z), z)
    in_range = ops.and_(ops.ge(p, const(ops, p, 0.0)), le_c(ops, p, 1.0))  # False for NaN
    return sel(ops, in_range, z, nan_like(ops, p))


def ndtr(ops: SpecialOps[V], x: V) -> V:
    """Standard normal CDF as erfc(-x / sqrt(2)) / 2: relative accuracy in the lower tail too
    (ATen's (1 + erf(x / sqrt(2))) / 2 cancels there; docs/conformance.md, oracle audit)."""
    return mulc(ops, ops.erfc(mulc(ops, x, -SQRT1_2)), 0.5)


def log_ndtr(ops: SpecialOps[V], x: V) -> V:
    """log of the normal CDF as ATen: log(erfcx(-t)/2) - t^2 below x = -1, else log1p(-erfc(t)/2)."""
    t = mulc(ops, x, SQRT1_2)
    low = lt_c(ops, x, -1.0)
    tl = sel(ops, low, t, const(ops, x, -1.0))
    lower = ops.sub(ops.log(mulc(ops, ops.erfcx(ops.neg(tl)), 0.5)), ops.mul(tl, tl))
    upper = ops.log1p(mulc(ops, ops.erfc(t), -0.5))
    return sel(ops, low, lower, upper)


# 1/(2k+1)! with alternating signs for k = 6..0: ATen's small-argument series of sin(x)/x.
_SINC_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(6, -1, -1))


def spherical_bessel_j0(ops: SpecialOps[V], x: V) -> V:
    """sin(x)/x as ATen: a Taylor polynomial below |x| = 1/2, 0 at +-inf."""
    x2 = ops.mul(x, x)
    small = horner(ops, x2, _SINC_SERIES)
    direct = ops.truediv(ops.sin(x), x)
    out = sel(ops, lt_c(ops, ops.abs(x), 0.5), small, direct)
    return selc(ops, ops.isinf(x), 0.0, out)
