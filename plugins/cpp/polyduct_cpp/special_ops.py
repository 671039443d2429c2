"""`SpecialFnOps`: torch.special functions as calls into the kernel header's `pd_sp` namespace.

Each is computed in double (pd_special.h) and rounded to the value's compute type.
"""

from __future__ import annotations

from polyduct.codegen import Value
from polyduct_cpp.cstyle import CStyleOps


class SpecialFnOps(CStyleOps):
    """Special functions and orthogonal polynomials (torch.special semantics)."""

    def _sp(self, op: str, fn: str, *args: Value) -> Value:
        call = ", ".join(f"static_cast<double>({a})" for a in args)
        return self._v(op, f"pd_sp::{fn}({call})", *args)

    def airy_ai(self, x: Value) -> Value:
        return self._sp("airy_ai", "airy_ai", x)

    def bessel_j0(self, x: Value) -> Value:
        return self._v("bessel_j0", f"pd_sp::bessel_j(0, static_cast<double>({x}))", x)

    def bessel_j1(self, x: Value) -> Value:
        return self._v("bessel_j1", f"pd_sp::bessel_j(1, static_cast<double>({x}))", x)

    def bessel_y0(self, x: Value) -> Value:
        return self._v("bessel_y0", f"pd_sp::bessel_y(0, static_cast<double>({x}))", x)

    def bessel_y1(self, x: Value) -> Value:
        return self._v("bessel_y1", f"pd_sp::bessel_y(1, static_cast<double>({x}))", x)

    def modified_bessel_i0(self, x: Value) -> Value:
        return self._v("modified_bessel_i0", f"pd_sp::bessel_i(0, static_cast<double>({x}))", x)

    def modified_bessel_i1(self, x: Value) -> Value:
        return self._v("modified_bessel_i1", f"pd_sp::bessel_i(1, static_cast<double>({x}))", x)

    def modified_bessel_k0(self, x: Value) -> Value:
        return self._v("modified_bessel_k0", f"pd_sp::bessel_k(0, static_cast<double>({x}))", x)

    def modified_bessel_k1(self, x: Value) -> Value:
        return self._v("modified_bessel_k1", f"pd_sp::bessel_k(1, static_cast<double>({x}))", x)

    def scaled_modified_bessel_k0(self, x: Value) -> Value:
        expr = f"pd_sp::bessel_ke(0, static_cast<double>({x}))"
        return self._v("scaled_modified_bessel_k0", expr, x)

    def scaled_modified_bessel_k1(self, x: Value) -> Value:
        expr = f"pd_sp::bessel_ke(1, static_cast<double>({x}))"
        return self._v("scaled_modified_bessel_k1", expr, x)

    def i0(self, x: Value) -> Value:
        return self._v("i0", f"pd_sp::bessel_i(0, static_cast<double>({x}))", x)

    def i0e(self, x: Value) -> Value:
        return self._v("i0e", f"pd_sp::bessel_ie(0, static_cast<double>({x}))", x)

    def i1(self, x: Value) -> Value:
        return self._v("i1", f"pd_sp::bessel_i(1, static_cast<double>({x}))", x)

    def i1e(self, x: Value) -> Value:
        return self._v("i1e", f"pd_sp::bessel_ie(1, static_cast<double>({x}))", x)

    def spherical_bessel_j0(self, x: Value) -> Value:
        return self._sp("spherical_bessel_j0", "spherical_j0", x)

    def digamma(self, x: Value) -> Value:
        return self._sp("digamma", "digamma", x)

    def polygamma(self, x: Value, y: Value) -> Value:
        return self._sp("polygamma", "polygamma", x, y)

    def zeta(self, x: Value, y: Value) -> Value:
        return self._sp("zeta", "zeta", x, y)

    def igamma(self, x: Value, y: Value) -> Value:
        return self._sp("igamma", "igamma", x, y)

    def igammac(self, x: Value, y: Value) -> Value:
        return self._sp("igammac", "igammac", x, y)

    def gammainc(self, x: Value, y: Value) -> Value:
        return self._sp("gammainc", "igamma", x, y)

    def gammaincc(self, x: Value, y: Value) -> Value:
        return self._sp("gammaincc", "igammac", x, y)

    def erfcx(self, x: Value) -> Value:
        return self._sp("erfcx", "erfcx", x)

    def erfinv(self, x0: Value) -> Value:
        return self._sp("erfinv", "erfinv", x0)

    def ndtr(self, x: Value) -> Value:
        return self._v("ndtr", f"pd_ndtr({x})", x)

    def ndtri(self, x: Value) -> Value:
        return self._sp("ndtri", "ndtri", x)

    def log_ndtr(self, x: Value) -> Value:
        return self._sp("log_ndtr", "log_ndtr", x)

    def chebyshev_polynomial_t(self, x: Value, y: Value) -> Value:
        return self._sp("chebyshev_polynomial_t", "cheb_t", x, y)

    def chebyshev_polynomial_u(self, x: Value, y: Value) -> Value:
        return self._sp("chebyshev_polynomial_u", "cheb_u", x, y)

    def chebyshev_polynomial_v(self, x: Value, y: Value) -> Value:
        return self._sp("chebyshev_polynomial_v", "cheb_v", x, y)

    def chebyshev_polynomial_w(self, x: Value, y: Value) -> Value:
        return self._sp("chebyshev_polynomial_w", "cheb_w", x, y)

    def _shifted(self, op: str, fn: str, x: Value, y: Value) -> Value:
        # The shifted polynomial is the plain one at 2x - 1.
        expr = f"pd_sp::{fn}(2.0 * static_cast<double>({x}) - 1.0, static_cast<double>({y}))"
        return self._v(op, expr, x, y)

    def shifted_chebyshev_polynomial_t(self, x: Value, y: Value) -> Value:
        return self._shifted("shifted_chebyshev_polynomial_t", "cheb_t", x, y)

    def shifted_chebyshev_polynomial_u(self, x: Value, y: Value) -> Value:
        return self._shifted("shifted_chebyshev_polynomial_u", "cheb_u", x, y)

    def shifted_chebyshev_polynomial_v(self, x: Value, y: Value) -> Value:
        return self._shifted("shifted_chebyshev_polynomial_v", "cheb_v", x, y)

    def shifted_chebyshev_polynomial_w(self, x: Value, y: Value) -> Value:
        return self._shifted("shifted_chebyshev_polynomial_w", "cheb_w", x, y)

    def hermite_polynomial_h(self, x: Value, y: Value) -> Value:
        return self._sp("hermite_polynomial_h", "hermite_h", x, y)

    def hermite_polynomial_he(self, x: Value, y: Value) -> Value:
        return self._sp("hermite_polynomial_he", "hermite_he", x, y)

    def laguerre_polynomial_l(self, x: Value, y: Value) -> Value:
        return self._sp("laguerre_polynomial_l", "laguerre_l", x, y)

    def legendre_polynomial_p(self, x: Value, y: Value) -> Value:
        return self._sp("legendre_polynomial_p", "legendre_p", x, y)
