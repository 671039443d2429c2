"""`TritonOps`: the op table of the Triton backend, assembled from visible mixins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, final

import torch

from polyduct.codegen import Value
from polyduct.decomp import SpecialFunctionsMixin
from polyduct.ops import OP_NAMES
from polyduct_triton.math_ops import MathDecompositions
from polyduct_triton.memory_ops import TritonMemoryOps
from polyduct_triton.prim_ops import TritonPrimitiveOps
from polyduct_triton.reduce_ops import TritonReduceOps
from polyduct_triton.special_ops import SpecialFunctions
from polyduct_triton.values import LOW_PRECISION


@final
class TritonOps(
    SpecialFunctions,
    SpecialFunctionsMixin,
    MathDecompositions,
    TritonReduceOps,
    TritonMemoryOps,
    TritonPrimitiveOps,
):
    """Triton expressions for every op; decompositions come from the mixins listed above."""

    def _in_float64(self, fn: Callable[[Value], Any], x: Value) -> Value:
        """`fn(x)` evaluated on `x` widened to float64, rounded once to `x`'s dtype."""
        wide: Value = fn(self.to_dtype(x, torch.float64))
        return self.to_dtype(wide, x.dtype)

    # float16/bfloat16 near a zero of these functions: float32 leaves fewer correct bits than the
    # result needs (psi(-16.734375) came out 3 float16 ulp off; Y0 near 0.8936, 3 subnormal ulp).

    def digamma(self, x: Value) -> Value:
        return self._in_float64(super().digamma, x) if x.dtype in LOW_PRECISION else super().digamma(x)

    def bessel_j0(self, x: Value) -> Value:
        return self._in_float64(super().bessel_j0, x) if x.dtype in LOW_PRECISION else super().bessel_j0(x)

    def bessel_j1(self, x: Value) -> Value:
        return self._in_float64(super().bessel_j1, x) if x.dtype in LOW_PRECISION else super().bessel_j1(x)

    def bessel_y0(self, x: Value) -> Value:
        return self._in_float64(super().bessel_y0, x) if x.dtype in LOW_PRECISION else super().bessel_y0(x)

    def bessel_y1(self, x: Value) -> Value:
        return self._in_float64(super().bessel_y1, x) if x.dtype in LOW_PRECISION else super().bessel_y1(x)

    def airy_ai(self, x: Value) -> Value:
        return self._in_float64(super().airy_ai, x) if x.dtype in LOW_PRECISION else super().airy_ai(x)

    def erfc(self, x: Value) -> Value:
        """float32: float64 1 - erf(x) up to x = 1.25 (the float32 scaled form rounds
        exp(-x^2) * exp(x^2) * (1 - erf(x)) there: 5 ulp at 0.54); above, exp(-x^2) in float64
        times float32 erfcx (float32 exp(-x^2) was 66 ulp off at x = 8.7)."""
        if x.dtype == torch.float64:
            same: Value = super().erfc(x)
            return same
        wide = self.to_dtype(x, torch.float64)
        near = self.sub(self._k(1.0, wide), self.erf(wide))
        tail = self.mul(self._exp_neg_sq(wide), self.to_dtype(self.erfcx(x), torch.float64))
        out = self.to_dtype(self.where(self.gt(x, self._k(1.25, x)), tail, near), x.dtype)
        return self.where(self.gt(x, self._k(30.0, x)), self._k(0.0, x), out)  # +inf: 0, not NaN


UNSUPPORTED: Final[dict[str, str]] = {
    name: "not implemented yet in the Triton backend"
    for name in sorted(OP_NAMES)
    if getattr(TritonOps, name, None) is None
}
