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
import torch.fx
import torch.utils._pytree as pytree
from torch._guards import detect_fake_mode

from polyduct.indexing import contiguous_strides, linear_index
from polyduct.ir import SEED_BUFFER, BufferInfo, Expr, Layout, Lazy, numel
from polyduct.lowering.externs import extern_call
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn, op_name
from polyduct.lowering.values import Ops, cast, lazy
from polyduct.wrapper.library import RUN_AND_SAVE_RNG_STATE, RUN_WITH_RNG_STATE

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


def run_and_save_rng_state(ctx: LoweringContext, op: Any, *args: Any, **kwargs: Any) -> Any:
    """torch's wrapper of a random op in an activation-checkpointed region: (the generator's
    state, op's result). A library call, as the backward's `run_with_rng_state` must replay the
    op's numbers from that state (seeds of a kernel of ours are drawn per call)."""
    state, result = _fake_result(ctx)
    nested = isinstance(result, (tuple, list))
    flat = (state, *result) if nested else (state, result)
    values = extern_call(
        ctx.graph, ctx.node, RUN_AND_SAVE_RNG_STATE, (op, *args), kwargs, returns=flat
    )
    return (values[0], tuple(values[1:])) if nested else tuple(values)


def run_with_rng_state(ctx: LoweringContext, state: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """`op` run with the generator set to `state` (saved by `run_and_save_rng_state`), then
    restored: a library call."""
    return extern_call(
        ctx.graph, ctx.node, RUN_WITH_RNG_STATE, (state, op, *args), kwargs,
        returns=_fake_result(ctx),
    )


def _fake_result(ctx: LoweringContext) -> Any:
    """The node's fake result: AOTAutograd's partitioner makes the rng-state wrappers without
    one, so the wrapper runs on the fake values of its arguments."""
    node = ctx.node
    if "val" in node.meta:
        return node.meta["val"]
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta.get("val"))
    mode = detect_fake_mode(pytree.tree_leaves((args, kwargs)))
    if mode is None:
        raise Fallback(f"{op_name(node.target)}: no fake values of its arguments")
    wrapper: Any = node.target
    with mode:
        return wrapper(*args, **kwargs)


def table() -> dict[str, LoweringFn]:
    """The random lowerings, by aten overload name (torch's rng-state wrappers by theirs)."""
    return {
        "aten.rand.default": rand,
        "aten.rand_like.default": rand,
        "aten.randn.default": randn,
        "aten.randn_like.default": randn,
        "run_and_save_rng_state": run_and_save_rng_state,
        "run_with_rng_state": run_with_rng_state,
    }
