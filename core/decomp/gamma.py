"""Gamma family: lgamma, digamma, trigamma, polygamma and the Hurwitz zeta function.

lgamma: Stirling's series at z >= 10, an exact shift by ten (z..z+9) below that, Taylor series of
lgamma(1+e) around the zeros at 1 and 2 (relative accuracy there), reflection for x <= 0.
digamma and trigamma follow the algorithm of ATen's `calc_digamma` / `calc_trigamma` (shift to
x >= 10 resp. 6, asymptotic series, reflection) with the loops unrolled into `where` selections.
zeta follows Cephes: ten direct terms, then the Euler-Maclaurin tail with 12 Bernoulli terms.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import torch

from polyduct.decomp.base import (
    SpecialOps,
    V,
    addc,
    const,
    eq_c,
    gt_c,
    horner,
    is_f64,
    is_integer,
    is_odd,
    le_c,
    lt_c,
    mulc,
    nan_like,
    rdiv,
    sel,
    selc,
    sinpi,
)

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
EULER_GAMMA = 0.57721566490153286061


# memo of a pure function: not process state
@cache
def bernoulli(n: int) -> Fraction:
    """The Bernoulli number B_n (B_1 = +1/2 convention unused: only even n are asked for)."""
    row = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        row[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
    return row[0]


def _zeta_int(k: int) -> float:
    """Riemann zeta(k) for an integer k >= 2, by direct sum plus an Euler-Maclaurin tail."""
    n = 30
    total = math.fsum(j ** -float(k) for j in range(1, n))
    tail: float = n ** (1.0 - k) / (k - 1) + 0.5 * n ** -float(k)
    for j in range(1, 6):
        rising = math.prod(k + i for i in range(2 * j - 1))
        tail += (
            float(bernoulli(2 * j)) / math.factorial(2 * j) * rising * n ** -float(k + 2 * j - 1)
        )
    return total + tail


def _stirling_coeffs(terms: int) -> tuple[float, ...]:
    """B_2k / (2k (2k-1)) for k = terms..1, highest power of 1/z**2 first."""
    return tuple(float(bernoulli(2 * k) / (2 * k * (2 * k - 1))) for k in range(terms, 0, -1))


def _lgamma1p_coeffs(terms: int) -> tuple[float, ...]:
    """lgamma(1+e) / e = -gamma + sum_{k>=2} (-1)^k zeta(k)/k e^(k-1), highest power first."""
    coeffs = [(-1) ** k * _zeta_int(k) / k for k in range(terms, 1, -1)]
    return (*coeffs, -EULER_GAMMA)


STIRLING_F64 = _stirling_coeffs(8)
STIRLING_F32 = _stirling_coeffs(4)
LGAMMA1P_F64 = _lgamma1p_coeffs(28)
LGAMMA1P_F32 = _lgamma1p_coeffs(12)
# (2k)! / B_2k for k = 1..12: the Euler-Maclaurin divisors of Cephes' zeta.
ZETA_EM = tuple(float(math.factorial(2 * k) / bernoulli(2 * k)) for k in range(1, 13))
# Asymptotic digamma coefficients B_2k / (2k), k = 7..1 (Cephes' psi table).
DIGAMMA_ASYM = tuple(float(bernoulli(2 * k) / (2 * k)) for k in range(7, 0, -1))


def _stirling(ops: SpecialOps[V], z: V) -> V:
    """lgamma(z) for z >= 10: (z - 1/2) log z - z + log(2 pi)/2 + series in 1/z**2."""
    coeffs = STIRLING_F64 if is_f64(ops, z) else STIRLING_F32
    inv = rdiv(ops, 1.0, z)
    series = ops.mul(inv, horner(ops, ops.mul(inv, inv), coeffs))
    main = ops.sub(ops.mul(addc(ops, z, -0.5), ops.log(z)), z)
    return ops.add(addc(ops, main, HALF_LOG_2PI), series)


def _lgamma1p(ops: SpecialOps[V], e: V) -> V:
    """lgamma(1 + e) for |e| <= 1/4, relatively accurate at e = 0."""
    coeffs = LGAMMA1P_F64 if is_f64(ops, e) else LGAMMA1P_F32
    return ops.mul(e, horner(ops, e, coeffs))


def _lgamma_positive(ops: SpecialOps[V], z: V) -> V:
    """lgamma(z) for z > 0 (NaN passes through)."""
    small = lt_c(ops, z, 10.0)
    zs = sel(ops, small, z, const(ops, z, 1.0))
    prod = zs
    for k in range(1, 10):
        prod = ops.mul(prod, addc(ops, zs, float(k)))
    shifted = ops.sub(_stirling(ops, addc(ops, zs, 10.0)), ops.log(prod))
    out = sel(ops, small, shifted, _stirling(ops, sel(ops, small, const(ops, z, 10.0), z)))
    near1 = ops.abs(addc(ops, z, -1.0))
    near2 = addc(ops, z, -2.0)
    out = sel(
        ops, le_c(ops, ops.abs(near2), 0.25), ops.add(ops.log1p(near2), _lgamma1p(ops, near2)), out
    )
    # + 0: lgamma(1) is +0 (e * poly(e) at e = 0 is -0, the polynomial being negative there)
    return sel(ops, le_c(ops, near1, 0.25), addc(ops, _lgamma1p(ops, addc(ops, z, -1.0)), 0.0), out)


def lgamma(ops: SpecialOps[V], x: V) -> V:
    """log|Gamma(x)|; +inf at the poles 0, -1, -2, ... and at +-inf.

    Below float64 it is computed in float64: between the poles, the reflection for negative x
    subtracts two values near 1.25 to give one near 0 (lgamma(-2.4538) is 0.0049956), and in
    float32 it kept their 20 ulps of error, a thousand of the result's (halide seed 9203,
    program 4382)."""
    if not is_f64(ops, x):
        wide = _lgamma(ops, ops.to_dtype(x, torch.float64))
        return ops.to_dtype(wide, ops._special_dtype(x))
    return _lgamma(ops, x)


def _lgamma(ops: SpecialOps[V], x: V) -> V:
    reflect = le_c(ops, x, 0.0)
    z = sel(ops, reflect, ops.sub(const(ops, x, 1.0), x), x)
    pos = _lgamma_positive(ops, z)
    s = ops.abs(sinpi(ops, x))
    refl = ops.sub(ops.sub(const(ops, x, math.log(math.pi)), ops.log(s)), pos)
    # poles: log|sinpi| is -inf there, and past 2**53 (every float an integer) lgamma(1 - x) is
    # +inf too, inf - inf
    refl = selc(ops, is_integer(ops, x), math.inf, refl)
    out = sel(ops, reflect, refl, pos)
    return selc(ops, ops.isinf(x), math.inf, out)


def digamma(ops: SpecialOps[V], x: V) -> V:
    """psi(x) as ATen's calc_digamma: NaN at negative integers, -+inf at +-0."""
    neg = lt_c(ops, x, 0.0)
    z = sel(ops, neg, ops.sub(const(ops, x, 1.0), x), x)
    acc = const(ops, x, 0.0)
    for _ in range(10):
        low = lt_c(ops, z, 10.0)
        acc = sel(ops, low, ops.sub(acc, rdiv(ops, 1.0, z)), acc)
        z = sel(ops, low, addc(ops, z, 1.0), z)
    inv2 = rdiv(ops, 1.0, ops.mul(z, z))
    tail = ops.mul(inv2, horner(ops, inv2, DIGAMMA_ASYM))
    pos = ops.sub(ops.sub(ops.add(acc, ops.log(z)), rdiv(ops, 0.5, z)), tail)
    # tan has period pi: reduce to [-1/2, 1/2] exactly, so pi * frac is only rounded relatively.
    frac = ops.sub(x, ops.round(x))
    refl = ops.sub(pos, ops.truediv(const(ops, x, math.pi), ops.tan(mulc(ops, frac, math.pi))))
    out = sel(ops, neg, sel(ops, is_integer(ops, x), nan_like(ops, x), refl), pos)
    zero = eq_c(ops, x, 0.0)
    signed_inf = ops.copysign(const(ops, x, math.inf), ops.neg(x))
    return sel(ops, zero, signed_inf, out)


