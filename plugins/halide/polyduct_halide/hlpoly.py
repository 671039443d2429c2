"""Orthogonal polynomials of integer degree n (given as a float, truncated like torch).

Each follows torch's recurrence and special cases; the recurrence is unrolled to `MAX_DEGREE`
steps. Where torch switches to a trigonometric closed form for large n and |x| < 1, so do these;
degrees above `MAX_DEGREE` outside that range give NaN (documented limitation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import halide as hl

from polyduct_halide.hlspecial import ex, w64

E = Any
K = hl.f64
MAX_DEGREE = 64


def back(x: E, value: E) -> E:
    """float64 `value` in x's type (no NaN forcing: torch gives 1 for n = 0 even at NaN x)."""
    return hl.cast(ex(x).type(), value)


Step = Callable[[E, E, E, int], E]


def _even(n: E) -> E:
    return n - K(2.0) * hl.floor(n * K(0.5)) == K(0.0)


def _recur(n: E, p0: E, p1: E, step: Step, start: int) -> E:
    """p_n by `p_{k+1} = step(p_k, p_{k-1}, k)` from p_{start-1} = p0, p_start = p1."""
    p, q = p0, p1
    for k in range(start, MAX_DEGREE + start):
        nxt = step(q, p, K(float(k)), k)
        active = K(float(k)) < n
        p, q = hl.select(active, q, p), hl.select(active, nxt, q)
    out = hl.select(n == K(0.0), p0, q)
    return hl.select(n > K(float(MAX_DEGREE)), K(float("nan")), out)


def _cheb_step(y: E) -> Step:
    def step(q: E, p: E, k: E, i: int) -> E:
        return (y + y) * q - p

    return step


def _chebyshev(x: E, n: E, kind: str, y: E, at_one: E, at_minus: E) -> E:
    """Shared shape of T, U, V, W at argument y (x or 2x-1 for the shifted ones)."""
    first = {"t": y, "u": y + y, "v": y + y - K(1.0), "w": y + y + K(1.0)}[kind]
    out = _recur(n, K(1.0), first, _cheb_step(y), 1)
    theta = hl.acos(y)
    trig = {
        "t": hl.cos(n * theta),
        "u": hl.sin((n + K(1.0)) * theta) / hl.sin(theta),
        "v": hl.cos((n + K(0.5)) * theta) / hl.cos(theta * K(0.5)),
        "w": hl.sin((n + K(0.5)) * theta) / hl.sin(theta * K(0.5)),
    }[kind]
    limit = {"t": 6.0, "u": 8.0, "v": 8.0, "w": 8.0}[kind]
    out = hl.select((n > K(limit)) & (hl.abs(y) < K(1.0)), trig, out)
    out = hl.select(y == K(1.0), at_one, hl.select(y == K(-1.0), at_minus, out))
    return hl.select(n < K(0.0), K(0.0), out)


def _signed(n: E, value: E) -> E:
    return hl.select(_even(n), value, -value)


def _cheb(kind: str, shifted: bool) -> Callable[[E, E], E]:
    def fn(x: E, n_raw: E) -> E:
        xx, n = w64(x), hl.trunc(w64(n_raw))
        y = xx + xx - K(1.0) if shifted else xx
        one = K(1.0)
        ends = {
            "t": (one, _signed(n, one)),
            "u": (n + one, _signed(n, n + one)),
            "v": (one, _signed(n, n + n + one)),
            "w": (n + n + one, _signed(n, one)),
        }[kind]
        return back(x, _chebyshev(xx, n, kind, y, *ends))

    return fn


chebyshev_polynomial_t = _cheb("t", False)
chebyshev_polynomial_u = _cheb("u", False)
chebyshev_polynomial_v = _cheb("v", False)
chebyshev_polynomial_w = _cheb("w", False)
shifted_chebyshev_polynomial_t = _cheb("t", True)
shifted_chebyshev_polynomial_u = _cheb("u", True)
shifted_chebyshev_polynomial_v = _cheb("v", True)
shifted_chebyshev_polynomial_w = _cheb("w", True)


def hermite_polynomial_h(x: E, n_raw: E) -> E:
    """Physicists' Hermite H_n(x)."""
    xx, n = w64(x), hl.trunc(w64(n_raw))

    def step(q: E, p: E, k: E, i: int) -> E:
        return (xx + xx) * q - K(2.0 * i) * p

    out = _recur(n, K(1.0), xx + xx, step, 1)
    return back(x, hl.select(n < K(0.0), K(0.0), out))


def hermite_polynomial_he(x: E, n_raw: E) -> E:
    """Probabilists' Hermite He_n(x)."""
    xx, n = w64(x), hl.trunc(w64(n_raw))

    def step(q: E, p: E, k: E, i: int) -> E:
        return xx * q - k * p

    out = _recur(n, K(1.0), xx, step, 1)
    return back(x, hl.select(n < K(0.0), K(0.0), out))


def laguerre_polynomial_l(x: E, n_raw: E) -> E:
    """Laguerre L_n(x)."""
    xx, n = w64(x), hl.trunc(w64(n_raw))

    def step(q: E, p: E, k: E, i: int) -> E:
        return ((k + k + (K(1.0) - xx)) * q - k * p) / (k + K(1.0))

    out = _recur(n, K(1.0), K(1.0) - xx, step, 1)
    out = hl.select(hl.abs(xx) == K(0.0), K(1.0), out)
    return back(x, hl.select(n < K(0.0), K(0.0), out))


def legendre_polynomial_p(x: E, n_raw: E) -> E:
    """Legendre P_n(x)."""
    xx, n = w64(x), hl.trunc(w64(n_raw))

    def step(q: E, p: E, k: E, i: int) -> E:
        return ((k + k + K(1.0)) * xx * q - k * p) / (k + K(1.0))

    out = _recur(n, K(1.0), xx, step, 1)
    ends = hl.select((xx > K(0.0)) | (n == K(0.0)), K(1.0), _signed(n, K(1.0)))
    out = hl.select(hl.abs(xx) == K(1.0), ends, out)
    return back(x, hl.select(n < K(0.0), K(0.0), out))


__all__ = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
]
