"""Scatter lowerings: scatter / scatter_add / index_put, and in-place copy_ (scatter_reduce and
index_reduce: `polyduct.lowering.scatter_reduce`).

A scatter is two compute nodes: a pointwise copy of `self` into a fresh buffer, then a pointwise
node over the index space that stores each source element at its indirect position (`store` mode
`atomic_add` when values accumulate, so duplicate indices add up on every backend). The scatter
node stores at an index holding indirect symbols, so the scheduler never fuses it with a node that
touches its buffer (see `polyduct.scheduling.fusion`). Index values are bounds-checked and
negative ones wrapped (`ops.indirect_indexing`; docs/conventions.md, "Indexing").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from polyduct.ir import ComputeNode, Expr, Layout, Lazy, Loader, StorageView, TensorValue
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.index import _broadcast, _indirect
from polyduct.lowering.values import Ops, broadcast_index, cast, is_tensor, operand
from polyduct.ops import StoreMode

Coords = Callable[[Ops, Sequence[Expr]], list[Expr]]


def _fresh_copy(
    ctx: LoweringContext, x: TensorValue, dtype: torch.dtype | None = None
) -> StorageView:
    """A new contiguous buffer holding `x` (in `dtype`, by default the node's output dtype)."""
    dtype = dtype or ctx.out_dtype()
    src = x

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return cast(ops, src.load(ops, idx), src.dtype, dtype)

    value = Lazy(tuple(x.size), dtype, ctx.device, load)
    return ctx.graph.realize_as(value, Layout.contiguous(x.size, dtype, ctx.device))


def _scatter(
    ctx: LoweringContext,
    x: TensorValue,
    space: Sequence[Expr],
    coords: Coords,
    src: Loader,
    mode: StoreMode,
    dtype: torch.dtype | None = None,
) -> StorageView:
    """Copy `x` (as `dtype`), then store `src(idx)` at `coords(idx)` for every `idx` of `space`."""
    out = _fresh_copy(ctx, x, dtype)
    _scatter_into(ctx, out, space, coords, src, mode)
    return out


def _scatter_into(
    ctx: LoweringContext,
    out: StorageView,
    space: Sequence[Expr],
    coords: Coords,
    src: Loader,
    mode: StoreMode,
) -> None:
    """Store `src(idx)` into `out` at `coords(idx)` for every `idx` of `space` (one node)."""
    name, layout = out.buffer, out.layout

    def body(ops: Ops, xs: Sequence[Expr], r: Sequence[Expr]) -> None:
        ops.store(name, layout.index(coords(ops, xs)), src(ops, xs), mode)

    graph = ctx.graph
    graph.nodes.append(
        ComputeNode(graph.new_name("node"), "pointwise", tuple(space), (), body, (name,))
    )


def _check(x: Any, index: Any, src: Any, accumulate: bool) -> None:
    if not is_tensor(x) or not is_tensor(index) or not x.size:
        raise Fallback("scatter needs tensors of at least one dim")
    if index.dtype not in (torch.int64, torch.int32):
        raise Fallback(f"scatter index of dtype {index.dtype}")
    if accumulate and x.dtype == torch.bool:
        raise Fallback("accumulating scatter into bool")


def _dim_scatter(
    ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue, src: Any, mode: StoreMode
) -> StorageView:
    _check(x, index, src, mode is not None)
    dim = dim % len(x.size)
    dtype = ctx.out_dtype()
    size = x.size[dim]

    def coords(ops: Ops, idx: Sequence[Expr]) -> list[Expr]:
        out = list(idx)
        # eager's scatter rejects negative indices (index_put wraps them)
        out[dim] = ops.indirect_indexing(index.load(ops, idx), size, True, False)
        return out

    # src may be larger than index: element idx of src goes to the position index[idx] names
    load = _unbroadcast(src, dtype) if is_tensor(src) else operand(src, index.size, dtype)
    return _scatter(ctx, x, index.size, coords, load, mode)


def _unbroadcast(value: TensorValue, dtype: torch.dtype) -> Loader:
    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return cast(ops, value.load(ops, idx), value.dtype, dtype)

    return load


def scatter(
    ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue, src: Any, **kw: Any
) -> StorageView:
    """out = x; out[..index[i].., ...] = src[i] (scatter.src and scatter.value)."""
    if kw.get("reduce") is not None:
        raise Fallback(f"scatter with reduce={kw['reduce']!r}")
    return _dim_scatter(ctx, x, dim, index, src, None)


def scatter_add(
    ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue, src: TensorValue
) -> StorageView:
    """out = x; out[..index[i].., ...] += src[i] (duplicates accumulate)."""
    return _dim_scatter(ctx, x, dim, index, src, "atomic_add")


def _index_space(
    x: TensorValue, indices: Sequence[Any]
) -> tuple[list[Any], tuple[Expr, ...], int, tuple[Expr, ...]]:
    """(indices padded to x's rank, broadcast index shape, its first dim, iteration space)."""
    full = [*indices, *([None] * (len(x.size) - len(indices)))]
    picked = [d for d, i in enumerate(full) if i is not None]
    bshape = _broadcast([full[d].size for d in picked])
    adjacent = picked == list(range(picked[0], picked[-1] + 1))
    first = picked[0] if adjacent else 0
    kept = [x.size[d] for d in range(len(x.size)) if full[d] is None]
    space = (*kept[:first], *bshape, *kept[first:])
    return full, bshape, first, tuple(space)


def index_put(
    ctx: LoweringContext,
    x: TensorValue,
    indices: Sequence[Any],
    values: Any,
    accumulate: bool = False,
) -> StorageView:
    """out = x; out[indices] = values (or += with accumulate: duplicates add up)."""
    if not indices or any(i is not None and not is_tensor(i) for i in indices):
        raise Fallback("index_put needs index tensors")
    tensors = [i for i in indices if i is not None]
    if not tensors or any(i.dtype in (torch.bool, torch.uint8) for i in tensors):
        raise Fallback("boolean mask index (data-dependent shape)")
    _check(x, tensors[0], values, accumulate)
    full, bshape, first, space = _index_space(x, indices)
    nb = len(bshape)

    def coords(ops: Ops, idx: Sequence[Expr]) -> list[Expr]:
        bidx = idx[first : first + nb]
        rest = iter([*idx[:first], *idx[first + nb :]])
        out: list[Expr] = []
        for d, ix in enumerate(full):
            if ix is None:
                out.append(next(rest))
            else:
                at = broadcast_index(ix.size, bshape, bidx)
                out.append(_indirect(ops, ix, at, x.size[d]))
        return out

    load = operand(values, space, ctx.out_dtype())
    return _scatter(ctx, x, space, coords, load, "atomic_add" if accumulate else None)


def copy_inplace(
    ctx: LoweringContext, dst: TensorValue, src: Any, non_blocking: bool = False
) -> StorageView:
    """dst.copy_(src) into a realised buffer (a graph input): one kernel writing dst in place."""
    if not isinstance(dst, StorageView):
        raise Fallback("copy_ into an unrealised value")
    name, layout = dst.buffer, dst.layout
    load = operand(src, dst.size, dst.dtype)

    def body(ops: Ops, xs: Sequence[Expr], r: Sequence[Expr]) -> None:
        ops.store(name, layout.index(xs), load(ops, xs))

    graph = ctx.graph
    graph.nodes.append(
        ComputeNode(graph.new_name("node"), "pointwise", tuple(dst.size), (), body, (name,))
    )
    return dst


def table() -> dict[str, LoweringFn]:
    """The scatter lowerings, by aten overload name."""
    return {
        "aten.scatter.src": scatter,
        "aten.scatter.value": scatter,
        "aten.scatter_add.default": scatter_add,
        "aten.index_put.default": index_put,
        "aten.copy_.default": copy_inplace,
    }
