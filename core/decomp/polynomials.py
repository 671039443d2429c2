"""Orthogonal polynomials of an integer degree n given as a value: Chebyshev T/U/V/W (plain and
shifted), Hermite H/He, Laguerre L, Legendre P, with ATen's special cases.

n is truncated toward zero like ATen's cast to int64; n < 0 (and NaN) gives 0. The three-term
recurrence is unrolled up to `POLY_MAX_DEGREE` and the wanted degree picked with `where`. ATen's
trigonometric closed forms are used where ATen uses them (|x| < 1 and n above 6 or 8); above the
bound, Chebyshev polynomials use the hyperbolic closed forms for |x| > 1, and Hermite, Laguerre and
Legendre polynomials give NaN (outside the supported domain, see docs/special-functions.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from polyduct.decomp.base import (
    SpecialOps,
    V,
    addc,
    const,
    eq_c,
    gt_c,
    is_odd,
    lt_c,
    mulc,
    nan_like,
    sel,
    selc,
)

POLY_MAX_DEGREE = 16
Step = Callable[[SpecialOps[V], int, V, V, V], V]  # (ops, k, x, p_{k-1}, p_k) -> p_{k+1}


def _recurrence(ops: SpecialOps[V], x: V, n: V, p0: V, p1: V, step: Step[V]) -> V:
    """p_n for 0 <= n <= POLY_MAX_DEGREE (NaN above), from p0, p1 and the three-term step."""
    out = sel(ops, eq_c(ops, n, 0.0), p0, sel(ops, eq_c(ops, n, 1.0), p1, nan_like(ops, x)))
    prev, cur = p0, p1
    for k in range(1, POLY_MAX_DEGREE):
        prev, cur = cur, step(ops, k, x, prev, cur)
        out = sel(ops, eq_c(ops, n, float(k + 1)), cur, out)
    return out


def _degree(ops: SpecialOps[V], n: V, like: V) -> tuple[V, V]:
    """(trunc(n) in x's dtype, whether it is a valid degree: n >= 0 and not NaN)."""
    nt = ops.trunc(ops.to_dtype(n, ops._special_dtype(like)))
    return nt, ops.ge(nt, const(ops, nt, 0.0))


def _cheb_step(ops: SpecialOps[V], k: int, x: V, prev: V, cur: V) -> V:
    return ops.sub(ops.mul(ops.add(x, x), cur), prev)


def _parity(ops: SpecialOps[V], n: V, value: V) -> V:
    """(-1)^n * value."""
    return sel(ops, is_odd(ops, n), ops.neg(value), value)


def _hyperbolic(ops: SpecialOps[V], x: V, n: V, kind: str) -> V:
    """Chebyshev kind T/U/V/W at |x| > 1 from cosh/sinh of multiples of acosh|x|."""
    ax = ops.abs(x)
    theta = ops.acosh(ax)
    neg = lt_c(ops, x, 0.0)
    half = mulc(ops, theta, 0.5)
    nh = ops.mul(addc(ops, n, 0.5), theta)
    even_v = ops.truediv(ops.cosh(nh), ops.cosh(half))  # V_n(|x|), and (-1)^n W_n(-|x|)
    odd_w = ops.truediv(ops.sinh(nh), ops.sinh(half))  # W_n(|x|), and (-1)^n V_n(-|x|)
    if kind == "t":
        value = ops.cosh(ops.mul(n, theta))
    elif kind == "u":
        value = ops.truediv(ops.sinh(ops.mul(addc(ops, n, 1.0), theta)), ops.sinh(theta))
    elif kind == "v":
        value = sel(ops, neg, odd_w, even_v)
    else:
        value = sel(ops, neg, even_v, odd_w)
    return sel(ops, neg, _parity(ops, n, value), value)


def _trig(ops: SpecialOps[V], x: V, n: V, kind: str) -> V:
    """ATen's closed forms for |x| < 1, including its answers where the divisor vanishes."""
    theta = ops.acos(x)
    two_n1 = addc(ops, ops.add(n, n), 1.0)
    if kind == "t":
        return ops.cos(ops.mul(n, theta))
    if kind == "u":
        s = ops.sin(theta)
        n1 = addc(ops, n, 1.0)
        alt = ops.truediv(ops.mul(n1, ops.cos(ops.mul(n1, theta))), x)
        return sel(ops, eq_c(ops, s, 0.0), alt, ops.truediv(ops.sin(ops.mul(n1, theta)), s))
    half = mulc(ops, theta, 0.5)
    nh = ops.mul(addc(ops, n, 0.5), theta)
    if kind == "v":
        ok = ops.ne(ops.sin(half), const(ops, x, 1.0))
        alt = _parity(ops, n, two_n1)
        return sel(ops, ok, ops.truediv(ops.cos(nh), ops.cos(half)), alt)
    ok = ops.ne(ops.cos(half), const(ops, x, 1.0))
    alt = sel(ops, gt_c(ops, x, 0.0), two_n1, _parity(ops, n, const(ops, x, 1.0)))
    return sel(ops, ok, ops.truediv(ops.sin(nh), ops.sin(half)), alt)


def _at_one(ops: SpecialOps[V], x: V, n: V, kind: str) -> V:
    """ATen's values at |x| == 1."""
    one = const(ops, x, 1.0)
    two_n1 = addc(ops, ops.add(n, n), 1.0)
    pos = gt_c(ops, x, 0.0)
    if kind == "t":
        return sel(ops, pos, one, _parity(ops, n, one))
    if kind == "u":
        n1 = addc(ops, n, 1.0)
        return sel(ops, pos, n1, _parity(ops, n, n1))
    if kind == "v":
        return sel(ops, pos, one, _parity(ops, n, two_n1))
    return sel(ops, pos, two_n1, _parity(ops, n, one))


_P1_SHIFT = {"t": 0.0, "u": 0.0, "v": -1.0, "w": 1.0}


def chebyshev(ops: SpecialOps[V], x: V, n_in: V, kind: str, trig_above: float) -> V:
    """Chebyshev polynomial of `kind` (t, u, v or w) of degree n at x."""
    n, valid = _degree(ops, n_in, x)
    one = const(ops, x, 1.0)
    p1 = ops.add(ops.add(x, x) if kind != "t" else x, const(ops, x, _P1_SHIFT[kind]))
    out = _recurrence(ops, x, n, one, p1, _cheb_step)
    ax = ops.abs(x)
    outside = ops.and_(gt_c(ops, ax, 1.0), lt_c(ops, ax, math.inf))
    beyond = ops.and_(gt_c(ops, n, float(POLY_MAX_DEGREE)), outside)
    xh = sel(ops, outside, x, const(ops, x, 2.0))
    out = sel(ops, beyond, _hyperbolic(ops, xh, n, kind), out)
    inside = lt_c(ops, ax, 1.0)
    xt = sel(ops, inside, x, const(ops, x, 0.5))
    use_trig = ops.and_(gt_c(ops, n, trig_above), inside)
    out = sel(ops, use_trig, _trig(ops, xt, n, kind), out)
    out = sel(ops, eq_c(ops, ax, 1.0), _at_one(ops, x, n, kind), out)
    return selc(ops, ops.logical_not(valid), 0.0, out)


def shifted_chebyshev(ops: SpecialOps[V], x: V, n: V, kind: str, trig_above: float) -> V:
    """Shifted Chebyshev polynomial: the plain one at 2x - 1."""
    return chebyshev(ops, addc(ops, ops.add(x, x), -1.0), n, kind, trig_above)


def _hermite_h_step(ops: SpecialOps[V], k: int, x: V, prev: V, cur: V) -> V:
    return ops.sub(ops.mul(ops.add(x, x), cur), mulc(ops, prev, 2.0 * k))


def _hermite_he_step(ops: SpecialOps[V], k: int, x: V, prev: V, cur: V) -> V:
    return ops.sub(ops.mul(x, cur), mulc(ops, prev, float(k)))


def _laguerre_step(ops: SpecialOps[V], k: int, x: V, prev: V, cur: V) -> V:
    a = ops.mul(ops.sub(const(ops, x, 2.0 * k + 1.0), x), cur)
    return mulc(ops, ops.sub(a, mulc(ops, prev, float(k))), 1.0 / (k + 1))


def _legendre_step(ops: SpecialOps[V], k: int, x: V, prev: V, cur: V) -> V:
    a = ops.mul(mulc(ops, x, 2.0 * k + 1.0), cur)
    return ops.truediv(ops.sub(a, mulc(ops, prev, float(k))), const(ops, x, float(k + 1)))


def hermite_h(ops: SpecialOps[V], x: V, n_in: V) -> V:
    """Physicists' Hermite H_n(x)."""
    n, valid = _degree(ops, n_in, x)
    out = _recurrence(ops, x, n, const(ops, x, 1.0), ops.add(x, x), _hermite_h_step)
    return selc(ops, ops.logical_not(valid), 0.0, out)


def hermite_he(ops: SpecialOps[V], x: V, n_in: V) -> V:
    """Probabilists' Hermite He_n(x)."""
    n, valid = _degree(ops, n_in, x)
    out = _recurrence(ops, x, n, const(ops, x, 1.0), x, _hermite_he_step)
    return selc(ops, ops.logical_not(valid), 0.0, out)


def laguerre_l(ops: SpecialOps[V], x: V, n_in: V) -> V:
    """Laguerre L_n(x); 1 at x == 0 for every degree, as ATen."""
    n, valid = _degree(ops, n_in, x)
    one = const(ops, x, 1.0)
    out = _recurrence(ops, x, n, one, ops.sub(one, x), _laguerre_step)
    out = selc(ops, eq_c(ops, x, 0.0), 1.0, out)
    return selc(ops, ops.logical_not(valid), 0.0, out)


def legendre_p(ops: SpecialOps[V], x: V, n_in: V) -> V:
    """Legendre P_n(x); +-1 at |x| == 1 for every degree, as ATen."""
    n, valid = _degree(ops, n_in, x)
    one = const(ops, x, 1.0)
    out = _recurrence(ops, x, n, one, x, _legendre_step)
    at_one = sel(ops, gt_c(ops, x, 0.0), one, _parity(ops, n, one))
    out = sel(ops, eq_c(ops, ops.abs(x), 1.0), at_one, out)
    return selc(ops, ops.logical_not(valid), 0.0, out)
