"""float32 sin and cos as vectorisable Halide expressions (CPU targets; others keep libm).

Halide's float32 `sin`/`cos` are one scalar libm call per element. Here the float32 argument is
widened to float64 (exact) and reduced by pi/2 with vector float64 arithmetic only, for every
float32, the largest included:

* |x| (2/pi) mod 4 is summed from the products |x| c_i, where the c_i are 2/pi cut into pieces
  of 29 significant bits: |x| has 24, so each product is exact in float64. A product reduced
  mod 4 (p - 4 floor(p / 4)) stays exact, and one of 2^55 or more is a multiple of 8, 0 mod 4.
  The reduced products are added as a double-double (two-sum), so the fraction left after the
  nearest integer k is known to about 2^-100 absolute, far below the smallest fraction a
  float32 argument leaves (about 2^-30 of pi/2: the float32 nearest a multiple of pi/2).
* r = fraction * pi/2 in [-pi/4, pi/4]; sin r and cos r by their Taylor series to r^15 and r^16
  (truncation below 5e-17); k mod 4 picks sin r, cos r or their negatives.

The float64 value is rounded once to float32. On 1.34 million arguments (random bit patterns
over the whole float32 range, a dense grid on [-50, 50], normal samples, special values) every
result equals torch's float64 sin/cos rounded to float32. NaN gives NaN, and so does +-inf
without a test of its own (inf - 4 floor(inf / 4) is NaN in the reduction); sin keeps the sign
of -0. The order of the sums matters, so this path needs StrictFloat (the backend's
default); without it, and on GPU targets and for float64, libm through float64 (`via64`) runs.
"""

from __future__ import annotations

import math
from typing import Any

import halide as hl

from polyduct_halide.hlexp import _float32, _horner, fast
from polyduct_halide.hlspecial import ex, isinf, isnan, two_sum, via64

E = Any
F64 = hl.Float(64)
# 2/pi in pieces of at most 29 significant bits, largest first; what they leave out is below
# 7e-72, so |x| times it stays below 3e-33 for every float32 |x|.
_TWO_OVER_PI = [
    float.fromhex("0x1.45f306dp-1"),
    float.fromhex("0x1.9391054p-30"),
    float.fromhex("0x1.4fe13abp-59"),
    float.fromhex("0x1.d1f534dp-88"),
    float.fromhex("0x1.b81b6c5p-117"),
    float.fromhex("0x1.5993c43p-148"),
    float.fromhex("0x1.2083fcap-177"),
    float.fromhex("0x1.63abdebp-208"),
]
# The products with the first _EXACT pieces can reach 4 and beyond: they are reduced mod 4 and
# added exactly. The later pieces are below 2^-147, so |x| times each is below 2^-19 and is
# simply added to the low word (its rounding error is below 2^-72).
_EXACT = 5
# sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2): Taylor coefficients, highest first.
_SIN = [(-1) ** n / math.factorial(2 * n + 1) for n in range(7, 0, -1)]
_COS = [(-1) ** n / math.factorial(2 * n) for n in range(8, 1, -1)]


def _mod4(v: E) -> E:
    """`v` mod 4, exact for float64 `v` >= 0 (and 0 from 2^55 on, where `v` is a multiple of 8)."""
    return v - hl.f64(4.0) * hl.floor(v * hl.f64(0.25))


def _reduce(x: E) -> tuple[E, E]:
    """(r, k mod 4) with |x| = (k + r / (pi/2)) pi/2 and |r| <= pi/4, in float64."""
    ax = hl.abs(hl.cast(F64, x))
    hi, lo = hl.f64(0.0), hl.f64(0.0)
    for piece in _TWO_OVER_PI[:_EXACT]:
        hi, err = two_sum(hi, _mod4(ax * hl.f64(piece)))
        lo = lo + err
    for piece in _TWO_OVER_PI[_EXACT:]:  # below 2^-19 for every float32: no mod, no two-sum
        lo = lo + ax * hl.f64(piece)
    k = hl.floor(hi + hl.f64(0.5))
    fraction = (hi - k) + lo
    return fraction * hl.f64(math.pi / 2), _mod4(k)


def _sin_cos(r: E) -> tuple[E, E]:
    r2 = r * r
    sin_r = r + r * r2 * _horner(_SIN, r2)
    cos_r = hl.f64(1.0) - hl.f64(0.5) * r2 + r2 * r2 * _horner(_COS, r2)
    return sin_r, cos_r


def _quadrant(q: E, values: tuple[E, E, E, E]) -> E:
    return hl.select(
        q == hl.f64(0.0), values[0], q == hl.f64(1.0), values[1],
        q == hl.f64(2.0), values[2], values[3],
    )


def _odd(value: E, x: E) -> E:
    """sin(x) from `value` = sin(|x|): negated by the sign bit of `x`, so -0 stays -0. sin(-inf)
    is the NaN that sin(inf) is, unflipped: the processor's default NaN, as eager's (its sign
    bit shows through `copysign`; halide seed 9403, program 3745)."""
    flip = hl.reinterpret(hl.UInt(32), ex(x)) & hl.u32(0x80000000)
    odd = hl.reinterpret(hl.Float(32), hl.reinterpret(hl.UInt(32), value) ^ flip)
    return hl.select(isnan(ex(x)), ex(x), isinf(ex(x)), value, odd)


def _vector(x: E, target: hl.Target) -> bool:
    # The reduction's sums cancel exactly only if Halide keeps their order (StrictFloat); a
    # reassociated p - 4 floor(p / 4) + ... loses every bit of a large argument's fraction.
    return fast(x, target) and target.has_feature(hl.TargetFeature.StrictFloat)


def sin(x: E, target: hl.Target) -> E:
    """Sine (odd: -0 stays -0)."""
    if not _vector(x, target):
        return via64(hl.sin, x)
    r, q = _reduce(x)
    s, c = _sin_cos(r)
    return _odd(_float32(x, _quadrant(q, (s, c, -s, -c))), x)


def cos(x: E, target: hl.Target) -> E:
    """Cosine."""
    if not _vector(x, target):
        return via64(hl.cos, x)
    r, q = _reduce(x)
    s, c = _sin_cos(r)
    return _float32(x, _quadrant(q, (c, -s, -c, s)))
