"""`TritonOps`: the op table of the Triton backend, assembled from visible mixins."""

from __future__ import annotations

from typing import Final, final

from polyduct.ops import OP_NAMES

from polyduct_triton.math_ops import MathDecompositions
from polyduct_triton.memory_ops import TritonMemoryOps
from polyduct_triton.prim_ops import TritonPrimitiveOps
from polyduct_triton.reduce_ops import TritonReduceOps
from polyduct_triton.special_ops import SpecialFunctions


@final
class TritonOps(
    SpecialFunctions, MathDecompositions, TritonReduceOps, TritonMemoryOps, TritonPrimitiveOps
):
    """Triton expressions for every op; decompositions come from the mixins listed above."""


UNSUPPORTED: Final[dict[str, str]] = {
    name: "not implemented yet in the Triton backend"
    for name in sorted(OP_NAMES)
    if getattr(TritonOps, name, None) is None
}
