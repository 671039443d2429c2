"""scatter_reduce (sum, prod, mean, amax, amin; include_self either way) and index_reduce.

Eager's semantics (ATen `scatter_reduce` / `index_reduce`): a position that some index names gets
the reduction of every source element sent there, combined with `self`'s value when
`include_self`; a position no index names keeps `self`'s value. `mean` divides by the number of
contributions (floor division for integers); NaN propagates through every mode.

The op set's only accumulating store is `atomic_add` (design/OPSET.md), so:
- `sum` and `mean` scatter with `atomic_add` into a fresh buffer (`self`'s copy or zeros), plus a
  second atomic scatter counting contributions when needed; one pointwise epilogue combines them.
  Linear in the number of source elements.
- `prod`, `amax` and `amin` are a masked reduction: every output position reduces over the scatter
  dim of the source, keeping the elements whose index names that position (`where(hit, src,
  identity)`) and counting the hits. Correct and deterministic, but it costs
  numel(self) * index.size(dim) element visits, so above `MASKED_BUDGET` (or with symbolic
  sizes, or an index narrower than `self` outside `dim`) the op runs as an extern call instead.
Index values are bounds-checked without wrapping negatives (eager rejects them), as for scatter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from polyduct.ir import ComputeNode, Expr, Layout, Lazy, Loader, StorageView, TensorValue, acc_name
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.scatter import _fresh_copy, _scatter_into
from polyduct.lowering.values import Ops, cast, converted, is_tensor, lazy
from polyduct.ops import ReductionType

MASKED_BUDGET = 1 << 24
"""Most element visits (numel(self) * index.size(dim)) a masked scatter reduction may cost."""

_MASKED: dict[str, ReductionType] = {"prod": "prod", "amax": "max", "amin": "min"}
_MODES = ("sum", "mean", *_MASKED)


@dataclass(frozen=True)
class _Spread:
    """One scatter: element `i` of `space` sends `src(i)` to position `index(i)` along `dim`."""

    x: TensorValue
    dim: int
    space: tuple[Expr, ...]
    index: Loader  # the (unchecked) target position along `dim` of element `i`
    src: Loader  # element `i`'s value, already in the output dtype
    dtype: torch.dtype

    def target(self, ops: Ops, idx: Sequence[Expr]) -> list[Expr]:
        """Output coordinates element `idx` goes to (bounds-checked, negatives rejected)."""
        out = list(idx)
        out[self.dim] = ops.indirect_indexing(
            self.index(ops, idx), self.x.size[self.dim], True, False
        )
        return out


def _identity(mode: str, dtype: torch.dtype) -> bool | int | float:
    if mode == "prod":
        return 1
    if dtype.is_floating_point:
        return float("-inf") if mode == "amax" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if mode == "amax" else info.max


def _count_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype.is_floating_point else torch.int64


def _const(ops: Ops, value: bool | float, dtype: torch.dtype) -> Any:
    return ops.constant(float(value) if dtype.is_floating_point else int(value), dtype)


def _filled(ctx: LoweringContext, x: TensorValue, value: int, dtype: torch.dtype) -> Lazy:
    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return _const(ops, value, dtype)

    return lazy(x.size, dtype, ctx.device, load)


def _atomic(ctx: LoweringContext, s: _Spread, mode: str, include_self: bool) -> TensorValue:
    """sum / mean through `atomic_add` scatters, then one pointwise combine.

    Both fresh buffers are filled before either scatter, so the fills share one kernel and the two
    scatters (same index space) another.
    """
    total = _fresh_copy(ctx, s.x if include_self else _filled(ctx, s.x, 0, s.dtype), s.dtype)
    if mode == "sum" and include_self:
        _scatter_into(ctx, total, s.space, s.target, s.src, "atomic_add")
        return total
    cdt = _count_dtype(s.dtype)
    count = _fresh_copy(ctx, _filled(ctx, s.x, 0, cdt), cdt)

    def one(ops: Ops, idx: Sequence[Expr]) -> Any:
        return _const(ops, 1, cdt)

    _scatter_into(ctx, total, s.space, s.target, s.src, "atomic_add")
    _scatter_into(ctx, count, s.space, s.target, one, "atomic_add")
    return _combine(s, mode, include_self, total, count, total_has_self=include_self)


def _combine(
    s: _Spread,
    mode: str,
    include_self: bool,
    total: TensorValue,
    count: TensorValue,
    total_has_self: bool,
) -> Lazy:
    """The result from the scattered `total` and the number of contributions `count`."""
    x, dtype, cdt = s.x, s.dtype, count.dtype

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        acc = total.load(ops, idx)
        n = count.load(ops, idx)
        self_value = cast(ops, x.load(ops, idx), x.dtype, dtype)
        if include_self and not total_has_self:
            acc = _merge(ops, mode, self_value, acc)
        hit = ops.gt(n, _const(ops, 0, cdt))
        if mode == "mean":
            if include_self:
                n = ops.add(n, _const(ops, 1, cdt))
            n = ops.where(ops.gt(n, _const(ops, 0, cdt)), n, _const(ops, 1, cdt))
            acc = _divide(ops, acc, cast(ops, n, cdt, dtype), dtype)
        return acc if include_self else ops.where(hit, acc, self_value)

    return lazy(x.size, dtype, x.device, load, x, total, count)


def _merge(ops: Ops, mode: str, a: Any, b: Any) -> Any:
    if mode == "prod":
        return ops.mul(a, b)
    if mode == "amax":
        return ops.maximum(a, b)
    if mode == "amin":
        return ops.minimum(a, b)
    return ops.add(a, b)


def _divide(ops: Ops, a: Any, b: Any, dtype: torch.dtype) -> Any:
    return ops.truediv(a, b) if dtype.is_floating_point else ops.floordiv(a, b)


def _masked(ctx: LoweringContext, s: _Spread, mode: str, include_self: bool) -> Lazy:
    """prod / amax / amin as a reduction over the scatter dim with non-matching elements masked."""
    x, dim = s.x, s.dim
    narrow = [d for d in range(len(x.size)) if d != dim and s.space[d] != x.size[d]]
    work = sympy.sympify(sympy.Mul(*x.size) * s.space[dim])
    if narrow or not work.is_Integer or int(work) > MASKED_BUDGET:
        why = f"index narrower than self in dims {narrow}" if narrow else f"{work} element visits"
        raise Fallback(f"masked scatter reduction ({mode}): {why}")
    rtype, dtype = _MASKED[mode], s.dtype
    acc_dtype = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    graph = ctx.graph
    layouts = [
        Layout.contiguous(x.size, acc_dtype, x.device),
        Layout.contiguous(x.size, torch.int64, x.device),
    ]
    bufs = [graph.add_buffer("computed", lay) for lay in layouts]
    accs = {b: acc_name(b) for b in bufs}
    identity = _identity(mode, dtype)

    def body(ops: Ops, xo: Sequence[Expr], r: Sequence[Expr]) -> None:
        at = [*xo[:dim], r[0], *xo[dim + 1 :]]
        size = x.size[dim]
        pos = ops.indirect_indexing(s.index(ops, at), size, False, False)
        ops.check_bounds(pos, size, True, True)  # the symbol indexes no load: check explicitly
        hit = ops.eq(ops.index_expr(pos, torch.int64), ops.index_expr(xo[dim], torch.int64))
        value = cast(ops, s.src(ops, at), dtype, acc_dtype)
        kept = ops.where(hit, value, _const(ops, identity, acc_dtype))
        hits = ops.to_dtype(hit, torch.int64, src_dtype=torch.bool)
        reduced = ops.reduction(acc_dtype, acc_dtype, rtype, kept)
        counted = ops.reduction(torch.int64, torch.int64, "sum", hits)
        for b, lay, v in zip(bufs, layouts, (reduced, counted), strict=True):
            ops.store_reduction(accs[b], lay.index(xo), v)

    node = ComputeNode(
        graph.new_name("node"),
        "reduction",
        tuple(x.size),
        (s.space[dim],),
        body,
        tuple(bufs),
        accs,
        {bufs[0]: acc_dtype, bufs[1]: torch.int64},
    )
    graph.nodes.append(node)
    total, count = (StorageView(b, lay) for b, lay in zip(bufs, layouts, strict=True))
    return _combine(s, mode, include_self, converted(total, dtype), count, total_has_self=False)


def _lower(ctx: LoweringContext, s: _Spread, mode: str, include_self: bool) -> TensorValue:
    if mode not in _MODES:
        raise Fallback(f"reduce={mode!r}")
    if s.dtype == torch.bool or s.dtype.is_complex:
        raise Fallback(f"scatter reduction into {s.dtype}")
    if mode in _MASKED:
        return _masked(ctx, s, mode, include_self)
    return _atomic(ctx, s, mode, include_self)


def _index_loader(index: TensorValue, at: Callable[[Sequence[Expr]], list[Expr]]) -> Loader:
    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return cast(ops, index.load(ops, at(idx)), index.dtype, torch.int64)

    return load


def _src_loader(src: TensorValue, dtype: torch.dtype) -> Loader:
    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return cast(ops, src.load(ops, idx), src.dtype, dtype)

    return load


def _check(x: Any, index: Any, src: Any) -> None:
    if not (is_tensor(x) and is_tensor(index) and is_tensor(src)) or not x.size:
        raise Fallback("scatter reduction needs tensors of at least one dim")
    if index.dtype not in (torch.int64, torch.int32):
        raise Fallback(f"scatter index of dtype {index.dtype}")


def scatter_reduce(
    ctx: LoweringContext,
    x: TensorValue,
    dim: int,
    index: TensorValue,
    src: TensorValue,
    reduce: str,
    *,
    include_self: bool = True,
) -> TensorValue:
    """out = x with src[i] reduced into out[..index[i]..] along `dim` (every reduce mode)."""
    _check(x, index, src)
    dim = dim % len(x.size)
    s = _Spread(
        x,
        dim,
        tuple(index.size),
        _index_loader(index, list),
        _src_loader(src, ctx.out_dtype()),
        ctx.out_dtype(),
    )
    return _lower(ctx, s, reduce, include_self)


def index_reduce(
    ctx: LoweringContext,
    x: TensorValue,
    dim: int,
    index: TensorValue,
    source: TensorValue,
    reduce: str,
    *,
    include_self: bool = True,
) -> TensorValue:
    """out = x with source's slice i reduced into out's slice index[i] along `dim`."""
    _check(x, index, source)
    if len(index.size) != 1:
        raise Fallback("index_reduce index of more than one dim")
    dim = dim % len(x.size)

    def at(idx: Sequence[Expr]) -> list[Expr]:
        return [idx[dim]]

    dtype = ctx.out_dtype()
    s = _Spread(
        x, dim, tuple(source.size), _index_loader(index, at), _src_loader(source, dtype), dtype
    )
    return _lower(ctx, s, reduce, include_self)


def table() -> dict[str, LoweringFn]:
    """The scatter-reduction lowerings, by aten overload name."""
    return {
        "aten.scatter_reduce.two": scatter_reduce,
        "aten.index_reduce.default": index_reduce,
    }
