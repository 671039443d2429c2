"""`SpecialFunctionsMixin`: torch.special functions written once against the op protocol.

Opt in by listing the mixin (or one family mixin) in a backend's ops class statement, before the
base that provides the basic ops (house style rule 5)::

    class TritonOps(SpecialFunctionsMixin, TritonBaseOps): ...

The host must implement `_special_dtype(x) -> torch.dtype`, the dtype `x` is computed in; every
constant is created in that dtype. A method the host defines itself wins over the mixin's. The
algorithms and their domains are described in docs/special-functions.md.
"""

from __future__ import annotations

from typing import Any

import torch

from polyduct.decomp import airy, bessel, gamma, incgamma, jy, normal
from polyduct.decomp import polynomials as poly
from polyduct.handlers.dtypes import compute_dtype

Ops = Any  # the host: a `polyduct.decomp.base.SpecialOps`; see `GammaMixin` for why not typed so


class GammaMixin:
    """lgamma, digamma, polygamma, zeta."""

    def lgamma(self: Ops, x0: Any) -> Any:
        return gamma.lgamma(self, x0)

    def digamma(self: Ops, x: Any) -> Any:
        return gamma.digamma(self, x)

    def polygamma(self: Ops, x: Any, y: Any) -> Any:
        return gamma.polygamma(self, x, y)

    def zeta(self: Ops, x: Any, y: Any) -> Any:
        return gamma.zeta(self, x, y)


class NormalMixin:
    """erfcx, erfinv, ndtr, ndtri, log_ndtr, spherical_bessel_j0."""

    def erfcx(self: Ops, x: Any) -> Any:
        return normal.erfcx(self, x)

    def erfinv(self: Ops, x0: Any) -> Any:
        return normal.erfinv(self, x0)

    def ndtr(self: Ops, x: Any) -> Any:
        return normal.ndtr(self, x)

    def ndtri(self: Ops, x: Any) -> Any:
        return normal.ndtri(self, x)

    def log_ndtr(self: Ops, x: Any) -> Any:
        return normal.log_ndtr(self, x)

    def spherical_bessel_j0(self: Ops, x: Any) -> Any:
        return normal.spherical_bessel_j0(self, x)


class PolynomialMixin:
    """Chebyshev (plain and shifted), Hermite, Laguerre and Legendre polynomials."""

    def chebyshev_polynomial_t(self: Ops, x: Any, y: Any) -> Any:
        return poly.chebyshev(self, x, y, "t", 6.0)

    def chebyshev_polynomial_u(self: Ops, x: Any, y: Any) -> Any:
        return poly.chebyshev(self, x, y, "u", 8.0)

    def chebyshev_polynomial_v(self: Ops, x: Any, y: Any) -> Any:
        return poly.chebyshev(self, x, y, "v", 8.0)

    def chebyshev_polynomial_w(self: Ops, x: Any, y: Any) -> Any:
        return poly.chebyshev(self, x, y, "w", 8.0)

    def shifted_chebyshev_polynomial_t(self: Ops, x: Any, y: Any) -> Any:
        return poly.shifted_chebyshev(self, x, y, "t", 6.0)

    def shifted_chebyshev_polynomial_u(self: Ops, x: Any, y: Any) -> Any:
        return poly.shifted_chebyshev(self, x, y, "u", 6.0)

    def shifted_chebyshev_polynomial_v(self: Ops, x: Any, y: Any) -> Any:
        return poly.shifted_chebyshev(self, x, y, "v", 6.0)

    def shifted_chebyshev_polynomial_w(self: Ops, x: Any, y: Any) -> Any:
        return poly.shifted_chebyshev(self, x, y, "w", 4.0)

    def hermite_polynomial_h(self: Ops, x: Any, y: Any) -> Any:
        return poly.hermite_h(self, x, y)

    def hermite_polynomial_he(self: Ops, x: Any, y: Any) -> Any:
        return poly.hermite_he(self, x, y)

    def laguerre_polynomial_l(self: Ops, x: Any, y: Any) -> Any:
        return poly.laguerre_l(self, x, y)

    def legendre_polynomial_p(self: Ops, x: Any, y: Any) -> Any:
        return poly.legendre_p(self, x, y)


class ModifiedBesselMixin:
    """i0, i0e, i1, i1e, modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1."""

    def i0(self: Ops, x: Any) -> Any:
        return bessel.i0(self, x)

    def i0e(self: Ops, x: Any) -> Any:
        return bessel.i0e(self, x)

    def i1(self: Ops, x: Any) -> Any:
        return bessel.i1(self, x)

    def i1e(self: Ops, x: Any) -> Any:
        return bessel.i1e(self, x)

    def modified_bessel_i0(self: Ops, x: Any) -> Any:
        return bessel.i0(self, x)

    def modified_bessel_i1(self: Ops, x: Any) -> Any:
        return bessel.i1(self, x)

    def modified_bessel_k0(self: Ops, x: Any) -> Any:
        return bessel.k0(self, x)

    def modified_bessel_k1(self: Ops, x: Any) -> Any:
        return bessel.k1(self, x)

    def scaled_modified_bessel_k0(self: Ops, x: Any) -> Any:
        return bessel.k0e(self, x)

    def scaled_modified_bessel_k1(self: Ops, x: Any) -> Any:
        return bessel.k1e(self, x)


class BesselMixin:
    """bessel_j0, bessel_j1, bessel_y0, bessel_y1, airy_ai."""

    def airy_ai(self: Ops, x: Any) -> Any:
        return airy.airy_ai(self, x)

    def bessel_j0(self: Ops, x: Any) -> Any:
        return jy.j0(self, x)

    def bessel_j1(self: Ops, x: Any) -> Any:
        return jy.j1(self, x)

    def bessel_y0(self: Ops, x: Any) -> Any:
        return jy.y0(self, x)

    def bessel_y1(self: Ops, x: Any) -> Any:
        return jy.y1(self, x)


class IncompleteGammaMixin:
    """igamma, igammac and their torch.special names gammainc, gammaincc."""

    def igamma(self: Ops, x: Any, y: Any) -> Any:
        return incgamma.igamma(self, x, y)

    def igammac(self: Ops, x: Any, y: Any) -> Any:
        return incgamma.igammac(self, x, y)

    def gammainc(self: Ops, x: Any, y: Any) -> Any:
        return self.igamma(x, y)

    def gammaincc(self: Ops, x: Any, y: Any) -> Any:
        return self.igammac(x, y)


class SpecialFunctionsMixin(
    GammaMixin, NormalMixin, PolynomialMixin, ModifiedBesselMixin, BesselMixin, IncompleteGammaMixin
):
    """Every special function of the op set, from basic ops (see the family mixins).

    Values are computed in their compute dtype (float32 for float16/bfloat16): the default
    `_special_dtype` reads it from a source backend's `polyduct.codegen.Value`; a host whose
    values are something else overrides it."""

    def _special_dtype(self, x: Any) -> torch.dtype:
        return compute_dtype(x.dtype)
