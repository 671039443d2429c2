"""Oracles that replace torch eager where eager is wrong on this machine (docs/conformance.md).

Each replacement is recorded with its evidence in the "Oracle audit" section of
docs/conformance.md. The exact forms shared with the reference backend live in
`polyduct.reference.exact`; the high-precision special functions are evaluated with mpmath
(30 digits) at the exact input values, and keep ATen's answers at its edges (non-finite inputs,
outside the function's domain).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mpmath
import torch

from polyduct.reference import exact
from polyduct.reference.runtime import fma as _exact_fma

Tensor = torch.Tensor
_DIGITS = 30

sqrt = exact.sqrt
fmod = exact.fmod
hypot = exact.hypot
cosh = exact.cosh
sinh = exact.sinh
remainder = exact.remainder
ndtr = exact.ndtr


def fma(x: Tensor, y: Tensor, z: Tensor) -> Tensor:
    """x*y+z with ONE rounding, float64 included (exact rational arithmetic there)."""
    return _exact_fma(x, y, z)


def nextafter(a: Tensor, b: Tensor) -> Tensor:
    """torch.nextafter in the operands' own dtype (the case table passes float16 unwidened)."""
    return torch.nextafter(a, b)


def polynomial(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
    """ATen polynomial `fn` with its scalar-path answers at x = NaN (`exact.polynomial_at_nan`)."""

    @functools.wraps(fn)
    def oracle(x: Tensor, n: Tensor) -> Tensor:
        return exact.polynomial_at_nan(x, n, fn(x, n))

    return oracle


def _high_precision(
    aten: Callable[..., Tensor],
    exact_fn: Callable[..., Any],
    args: tuple[Tensor, ...],
    positive: bool,
) -> Tensor:
    """float64 values of `exact_fn` (mpmath) where every argument is finite (and > 0 when
    `positive`), ATen's `aten(*args)` elsewhere."""
    wide = [a.to(torch.float64).cpu() for a in torch.broadcast_tensors(*args)]
    out = aten(*args).to(torch.float64).cpu().reshape(-1).clone()
    flat = [a.reshape(-1) for a in wide]
    use = torch.ones_like(out, dtype=torch.bool)
    for a in flat:
        use &= (a > 0) & a.isfinite() if positive else a.isfinite()
    columns = [a.tolist() for a in flat]
    with mpmath.workdps(_DIGITS):
        for i in use.nonzero().reshape(-1).tolist():
            out[i] = float(exact_fn(*(mpmath.mpf(c[i]) for c in columns)))
    return out.reshape(wide[0].shape)


def airy_ai(x: Tensor) -> Tensor:
    """Ai(x) (ATen's is off by up to 3e-6 in float64, 1e-4 in float32)."""
    return _high_precision(torch.special.airy_ai, mpmath.airyai, (x,), positive=False)


def bessel_j0(x: Tensor) -> Tensor:
    """J0(x) (ATen's Cephes constants leave about 2e-7 of error in float64)."""
    return _high_precision(torch.special.bessel_j0, _j(0), (x,), positive=False)


def bessel_j1(x: Tensor) -> Tensor:
    """J1(x), as bessel_j0."""
    return _high_precision(torch.special.bessel_j1, _j(1), (x,), positive=False)


def bessel_y0(x: Tensor) -> Tensor:
    """Y0(x) for x > 0, as bessel_j0."""
    return _high_precision(torch.special.bessel_y0, _y(0), (x,), positive=True)


def bessel_y1(x: Tensor) -> Tensor:
    """Y1(x) for x > 0, as bessel_j0."""
    return _high_precision(torch.special.bessel_y1, _y(1), (x,), positive=True)


def gammainc(a: Tensor, x: Tensor) -> Tensor:
    """Regularised lower incomplete gamma P(a, x) (ATen's is about 2e-9 off for a > 20)."""
    return _high_precision(torch.special.gammainc, _lower_gamma, (a, x), positive=True)


def gammaincc(a: Tensor, x: Tensor) -> Tensor:
    """Regularised upper incomplete gamma Q(a, x), as gammainc."""
    return _high_precision(torch.special.gammaincc, _upper_gamma, (a, x), positive=True)


def _j(order: int) -> Callable[[Any], Any]:
    return functools.partial(mpmath.besselj, order)


def _y(order: int) -> Callable[[Any], Any]:
    return functools.partial(mpmath.bessely, order)


def _lower_gamma(a: Any, x: Any) -> Any:
    return mpmath.gammainc(a, 0, x, regularized=True)


def _upper_gamma(a: Any, x: Any) -> Any:
    return mpmath.gammainc(a, x, mpmath.inf, regularized=True)
