"""`HalideOps`: the op table of the Halide backend, assembled from visible mixins."""

from __future__ import annotations

from typing import final

from polyduct.decomp import SpecialFunctionsMixin
from polyduct_halide.math_ops import HalideElementwiseOps
from polyduct_halide.structural_ops import HalideStructuralOps
from polyduct_halide.trace import KernelTrace


@final
class HalideOps(SpecialFunctionsMixin, HalideStructuralOps, HalideElementwiseOps):
    """Every op of the protocol as Halide Python source; values are `Value`s.

    Elementwise math renders expressions; structural ops (memory, reductions, scan, sort,
    masking, random) record into the kernel's `KernelTrace`. torch.special functions come from
    `polyduct.decomp` (the shared decompositions), written against the other ops.
    """

    def __init__(self, trace: KernelTrace) -> None:
        self.t = trace

