"""Special functions (torch.special) written against the op protocol, for every Triton target."""

from __future__ import annotations

from polyduct.codegen import Value
from polyduct_triton.math_ops import MathDecompositions

V = Value


class SpecialFunctions(MathDecompositions):
    """Opt-in mixin: special functions from primitive ops and Triton helper loops."""

    def erfcx(self, x: V) -> V:
        terms = 120 if x.dtype.itemsize == 8 else 40
        cf = self._v(f"_erfcx_cf({x}, {terms})", x.dtype)
        direct = self.mul(self.exp(self.mul(x, x)), self.sub(self._k(1.0, x), self.erf(x)))
        return self.where(self.gt(x, self._k(1.25, x)), cf, direct)
