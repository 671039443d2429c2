"""Gamma-family special functions in float64: lgamma, digamma, polygamma, zeta, incomplete gamma,
erfinv, ndtr, ndtri, log_ndtr. Loops are unrolled to fixed counts with `select` as the guard.
"""

from __future__ import annotations

import math
from typing import Any

import halide as hl

from polyduct_halide.hlspecial import (
    at_inf,
    back,
    erf64,
    erfc64,
    erfcx64,
    ex,
    isinf,
    isnan,
    w64,
)

E = Any
K = hl.f64
INF, NAN = float("inf"), float("nan")
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)
_ZETA_A = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
_MACHEP = 1.11022302462515654042e-16


def _parity_sign(n: E) -> E:
    return hl.select(n - K(2.0) * hl.floor(n * K(0.5)) == K(0.0), K(1.0), K(-1.0))


def sinpi(x: E) -> E:
    """sin(pi x) with exact argument reduction (exactly 0 at integers)."""
    n = hl.round(x)
    return _parity_sign(n) * hl.sin(K(math.pi) * (x - n))


def cospi(x: E) -> E:
    """cos(pi x) with exact argument reduction."""
    n = hl.round(x)
    return _parity_sign(n) * hl.cos(K(math.pi) * (x - n))


def _lgamma_pos(x: E) -> E:
    z = x - K(1.0)
    acc = K(_LANCZOS[0])
    for i, coef in enumerate(_LANCZOS[1:], start=1):
        acc = acc + K(coef) / (z + K(float(i)))
    t = z + K(7.5)
    return K(0.5 * math.log(2 * math.pi)) + (z + K(0.5)) * hl.log(t) - t + hl.log(acc)


def lgamma64(x: E) -> E:
    """log|Gamma(x)| of a float64 expression."""
    big = _lgamma_pos(hl.max(x, K(0.5)))
    refl = hl.log(K(math.pi) / hl.abs(sinpi(x))) - _lgamma_pos(hl.max(K(1.0) - x, K(0.5)))
    out = hl.select(x < K(0.5), refl, big)
    pole = (x <= K(0.0)) & (x == hl.floor(x))  # poles at non-positive integers
    return hl.select(isinf(x) | pole, K(INF), out)


def digamma64(x: E) -> E:
    """psi(x) of a float64 expression (torch: 0 -> -inf, negative integers -> NaN)."""
    y = hl.select(x < K(0.0), K(1.0) - x, x)
    acc, count = K(0.0), K(0.0)
    for k in range(12):
        term = y + K(float(k))
        active = term < K(12.0)
        acc = acc - hl.select(active, K(1.0) / term, K(0.0))
        count = count + hl.select(active, K(1.0), K(0.0))
    z = y + count
    z2 = K(1.0) / (z * z)
    series = z2 * (
        K(1 / 12)
        - z2
        * (
            K(1 / 120)
            - z2
            * (
                K(1 / 252)
                - z2 * (K(1 / 240) - z2 * (K(1 / 132) - z2 * (K(691 / 32760) - z2 * K(1 / 12))))
            )
        )
    )
    pos = acc + hl.log(z) - K(0.5) / z - series
    refl = pos - K(math.pi) * cospi(x) / sinpi(x)
    out = hl.select(x < K(0.0), refl, pos)
    out = hl.select((x < K(0.0)) & (x == hl.floor(x)), K(NAN), out)
    out = hl.select(x == K(0.0), hl.select(hl.reinterpret(hl.Int(64), x) < 0, K(INF), K(-INF)), out)
    return hl.select(x == K(INF), K(INF), hl.select(x == K(-INF), K(NAN), out))


def zeta64(x: E, q: E) -> E:
    """Hurwitz zeta(x, q) (Cephes' Euler-Maclaurin scheme)."""
    s = hl.pow(q, -x)
    a, b = q, K(0.0)
    done = K(0.0) > K(1.0)
    for i in range(1, 60):
        more = ((K(float(i)) <= K(9.0)) | (a <= K(9.0))) & hl.logical_not(done)
        a = hl.select(more, a + K(1.0), a)
        b = hl.select(more, hl.pow(a, -x), b)
        s = hl.select(more, s + b, s)
        done = done | (more & (hl.abs(b / s) < K(_MACHEP)))
    w = a
    tail = s + b * w / (x - K(1.0)) - K(0.5) * b
    fac, kk = K(1.0), K(0.0)
    for coef in _ZETA_A:
        fac = fac * (x + kk)
        b = b / w
        tail = tail + fac * b / K(coef)
        kk = kk + K(1.0)
        fac = fac * (x + kk)
        b = b / w
        kk = kk + K(1.0)
    out = hl.select(done, s, tail)
    out = hl.select(x == K(1.0), K(INF), hl.select(x < K(1.0), K(NAN), out))
    bad_q = (q <= K(0.0)) & (q == hl.floor(q))
    return hl.select(bad_q, K(INF), hl.select((q <= K(0.0)) & (x != hl.floor(x)), K(NAN), out))


