"""`TritonOps`: the op table of the Triton backend, assembled from visible mixins."""

from __future__ import annotations

from typing import Final, final

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

    def digamma(self, x: TritonValue) -> TritonValue:
        """float16/bfloat16 digamma in float64: near its negative zeros the reflection
        psi(1 - x) - pi / tan(pi x) cancels about 13 bits, more than float32 can spare."""
        if x.dtype not in LOW_PRECISION:
            same: TritonValue = super().digamma(x)
            return same
        wide: TritonValue = super().digamma(self.to_dtype(x, torch.float64))
        return self.to_dtype(wide, x.dtype)


UNSUPPORTED: Final[dict[str, str]] = {
    name: "not implemented yet in the Triton backend"
    for name in sorted(OP_NAMES)
    if getattr(TritonOps, name, None) is None
}