def trigamma(ops: SpecialOps[V], x: V) -> V:
    """psi'(x) exactly as ATen's calc_trigamma (six shifts, short asymptotic series)."""
    low = lt_c(ops, x, 0.5)
    s = ops.sin(mulc(ops, x, math.pi))
    acc = sel(
        ops, low, ops.neg(ops.truediv(const(ops, x, math.pi**2), ops.mul(s, s))), const(ops, x, 0.0)
    )
    z = sel(ops, low, ops.sub(const(ops, x, 1.0), x), x)
    for _ in range(6):
        acc = ops.add(acc, rdiv(ops, 1.0, ops.mul(z, z)))
        z = addc(ops, z, 1.0)
    ixx = rdiv(ops, 1.0, ops.mul(z, z))
    inner = ops.sub(const(ops, x, 1.0 / 30), mulc(ops, ixx, 1.0 / 42))
    inner = ops.sub(const(ops, x, 1.0 / 6), ops.mul(ixx, inner))
    poly = ops.add(addc(ops, rdiv(ops, 0.5, z), 1.0), ops.mul(ixx, inner))
    acc = ops.add(acc, ops.truediv(poly, z))
    return sel(ops, low, ops.neg(acc), acc)


ZETA_MORE_TERMS = 24  # polygamma of x down to -24 (OpInfo's samples reach -9)