def polygamma64(n: E, x: E) -> E:
    """polygamma(n, x): digamma for n = 0, else (-1)^(n+1) n! zeta(n+1, x)."""
    fact = hl.exp(lgamma64(n + K(1.0)))
    sign = hl.select(hl.round(n - K(2.0) * hl.floor(n * K(0.5))) == K(0.0), K(-1.0), K(1.0))
    return hl.select(n == K(0.0), digamma64(x), sign * fact * zeta64(n + K(1.0), x))


def _igam_series(a: E, x: E) -> E:
    r, c, ans = a, K(1.0), K(1.0)
    for _ in range(100):
        r = r + K(1.0)
        c = c * x / r
        ans = ans + c
    ax = a * hl.log(x) - x - lgamma64(a)
    return ans * hl.exp(ax) / a


def _igamc_cf(a: E, x: E) -> E:
    y = K(1.0) - a
    z = x + y + K(1.0)
    c = K(0.0)
    pkm2, qkm2, pkm1, qkm1 = K(1.0), x, x + K(1.0), z * x
    ans = pkm1 / qkm1
    for _ in range(70):
        c = c + K(1.0)
        y = y + K(1.0)
        z = z + K(2.0)
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        ans = hl.select(qk != K(0.0), pk / qk, ans)
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        big = hl.abs(pk) > K(4.503599627370496e15)
        scale = hl.select(big, K(2.22044604925031308085e-16), K(1.0))
        pkm2, pkm1, qkm2, qkm1 = pkm2 * scale, pkm1 * scale, qkm2 * scale, qkm1 * scale
    ax = a * hl.log(x) - x - lgamma64(a)
    return ans * hl.exp(ax)


def igamma64(a: E, x: E) -> E:
    """Regularised lower incomplete gamma P(a, x)."""
    use_cf = (x > K(1.0)) & (x > a)
    lower = _igam_series(a, hl.max(x, K(1e-300)))
    upper = _igamc_cf(a, hl.max(x, K(1.0)))
    out = hl.select(use_cf, K(1.0) - upper, lower)
    return _igam_edges(a, x, out, lower=True)


def igammac64(a: E, x: E) -> E:
    """Regularised upper incomplete gamma Q(a, x)."""
    use_cf = (x > K(1.0)) & (x > a)
    lower = _igam_series(a, hl.max(x, K(1e-300)))
    upper = _igamc_cf(a, hl.max(x, K(1.0)))
    out = hl.select(use_cf, upper, K(1.0) - lower)
    return _igam_edges(a, x, out, lower=False)


def _igam_edges(a: E, x: E, out: E, lower: bool) -> E:
    # torch's calc_igamma / calc_igammac special cases, highest priority last.
    zero, one = (K(0.0), K(1.0)) if lower else (K(1.0), K(0.0))
    out = hl.select(isnan(a) | isnan(x), K(NAN), out)
    out = hl.select(isinf(x), one, out)
    out = hl.select(isinf(a), hl.select(isinf(x), K(NAN), zero), out)
    out = hl.select(x == K(0.0), zero, out)
    out = hl.select(a == K(0.0), hl.select(x > K(0.0), one, K(NAN)), out)
    return hl.select((a < K(0.0)) | (x < K(0.0)), K(NAN), out)


def _erfinv_guess(y: E) -> E:
    w = -hl.log((K(1.0) - y) * (K(1.0) + y))
    a = w - K(2.5)
    p = K(2.81022636e-08)
    for coef in (
        3.43273939e-07,
        -3.5233877e-06,
        -4.39150654e-06,
        0.00021858087,
        -0.00125372503,
        -0.00417768164,
        0.246640727,
        1.50140941,
    ):
        p = K(coef) + p * a
    b = hl.sqrt(hl.max(w, K(0.0))) - K(3.0)
    q = K(-0.000200214257)
    for coef in (
        0.000100950558,
        0.00134934322,
        -0.00367342844,
        0.00573950773,
        -0.0076224613,
        0.00943887047,
        1.00167406,
        2.83297682,
    ):
        q = K(coef) + q * b
    return hl.select(w < K(5.0), p, q) * y


