"""Bessel-family special functions in float64: J0, J1, Y0, Y1, I0, I1 (scaled), K0, K1 (scaled),
Airy Ai and spherical j0.

Methods: power series where they do not cancel; the trapezoid rule on integral representations
whose integrands are periodic or even and analytic (exponentially convergent): J_n on [0, pi],
K_nu on [0, inf); Hankel asymptotic expansions, truncated at their smallest term, for large x.
"""

from __future__ import annotations

import math
from typing import Any

import halide as hl

from polyduct_halide.hlspecial import at_inf, back, isinf, isnan, w64

E = Any
K = hl.f64
INF, NAN = float("inf"), float("nan")
EULER = 0.5772156649015329
_TRAP_J = 72  # trapezoid points for J_n on [0, pi]: exact to rounding for |x| <= 40
_H = 0.25  # trapezoid step for K_nu; error ~ exp(-pi^2 / h)


def _hankel(x: E, n: int) -> tuple[E, E]:
    """Asymptotic P, Q of order n at x, summed until the terms stop shrinking."""
    mu = 4.0 * n * n
    p, q = K(1.0), K(0.0)
    term = K(1.0)
    live = K(1.0) > K(0.0)
    prev = K(INF)
    for k in range(1, 40):
        term = term * K((mu - (2 * k - 1) ** 2) / (k * 8.0)) / x
        live = live & (hl.abs(term) < prev)
        prev = hl.abs(term)
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2 == 0:
            p = p + hl.select(live, K(sign) * term, K(0.0))
        else:
            q = q + hl.select(live, K(sign) * term, K(0.0))
    return p, q


def _jy_large(x: E, n: int) -> tuple[E, E]:
    p, q = _hankel(x, n)
    c, s = hl.cos(x), hl.sin(x)
    r = K(math.sqrt(0.5))
    if n == 0:
        cos_chi, sin_chi = (c + s) * r, (s - c) * r
    else:
        cos_chi, sin_chi = (s - c) * r, -(c + s) * r
    amp = hl.sqrt(K(2.0 / math.pi) / x)
    return amp * (p * cos_chi - q * sin_chi), amp * (p * sin_chi + q * cos_chi)


def _j_trap(x: E, n: int) -> E:
    acc = K(0.0)
    for i in range(_TRAP_J + 1):
        theta = math.pi * i / _TRAP_J
        weight = 0.5 if i in (0, _TRAP_J) else 1.0
        acc = acc + K(weight) * hl.cos(K(n * theta) - x * K(math.sin(theta)))
    return acc / K(float(_TRAP_J))


def bessel_j64(x: E, n: int) -> E:
    """J_n(x), n in {0, 1}."""
    ax = hl.abs(x)
    big = _jy_large(hl.max(ax, K(40.0)), n)[0]
    out = hl.select(ax < K(40.0), _j_trap(ax, n), big)
    if n == 1:
        out = hl.select(x < K(0.0), -out, out)
    return hl.select(isinf(x), K(0.0), hl.select(isnan(x), x, out))


def _y_series(x: E, n: int) -> E:
    z = x * x * K(0.25)
    term, harmonic, acc = K(1.0), K(0.0), K(0.0)
    if n == 0:
        for k in range(1, 50):
            term = -term * z / K(float(k * k))
            harmonic = harmonic + K(1.0 / k)
            acc = acc - term * harmonic
        lead = (hl.log(x * K(0.5)) + K(EULER)) * bessel_j64(x, 0)
        return K(2.0 / math.pi) * (lead + acc)
    psi_sum = K(1.0 - 2 * EULER)  # psi(1) + psi(2)
    term = x * K(0.5)
    acc = psi_sum * term
    for k in range(1, 50):
        term = -term * z / K(float(k * (k + 1)))
        psi_sum = psi_sum + K(1.0 / k + 1.0 / (k + 1))
        acc = acc + psi_sum * term
    lead = K(2.0 / math.pi) * hl.log(x * K(0.5)) * bessel_j64(x, 1) - K(2.0 / math.pi) / x
    return lead - acc / K(math.pi)


