"""cos and sin of x + k pi/4 (k odd) for large x, with Cody-Waite argument reduction.

The oscillating asymptotic forms of Bessel J/Y and Airy Ai need cos(x - pi/4) and the like for
large x. Computing x - pi/4 first rounds away the phase (an error of ulp(x)); instead x is reduced
exactly by multiples of pi/2 split into three parts (the first two short enough that q * part is
exact), and the odd multiple of pi/4 is added through the exact identities
cos(y + pi/4) = (cos y - sin y)/sqrt 2, sin(y + pi/4) = (sin y + cos y)/sqrt 2.
Beyond the range where q * part is exact (|x| > 2^20 pi/2 in float64, 2^12 pi/2 in float32), x is
left to the backend's own cos/sin reduction.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

from polyduct.decomp.base import SpecialOps, V, addc, const, is_f64, lt_c, mulc, sel

_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628")


def _split_half_pi(bits: int) -> tuple[float, float, float]:
    """pi/2 as p1 + p2 + p3: p1 and p2 with `bits` significant bits, p3 the rounded rest."""
    with localcontext() as ctx:
        ctx.prec = 80
        rest = Fraction(_PI / 2)
    parts = []
    for _ in range(2):
        exp = math.frexp(float(rest))[1] - bits
        part = Fraction(math.floor(rest / Fraction(2) ** exp)) * Fraction(2) ** exp
        parts.append(float(part))
        rest -= part
    return parts[0], parts[1], float(rest)


HALF_PI_F64 = _split_half_pi(33)
HALF_PI_F32 = _split_half_pi(12)
EXACT_Q_F64 = 2.0**20
EXACT_Q_F32 = 2.0**12


def reduce_half_pi(ops: SpecialOps[V], x: V) -> tuple[V, V]:
    """(y, q) with x = y + q pi/2, q a whole number, |y| <= about pi/4 (y = x, q = 0 beyond
    the exact range, where the backend's cos/sin reduce x)."""
    f64 = is_f64(ops, x)
    p1, p2, p3 = HALF_PI_F64 if f64 else HALF_PI_F32
    q = ops.round(mulc(ops, x, 2.0 / math.pi))
    exact = lt_c(ops, ops.abs(q), EXACT_Q_F64 if f64 else EXACT_Q_F32)
    q = sel(ops, exact, q, const(ops, x, 0.0))
    y = ops.sub(x, mulc(ops, q, p1))
    y = ops.sub(y, mulc(ops, q, p2))
    y = ops.sub(y, mulc(ops, q, p3))
    return y, q


def _rotate(ops: SpecialOps[V], c: V, s: V, m: V) -> tuple[V, V]:
    """(cos, sin) of a + m pi/2 from c = cos a, s = sin a, m a whole number."""
    m = ops.sub(m, mulc(ops, ops.floor(mulc(ops, m, 0.25)), 4.0))  # m mod 4 in {0, 1, 2, 3}
    half = ops.floor(mulc(ops, m, 0.5))
    odd = ops.ne(ops.sub(m, ops.add(half, half)), const(ops, m, 0.0))
    cos = sel(ops, odd, ops.neg(s), c)
    sin = sel(ops, odd, c, s)
    flip = ops.ge(m, const(ops, m, 2.0))
    return sel(ops, flip, ops.neg(cos), cos), sel(ops, flip, ops.neg(sin), sin)


def cos_sin_odd_quarter(ops: SpecialOps[V], x: V, k: int) -> tuple[V, V]:
    """(cos, sin) of x + k pi/4 for an odd integer k; x finite (NaN for +-inf and NaN)."""
    if k % 2 != 1:
        raise ValueError(f"cos_sin_odd_quarter: k must be odd, got {k}")
    y, q = reduce_half_pi(ops, x)
    c, s = ops.cos(y), ops.sin(y)
    r = 1.0 / math.sqrt(2.0)
    c4 = mulc(ops, ops.sub(c, s), r)  # cos(y + pi/4)
    s4 = mulc(ops, ops.add(s, c), r)  # sin(y + pi/4)
    return _rotate(ops, c4, s4, addc(ops, q, float((k - 1) // 2)))
