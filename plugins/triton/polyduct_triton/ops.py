"""`TritonOps`: the op table of the Triton backend, assembled from visible mixins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, final

import torch

from polyduct.decomp import SpecialFunctionsMixin
from polyduct.ops import OP_NAMES
from polyduct_triton.math_ops import MathDecompositions
from polyduct_triton.memory_ops import TritonMemoryOps
from polyduct_triton.prim_ops import TritonPrimitiveOps
from polyduct_triton.reduce_ops import TritonReduceOps
from polyduct_triton.special_ops import SpecialFunctions
from polyduct_triton.values import LOW_PRECISION, TritonValue


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

    def _special_dtype(self, x: TritonValue) -> torch.dtype:
        """Compute dtype of `x` for `polyduct.decomp`: float16/bfloat16 compute in float32."""
        return torch.float32 if x.dtype in LOW_PRECISION else x.dtype

    def _in_float64(self, fn: Callable[[TritonValue], Any], x: TritonValue) -> TritonValue:
        """`fn(x)` evaluated on `x` widened to float64, rounded once to `x`'s dtype."""
        wide: TritonValue = fn(self.to_dtype(x, torch.float64))
        return self.to_dtype(wide, x.dtype)

    # float16/bfloat16 near a zero of these functions: float32 leaves fewer correct bits than the
    # result needs (psi(-16.734375) came out 3 float16 ulp off; Y0 near 0.8936, 3 subnormal ulp).

    def digamma(self, x: TritonValue) -> TritonValue:
        return self._in_float64(super().digamma, x) if x.dtype in LOW_PRECISION else super().digamma(x)

    def bessel_j0(self, x: TritonValue) -> TritonValue:
        return self._in_float64(super().bessel_j0, x) if x.dtype in LOW_PRECISION else super().bessel_j0(x)

    def bessel_j1(self, x: TritonValue) -> TritonValue:
        return self._in_float64(super().bessel_j1, x) if x.dtype in LOW_PRECISION else super().bessel_j1(x)

    def bessel_y0(self, x: TritonValue) -> TritonValue:
        return self._in_float64(super().bessel_y0, x) if x.dtype in LOW_PRECISION else super().bessel_y0(x)

    def bessel_y1(self, x: TritonValue) -> TritonValue:
        return self._in_float64(super().bessel_y1, x) if x.dtype in LOW_PRECISION else super().bessel_y1(x)

    def airy_ai(self, x: TritonValue) -> TritonValue:
        return self._in_float64(super().airy_ai, x) if x.dtype in LOW_PRECISION else super().airy_ai(x)

    def erfc(self, x: TritonValue) -> TritonValue:
        """float32 compute in float64: between 0.5 and 1.25 erfc is exp(-x^2) * exp(x^2) * (1 - erf),
        whose float32 roundings reached 5 ulp (erfc(0.5402296))."""
        return super().erfc(x) if x.dtype == torch.float64 else self._in_float64(super().erfc, x)


UNSUPPORTED: Final[dict[str, str]] = {
    name: "not implemented yet in the Triton backend"
    for name in sorted(OP_NAMES)
    if getattr(TritonOps, name, None) is None
}