def bessel_y64(x: E, n: int) -> E:
    """Y_n(x), n in {0, 1}; NaN for x < 0, -inf at 0."""
    big = _jy_large(hl.max(x, K(12.0)), n)[1]
    out = hl.select(x < K(12.0), _y_series(hl.max(x, K(1e-300)), n), big)
    out = hl.select(x == K(0.0), K(-INF), hl.select(x == K(INF), K(0.0), out))
    return hl.select((x < K(0.0)) | isnan(x), K(NAN), out)


def _i_series(x: E, n: int) -> E:
    z = x * x * K(0.25)
    term = K(1.0) if n == 0 else x * K(0.5)
    acc = term
    for k in range(1, 90):
        term = term * z / K(float(k * (k + n)))
        acc = acc + term
    return acc


def bessel_i64(x: E, n: int, scaled: bool) -> E:
    """I_n(x) (times exp(-|x|) when scaled), n in {0, 1}."""
    ax = hl.abs(x)
    mu = 4.0 * n * n
    term, acc = K(1.0), K(1.0)
    live, prev = K(1.0) > K(0.0), K(INF)
    big_x = hl.max(ax, K(30.0))
    for k in range(1, 40):
        term = -term * K((mu - (2 * k - 1) ** 2) / (k * 8.0)) / big_x
        live = live & (hl.abs(term) < prev)
        prev = hl.abs(term)
        acc = acc + hl.select(live, term, K(0.0))
    asym = acc / hl.sqrt(K(2.0 * math.pi) * big_x)
    small = _i_series(hl.min(ax, K(30.0)), n)
    out = hl.select(
        ax < K(30.0),
        small * (hl.exp(-ax) if scaled else K(1.0)),
        asym * (K(1.0) if scaled else hl.exp(big_x)),
    )
    if n == 1:
        out = hl.select(x < K(0.0), -out, out)
    inf_value = K(0.0) if scaled else K(INF)
    if n == 1 and not scaled:
        inf_value = hl.select(x < K(0.0), K(-INF), K(INF))
    return hl.select(isinf(x), inf_value, hl.select(isnan(x), x, out))


def _k_trap(x: E, nu: float, scaled: bool) -> E:
    acc = K(0.0)
    for i in range(41):
        t = _H * i
        weight = 0.5 if i == 0 else 1.0
        expo = -x * K(math.cosh(t) - (1.0 if scaled else 0.0))
        acc = acc + K(weight * math.cosh(nu * t)) * hl.exp(expo)
    return acc * K(_H)


def _k_series(x: E, n: int) -> E:
    z = x * x * K(0.25)
    log_term = hl.log(x * K(0.5))
    if n == 0:
        term, harmonic, acc = K(1.0), K(0.0), K(0.0)
        for k in range(1, 30):
            term = term * z / K(float(k * k))
            harmonic = harmonic + K(1.0 / k)
            acc = acc + term * harmonic
        return -(log_term + K(EULER)) * _i_series(x, 0) + acc
    psi_sum = K(1.0 - 2 * EULER)
    term = K(1.0)
    acc = psi_sum
    for k in range(1, 30):
        term = term * z / K(float(k * (k + 1)))
        psi_sum = psi_sum + K(1.0 / k + 1.0 / (k + 1))
        acc = acc + psi_sum * term
    return K(1.0) / x + log_term * _i_series(x, 1) - x * K(0.25) * acc


def bessel_k64(x: E, n: int, scaled: bool) -> E:
    """K_n(x) (times exp(x) when scaled), n in {0, 1}; NaN for x < 0, inf at 0."""
    small_x = hl.min(hl.max(x, K(1e-300)), K(0.25))
    small = _k_series(small_x, n) * (hl.exp(small_x) if scaled else K(1.0))
    big = _k_trap(hl.max(x, K(0.25)), float(n), scaled)
    out = hl.select(x < K(0.25), small, big)
    out = hl.select(x == K(0.0), K(INF), hl.select(x == K(INF), K(0.0), out))
    return hl.select((x < K(0.0)) | isnan(x), K(NAN), out)


def _airy_series(x: E) -> E:
    c1, c2 = 0.355028053887817239, 0.258819403792806798
    x3 = x * x * x
    f, g = K(1.0), x
    tf, tg = K(1.0), x
    for k in range(1, 80):
        tf = tf * x3 / K(float((3 * k - 1) * (3 * k)))
        tg = tg * x3 / K(float((3 * k) * (3 * k + 1)))
        f, g = f + tf, g + tg
    return K(c1) * f - K(c2) * g


