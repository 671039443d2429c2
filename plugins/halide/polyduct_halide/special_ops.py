"""torch.special functions: each op calls the same-named function of `hlmath` (`_m`)."""

from __future__ import annotations

from polyduct_halide.values import Emitter, HVal


class HalideSpecialOps:
    """Special functions, evaluated by `polyduct_halide.hlspecial` in float64; needs `em`."""

    em: Emitter

    def _call(self, fn: str, *xs: HVal) -> HVal:
        return self.em.emit(f"_m.{fn}({', '.join(x.code for x in xs)})", xs[0].dtype)

    def airy_ai(self, x: HVal) -> HVal:
        return self._call("airy_ai", x)

    def bessel_j0(self, x: HVal) -> HVal:
        return self._call("bessel_j0", x)

    def bessel_j1(self, x: HVal) -> HVal:
        return self._call("bessel_j1", x)

    def bessel_y0(self, x: HVal) -> HVal:
        return self._call("bessel_y0", x)

    def bessel_y1(self, x: HVal) -> HVal:
        return self._call("bessel_y1", x)

    def digamma(self, x: HVal) -> HVal:
        return self._call("digamma", x)

    def erfcx(self, x: HVal) -> HVal:
        return self._call("erfcx", x)

    def erfinv(self, x0: HVal) -> HVal:
        return self._call("erfinv", x0)

    def i0(self, x: HVal) -> HVal:
        return self._call("i0", x)

    def i0e(self, x: HVal) -> HVal:
        return self._call("i0e", x)

    def i1(self, x: HVal) -> HVal:
        return self._call("i1", x)

    def i1e(self, x: HVal) -> HVal:
        return self._call("i1e", x)

    def lgamma(self, x0: HVal) -> HVal:
        return self._call("lgamma", x0)

    def log_ndtr(self, x: HVal) -> HVal:
        return self._call("log_ndtr", x)

    def modified_bessel_i0(self, x: HVal) -> HVal:
        return self._call("modified_bessel_i0", x)

    def modified_bessel_i1(self, x: HVal) -> HVal:
        return self._call("modified_bessel_i1", x)

    def modified_bessel_k0(self, x: HVal) -> HVal:
        return self._call("modified_bessel_k0", x)

    def modified_bessel_k1(self, x: HVal) -> HVal:
        return self._call("modified_bessel_k1", x)

    def ndtr(self, x: HVal) -> HVal:
        return self._call("ndtr", x)

    def ndtri(self, x: HVal) -> HVal:
        return self._call("ndtri", x)

    def scaled_modified_bessel_k0(self, x: HVal) -> HVal:
        return self._call("scaled_modified_bessel_k0", x)

    def scaled_modified_bessel_k1(self, x: HVal) -> HVal:
        return self._call("scaled_modified_bessel_k1", x)

    def spherical_bessel_j0(self, x: HVal) -> HVal:
        return self._call("spherical_bessel_j0", x)

    def chebyshev_polynomial_t(self, x: HVal, y: HVal) -> HVal:
        return self._call("chebyshev_polynomial_t", x, y)

    def chebyshev_polynomial_u(self, x: HVal, y: HVal) -> HVal:
        return self._call("chebyshev_polynomial_u", x, y)

    def chebyshev_polynomial_v(self, x: HVal, y: HVal) -> HVal:
        return self._call("chebyshev_polynomial_v", x, y)

    def chebyshev_polynomial_w(self, x: HVal, y: HVal) -> HVal:
        return self._call("chebyshev_polynomial_w", x, y)

    def gammainc(self, x: HVal, y: HVal) -> HVal:
        return self._call("gammainc", x, y)

    def gammaincc(self, x: HVal, y: HVal) -> HVal:
        return self._call("gammaincc", x, y)

    def hermite_polynomial_h(self, x: HVal, y: HVal) -> HVal:
        return self._call("hermite_polynomial_h", x, y)

    def hermite_polynomial_he(self, x: HVal, y: HVal) -> HVal:
        return self._call("hermite_polynomial_he", x, y)

    def igamma(self, x: HVal, y: HVal) -> HVal:
        return self._call("igamma", x, y)

    def igammac(self, x: HVal, y: HVal) -> HVal:
        return self._call("igammac", x, y)

    def laguerre_polynomial_l(self, x: HVal, y: HVal) -> HVal:
        return self._call("laguerre_polynomial_l", x, y)

    def legendre_polynomial_p(self, x: HVal, y: HVal) -> HVal:
        return self._call("legendre_polynomial_p", x, y)

    def polygamma(self, x: HVal, y: HVal) -> HVal:
        return self.em.emit(f"_m.polygamma({x}, {y})", y.dtype)

    def shifted_chebyshev_polynomial_t(self, x: HVal, y: HVal) -> HVal:
        return self._call("shifted_chebyshev_polynomial_t", x, y)

    def shifted_chebyshev_polynomial_u(self, x: HVal, y: HVal) -> HVal:
        return self._call("shifted_chebyshev_polynomial_u", x, y)

    def shifted_chebyshev_polynomial_v(self, x: HVal, y: HVal) -> HVal:
        return self._call("shifted_chebyshev_polynomial_v", x, y)

    def shifted_chebyshev_polynomial_w(self, x: HVal, y: HVal) -> HVal:
        return self._call("shifted_chebyshev_polynomial_w", x, y)

    def zeta(self, x: HVal, y: HVal) -> HVal:
        return self._call("zeta", x, y)
