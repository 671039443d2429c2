"""Airy Ai from the Chebyshev tables of `polyduct.decomp.airy_tables` (generated from mpmath).

Three branches, selected with `where`:
* x in [-8, 2]: Ai itself, a Chebyshev series in t = (x + 3) / 5.
* x > 2: Ai(x) = F / (2 sqrt(pi) x^(1/4) e^zeta), zeta = (2/3) x^(3/2), F a series in
  t = 2 zeta(2) / zeta - 1 (F tends to 1 as x grows). e^-zeta underflows to 0 for large x.
* x < -8: with z = -x, Ai(-z) = (P sin chi - Q cos chi) / (sqrt(pi) z^(1/4)),
  chi = zeta + pi/4, u = zeta(8) / zeta; P and Q/u are series in t = 2 u^2 - 1.
  sin/cos chi use the exact reduction of `polyduct.decomp.phase`.
Edges follow ATen: NaN at +-inf and NaN.
"""

from __future__ import annotations

import math

from polyduct.decomp import airy_tables as tab
from polyduct.decomp.base import (
    SpecialOps,
    V,
    addc,
    chebyshev,
    const,
    le_c,
    lt_c,
    mulc,
    nan_like,
    rdiv,
    sel,
)
from polyduct.decomp.phase import cos_sin_odd_quarter

MID_LOW, MID_HIGH = -8.0, 2.0
ZETA_HIGH = 2.0 / 3.0 * MID_HIGH**1.5  # zeta at x = 2
ZETA_LOW = 2.0 / 3.0 * (-MID_LOW) ** 1.5  # zeta at z = 8
SQRT_PI = math.sqrt(math.pi)


def _zeta(ops: SpecialOps[V], z: V) -> V:
    """(2/3) z^(3/2) for z >= 0."""
    return mulc(ops, ops.mul(z, ops.sqrt(z)), 2.0 / 3.0)


def _quarter_root(ops: SpecialOps[V], z: V) -> V:
    """z^(1/4) for z >= 0."""
    return ops.sqrt(ops.sqrt(z))


def _mid(ops: SpecialOps[V], x: V) -> V:
    """Ai(x) for x in [-8, 2]."""
    half = (MID_HIGH - MID_LOW) / 2
    center = (MID_HIGH + MID_LOW) / 2
    return chebyshev(ops, mulc(ops, addc(ops, x, -center), 1.0 / half), tab.AI_MID)


def _positive(ops: SpecialOps[V], x: V) -> V:
    """Ai(x) for x >= 2 (0 once e^zeta overflows)."""
    zeta = _zeta(ops, x)
    f = chebyshev(ops, addc(ops, rdiv(ops, 2.0 * ZETA_HIGH, zeta), -1.0), tab.AI_POS)
    scale = ops.mul(mulc(ops, _quarter_root(ops, x), 2.0 * SQRT_PI), ops.exp(zeta))
    return ops.truediv(f, scale)


def _negative(ops: SpecialOps[V], x: V) -> V:
    """Ai(x) for x <= -8."""
    z = ops.neg(x)
    zeta = _zeta(ops, z)
    u = rdiv(ops, ZETA_LOW, zeta)
    t = addc(ops, mulc(ops, ops.mul(u, u), 2.0), -1.0)
    p = chebyshev(ops, t, tab.AI_NEG_P)
    q = ops.mul(u, chebyshev(ops, t, tab.AI_NEG_Q))
    cos, sin = cos_sin_odd_quarter(ops, zeta, 1)
    wave = ops.sub(ops.mul(p, sin), ops.mul(q, cos))
    return ops.truediv(wave, mulc(ops, _quarter_root(ops, z), SQRT_PI))


def airy_ai(ops: SpecialOps[V], x: V) -> V:
    """Ai(x); NaN at +-inf (as ATen)."""
    low = lt_c(ops, x, MID_LOW)
    mid = le_c(ops, x, MID_HIGH)
    x_mid = sel(ops, ops.and_(mid, ops.logical_not(low)), x, const(ops, x, 0.0))
    x_low = sel(ops, low, x, const(ops, x, MID_LOW))
    x_high = sel(ops, mid, const(ops, x, MID_HIGH), x)
    out = sel(ops, mid, _mid(ops, x_mid), _positive(ops, x_high))
    out = sel(ops, low, _negative(ops, x_low), out)
    return sel(ops, ops.isinf(x), nan_like(ops, x), out)