def _airy_neg_large(x: E) -> E:
    ax = -x
    zeta = K(2.0 / 3.0) * ax * hl.sqrt(ax)
    u = [1.0]
    for k in range(1, 30):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k))
    p, q = K(0.0), K(0.0)
    live, prev, power = K(1.0) > K(0.0), K(INF), K(1.0)
    for k, coef in enumerate(u):
        term = K(coef) * power
        live = live & (hl.abs(term) < prev)
        prev = hl.abs(term)
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2 == 0:
            p = p + hl.select(live, K(sign) * term, K(0.0))
        else:
            q = q + hl.select(live, K(sign) * term, K(0.0))
        power = power / zeta
    phase = zeta + K(math.pi / 4)
    amp = K(1.0 / math.sqrt(math.pi)) / hl.sqrt(hl.sqrt(ax))
    return amp * (hl.sin(phase) * p - hl.cos(phase) * q)


def airy_ai64(x: E) -> E:
    """Airy Ai(x)."""
    pos = hl.max(x, K(2.0))
    zeta = K(2.0 / 3.0) * pos * hl.sqrt(pos)
    right = K(1.0 / math.pi) * hl.sqrt(pos / K(3.0)) * _k_trap(zeta, 1.0 / 3.0, False)
    mid = _airy_series(hl.clamp(x, K(-8.0), K(2.0)))
    left = _airy_neg_large(hl.min(x, K(-8.0)))
    out = hl.select(x > K(2.0), right, hl.select(x < K(-8.0), left, mid))
    return hl.select(isinf(x), K(0.0), out)


def spherical_j0_64(x: E) -> E:
    """sin(x) / x, 1 at 0."""
    out = hl.select(x == K(0.0), K(1.0), hl.sin(x) / x)
    return hl.select(isinf(x), K(0.0), out)


def bessel_j0(x: E) -> E:
    """Bessel J0."""
    return back(x, at_inf(w64(x), bessel_j64(w64(x), 0), NAN, NAN))


def bessel_j1(x: E) -> E:
    """Bessel J1."""
    return back(x, at_inf(w64(x), bessel_j64(w64(x), 1), NAN, NAN))


def bessel_y0(x: E) -> E:
    """Bessel Y0."""
    return back(x, at_inf(w64(x), bessel_y64(w64(x), 0), NAN, NAN))


def bessel_y1(x: E) -> E:
    """Bessel Y1."""
    return back(x, at_inf(w64(x), bessel_y64(w64(x), 1), NAN, NAN))


def i0(x: E) -> E:
    """Modified Bessel I0."""
    return back(x, at_inf(w64(x), bessel_i64(w64(x), 0, False), NAN, NAN))


def i1(x: E) -> E:
    """Modified Bessel I1."""
    return back(x, at_inf(w64(x), bessel_i64(w64(x), 1, False), NAN, NAN))


def i0e(x: E) -> E:
    """exp(-|x|) I0(x)."""
    return back(x, bessel_i64(w64(x), 0, True))


def i1e(x: E) -> E:
    """exp(-|x|) I1(x)."""
    return back(x, at_inf(w64(x), bessel_i64(w64(x), 1, True), 0.0, -0.0))


modified_bessel_i0, modified_bessel_i1 = i0, i1


def modified_bessel_k0(x: E) -> E:
    """Modified Bessel K0."""
    return back(x, bessel_k64(w64(x), 0, False))


def modified_bessel_k1(x: E) -> E:
    """Modified Bessel K1."""
    return back(x, bessel_k64(w64(x), 1, False))


def scaled_modified_bessel_k0(x: E) -> E:
    """exp(x) K0(x)."""
    return back(x, bessel_k64(w64(x), 0, True))


def scaled_modified_bessel_k1(x: E) -> E:
    """exp(x) K1(x)."""
    return back(x, bessel_k64(w64(x), 1, True))


def airy_ai(x: E) -> E:
    """Airy Ai."""
    return back(x, at_inf(w64(x), airy_ai64(w64(x)), NAN, NAN))


def spherical_bessel_j0(x: E) -> E:
    """Spherical Bessel j0."""
    return back(x, spherical_j0_64(w64(x)))


__all__ = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
]
