"""`HalideOps`: the op table of the Halide backend, assembled from visible mixins."""

from __future__ import annotations

from typing import final

from polyduct_halide.math_ops import HalideElementwiseOps
from polyduct_halide.special_ops import HalideSpecialOps
from polyduct_halide.structural_ops import HalideStructuralOps
from polyduct_halide.trace import KernelTrace


@final
class HalideOps(HalideSpecialOps, HalideStructuralOps, HalideElementwiseOps):
    """Every op of the protocol as Halide Python source; values are `HVal`s.

    Elementwise math and special functions render expressions; structural ops (memory, reductions,
    scan, sort, masking, random) record into the kernel's `KernelTrace`.
    """

    def __init__(self, trace: KernelTrace) -> None:
        self.t = trace
