"""Random lowerings: rand / randn (and their `_like` forms) as Philox values of the output index.

Each random op takes one slot of the graph's seed buffer (filled from torch's generator by the
wrapper, so `torch.manual_seed` reproduces a run) and uses the flat row-major output index as the
Philox counter (docs/conventions.md, "Random numbers").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.indexing import contiguous_strides, linear_index
from polyduct.ir import SEED_BUFFER, BufferInfo, Expr, Layout, Lazy, numel
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.values import Ops, cast, lazy

_INT32_LIMIT = 2**31


def _random(ctx: LoweringContext, op: str) -> Lazy:
    size, dtype = ctx.out_size(), ctx.out_dtype()
    if not dtype.is_floating_point:
        raise Fallback(f"{op} into {dtype}")
    total = numel(size)
    offset_dtype = torch.int32
    if not total.is_Integer or int(total) >= _INT32_LIMIT:
        offset_dtype = torch.int64
    slot = ctx.seed_index()
    seeds = Layout.contiguous((len(ctx.seeds),), torch.int64, ctx.device)
    ctx.graph.buffers[SEED_BUFFER] = BufferInfo(SEED_BUFFER, "extern", seeds)
    strides = contiguous_strides(size)

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        seed = ops.load_seed(SEED_BUFFER, ops.constant(slot, torch.int32))
        flat = linear_index(idx, strides) if idx else sympy.Integer(0)
        offset = ops.index_expr(flat, offset_dtype)
        value = ops.rand(seed, offset) if op == "rand" else ops.randn(seed, offset)
        return cast(ops, value, torch.float32, dtype)

    return lazy(size, dtype, ctx.device, load)


def rand(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Lazy:
    """rand / rand_like: uniform [0, 1)."""
    if kwargs.get("generator") is not None:
        raise Fallback("explicit generator")
    return _random(ctx, "rand")


def randn(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Lazy:
    """randn / randn_like: standard normal."""
    if kwargs.get("generator") is not None:
        raise Fallback("explicit generator")
    return _random(ctx, "randn")


def table() -> dict[str, LoweringFn]:
    """The random lowerings, by aten overload name."""
    return {
        "aten.rand.default": rand,
        "aten.rand_like.default": rand,
        "aten.randn.default": randn,
        "aten.randn_like.default": randn,
    }
