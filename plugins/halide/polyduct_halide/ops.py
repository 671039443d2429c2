"""`HalideOps`: the op table of the Halide backend, assembled from visible mixins."""

from __future__ import annotations

from typing import final

import torch

from polyduct.decomp import SpecialFunctionsMixin
from polyduct_halide.math_ops import HalideElementwiseOps
from polyduct_halide.structural_ops import HalideStructuralOps
from polyduct_halide.trace import KernelTrace
from polyduct_halide.values import LOW_FLOATS, HVal


@final
class HalideOps(SpecialFunctionsMixin, HalideStructuralOps, HalideElementwiseOps):
    """Every op of the protocol as Halide Python source; values are `HVal`s.

    Elementwise math renders expressions; structural ops (memory, reductions, scan, sort,
    masking, random) record into the kernel's `KernelTrace`. torch.special functions come from
    `polyduct.decomp` (the shared decompositions), written against the other ops.
    """

    def __init__(self, trace: KernelTrace) -> None:
        self.t = trace

    def _special_dtype(self, x: HVal) -> torch.dtype:
        """The dtype `x` is computed in, for `polyduct.decomp`: float16/bfloat16 in float32."""
        return torch.float32 if x.dtype in LOW_FLOATS else x.dtype