def zeta(ops: SpecialOps[V], x: V, q: V) -> V:
    """Hurwitz zeta(x, q) as Cephes: inf at x == 1 and at q a non-positive integer; NaN at x < 1
    and at q < 0 with x not an integer. Cephes sums direct terms until q + k > 9 (at least ten),
    then an Euler-Maclaurin tail: here ten terms, and up to ZETA_MORE_TERMS more for negative q,
    so exact as Cephes for q > -ZETA_MORE_TERMS."""
    one = const(ops, x, 1.0)
    first = ops.pow(q, ops.neg(x))
    terms = first
    a = q
    for _ in range(9):
        a = addc(ops, a, 1.0)
        terms = ops.add(terms, ops.pow(a, ops.neg(x)))
    for _ in range(ZETA_MORE_TERMS):
        more = le_c(ops, a, 9.0)
        a = sel(ops, more, addc(ops, a, 1.0), a)
        terms = sel(ops, more, ops.add(terms, ops.pow(a, ops.neg(x))), terms)
    b = ops.pow(a, ops.neg(x))
    s = ops.sub(ops.add(terms, ops.truediv(ops.mul(b, a), ops.sub(x, one))), mulc(ops, b, 0.5))
    inv_w = ops.truediv(one, a)
    inv_w2 = ops.mul(inv_w, inv_w)
    t = ops.truediv(ops.mul(ops.mul(x, b), inv_w), const(ops, x, ZETA_EM[0]))
    s = ops.add(s, t)
    for i in range(1, len(ZETA_EM)):
        rising = ops.mul(addc(ops, x, 2.0 * i - 1), addc(ops, x, 2.0 * i))
        t = ops.mul(ops.mul(t, ops.mul(rising, inv_w2)), const(ops, x, ZETA_EM[i - 1] / ZETA_EM[i]))
        s = ops.add(s, t)
    big_q = ops.mul(
        ops.add(rdiv(ops, 1.0, ops.sub(x, one)), rdiv(ops, 0.5, q)), ops.pow(q, ops.sub(one, x))
    )
    s = sel(ops, gt_c(ops, q, 1e8), big_q, s)
    # ATen answers NaN for q = +inf, and for x = +inf with q > 1 (0 would be the limits).
    s = sel(ops, eq_c(ops, x, math.inf), sel(ops, gt_c(ops, q, 1.0), nan_like(ops, x), first), s)
    s = sel(ops, eq_c(ops, q, math.inf), nan_like(ops, x), s)
    nonpos = le_c(ops, q, 0.0)
    s = sel(ops, ops.and_(nonpos, ops.logical_not(is_integer(ops, x))), nan_like(ops, x), s)
    s = selc(ops, ops.and_(nonpos, is_integer(ops, q)), math.inf, s)
    s = sel(ops, lt_c(ops, x, 1.0), nan_like(ops, x), s)
    return selc(ops, eq_c(ops, x, 1.0), math.inf, s)


def polygamma(ops: SpecialOps[V], n: V, x: V) -> V:
    """psi^(n)(x) as ATen: digamma for n == 0, trigamma for n == 1, else
    (-1)^(n+1) n! zeta(n+1, x)."""
    nf = ops.to_dtype(n, ops._special_dtype(x))
    n1 = addc(ops, nf, 1.0)
    fact = ops.exp(ops.lgamma(n1))
    general = ops.mul(fact, ops.zeta(n1, x))
    general = sel(ops, is_odd(ops, nf), general, ops.neg(general))
    out = sel(ops, eq_c(ops, nf, 1.0), trigamma(ops, x), general)
    return sel(ops, eq_c(ops, nf, 0.0), ops.digamma(x), out)