def erfinv64(y: E) -> E:
    """Inverse error function: an initial guess refined by Newton steps on erf (erfc in tails)."""
    x = _erfinv_guess(hl.clamp(y, K(-0.9999999999), K(0.9999999999)))
    tail = hl.abs(y) > K(0.5)
    for _ in range(3):
        slope = K(2.0 / math.sqrt(math.pi)) * hl.exp(-x * x)
        ax, ay = hl.abs(x), hl.abs(y)
        err_tail = -(erfc64(ax) - (K(1.0) - ay))
        err = hl.select(tail, hl.select(x < K(0.0), -err_tail, err_tail), erf64(x) - y)
        x = x - err / slope
    out = hl.select(y == K(1.0), K(INF), hl.select(y == K(-1.0), K(-INF), x))
    return hl.select((hl.abs(y) > K(1.0)) | isnan(y), K(NAN), hl.select(y == K(0.0), y, out))


def ndtr64(x: E) -> E:
    """Standard normal CDF."""
    return K(0.5) * erfc64(-x * K(math.sqrt(0.5)))


def ndtri64(p: E) -> E:
    """Inverse of the standard normal CDF: guess from erfinv, Newton steps on ndtr."""
    x = K(math.sqrt(2.0)) * erfinv64(K(2.0) * p - K(1.0))
    x = hl.clamp(x, K(-40.0), K(40.0))
    for _ in range(2):
        dens = hl.exp(K(-0.5) * x * x) * K(1.0 / math.sqrt(2 * math.pi))
        x = hl.select(dens > K(0.0), x - (ndtr64(x) - p) / dens, x)
    out = hl.select(p == K(0.0), K(-INF), hl.select(p == K(1.0), K(INF), x))
    return hl.select((p < K(0.0)) | (p > K(1.0)) | isnan(p), K(NAN), out)


def log_ndtr64(x: E) -> E:
    """log of the standard normal CDF, accurate in both tails."""
    t = x * K(math.sqrt(0.5))
    left = hl.log(K(0.5) * erfcx64(-t)) - t * t
    right = (
        hl.log1p(K(-0.5) * erfc64(t))
        if hasattr(hl, "log1p")
        else hl.log(K(1.0) - K(0.5) * erfc64(t))
    )
    out = hl.select(x < K(-1.0), left, right)
    return hl.select(x == K(INF), K(-0.0), hl.select(x == K(-INF), K(-INF), out))


def lgamma(x: E) -> E:
    """log|Gamma(x)|."""
    return back(x, lgamma64(w64(x)))


def digamma(x: E) -> E:
    """psi(x)."""
    return back(x, digamma64(w64(x)))


def polygamma(n: E, x: E) -> E:
    """polygamma(n, x); result has x's type."""
    return back(x, polygamma64(w64(n), w64(x)), n)


def zeta(x: E, q: E) -> E:
    """Hurwitz zeta."""
    return back(x, zeta64(w64(x), w64(q)), q)


def igamma(a: E, x: E) -> E:
    """Regularised lower incomplete gamma."""
    return hl.cast(ex(a).type(), igamma64(w64(a), w64(x)))


def igammac(a: E, x: E) -> E:
    """Regularised upper incomplete gamma."""
    return hl.cast(ex(a).type(), igammac64(w64(a), w64(x)))


gammainc, gammaincc = igamma, igammac


def erfinv(x: E) -> E:
    """Inverse error function."""
    return back(x, erfinv64(w64(x)))


def ndtr(x: E) -> E:
    """Standard normal CDF."""
    return back(x, ndtr64(w64(x)))


def ndtri(x: E) -> E:
    """Inverse standard normal CDF."""
    return back(x, at_inf(w64(x), ndtri64(w64(x)), NAN, NAN))


def log_ndtr(x: E) -> E:
    """log of the standard normal CDF."""
    return back(x, log_ndtr64(w64(x)))


__all__ = [
    "digamma",
    "erfinv",
    "ex",
    "gammainc",
    "gammaincc",
    "igamma",
    "igammac",
    "lgamma",
    "log_ndtr",
    "ndtr",
    "ndtri",
    "polygamma",
    "zeta",
]
