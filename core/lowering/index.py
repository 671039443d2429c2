"""Indexing lowerings: gather, index_select, index.Tensor (indirect loads with bounds checks) and
searchsorted / bucketize. All are pointwise `Lazy` values; an index value becomes an index symbol
through `ops.indirect_indexing`, which wraps negatives and raises `KernelIndexError` when out of
range (docs/conventions.md, "Indexing")."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.handlers.default import DefaultHandler
from polyduct.ir import Expr, Lazy, StorageView, TensorValue
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.values import (
    BROADCAST_REALIZE_COST,
    Ops,
    broadcast_index,
    cost,
    is_tensor,
    lazy,
)

GATHER_COST = BROADCAST_REALIZE_COST
"""What a checked indirect load adds to a value's cost: a bounds check per element that keeps its
loop scalar. A gathered value broadcast into a larger result is then computed into memory first,
as a costly expression is (Swin's relative position bias, gathered from its table per batch and
head inside the attention softmax, was a fifth of the model's step; T5's bucketed bias too)."""


def _gathered(ctx: LoweringContext, load: Any, x: TensorValue,
              indices: Sequence[tuple[TensorValue, Expr]]) -> Lazy:
    """A pointwise value reading `x` at `indices` (each an index tensor and the size it indexes),
    costed with `GATHER_COST` for each index that is not a provably in-range affine one."""
    checked = sum(_direct_index(i, size) is None for i, size in indices)
    extra = GATHER_COST * checked
    return Lazy(ctx.out_size(), x.dtype, ctx.device, load,
                cost(x, *(i for i, _ in indices)) + extra)


def _indirect(ops: Ops, index: TensorValue, idx: Sequence[Expr], size: Expr) -> Expr:
    direct = _direct_index(index, size)
    if direct is not None:  # an arange-like index: address memory with it, nothing to check
        expr, variables = direct
        return expr.xreplace(dict(zip(variables, idx, strict=True)))
    return ops.indirect_indexing(index.load(ops, idx), size, True, True)


class _NotAffine(Exception):
    pass


class _Affine(DefaultHandler[sympy.Expr]):
    """Evaluates an index value symbolically when it is an integer affine function of its own
    coordinates (`arange`, `arange + k`, broadcast and viewed): anything else is not."""

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise _NotAffine(name)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> sympy.Expr:
        return sympy.sympify(expr)

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> sympy.Expr:
        if dtype not in (torch.int32, torch.int64):
            raise _NotAffine("value_expr")
        return sympy.sympify(expr)

    def constant(self, value: bool | float, dtype: torch.dtype) -> sympy.Expr:
        if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
            raise _NotAffine("constant")
        return sympy.Integer(int(value))

    def to_dtype(self, x: sympy.Expr, dtype: torch.dtype, *args: Any, **kwargs: Any) -> Any:
        if dtype not in (torch.int32, torch.int64):
            raise _NotAffine("to_dtype")
        return x

    def add(self, x0: sympy.Expr, x1: sympy.Expr) -> sympy.Expr:
        return sympy.expand(x0 + x1)

    def sub(self, x0: sympy.Expr, x1: sympy.Expr) -> sympy.Expr:
        return sympy.expand(x0 - x1)

    def mul(self, x0: sympy.Expr, x1: sympy.Expr) -> sympy.Expr:
        product = sympy.expand(x0 * x1)
        if not (x0.is_Integer or x1.is_Integer):
            raise _NotAffine("mul")
        return product


# memo of a pure function of its (immutable) arguments: not process state
@functools.lru_cache(maxsize=1024)
def _direct_index(index: TensorValue, size: Expr) -> tuple[Expr, tuple[sympy.Symbol, ...]] | None:
    """(expression over fresh coordinates, those coordinates) of an index tensor whose values are
    an affine function of its coordinates, provably within [0, size): read at them, it needs no
    indirect load and no bounds check (transformers' masks index a padding mask by `arange`)."""
    if not isinstance(index, Lazy) or index.dtype not in (torch.int32, torch.int64):
        return None
    variables = tuple(sympy.Symbol(f"pd_affine{i}", integer=True) for i in range(len(index.size)))
    try:
        expr = sympy.expand(index.fn(_Affine(), variables))
    except _NotAffine:
        return None
    low, high = expr, expr
    for var, extent in zip(variables, index.size, strict=True):
        coeff = expr.coeff(var)
        if not coeff.is_Integer:
            return None
        low = low.subs(var, 0 if coeff >= 0 else extent - 1)
        high = high.subs(var, extent - 1 if coeff >= 0 else 0)
    if expr.free_symbols - set(variables) or not low.is_Integer or low < 0:
        return None
    room = sympy.expand(size - 1 - high)
    if not (room.is_Integer and room >= 0):
        return None
    return expr, variables


def gather(
    ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue, sparse_grad: bool = False
) -> Lazy:
    """out[i][j] = x[i][index[i][j]] along `dim`."""
    n = max(len(x.size), 1)
    dim = dim % n
    if not x.size:
        raise Fallback("gather of a 0-d tensor")

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        coords = list(idx)
        coords[dim] = _indirect(ops, index, idx, x.size[dim])
        return x.load(ops, coords)

    return _gathered(ctx, load, x, [(index, x.size[dim])])


def index_select(ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue) -> Lazy:
    """out = x with dim `dim` picked at the positions of 1-d `index`."""
    if not x.size:
        raise Fallback("index_select of a 0-d tensor")
    dim = dim % len(x.size)
    scalar = not index.size

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        coords = list(idx)
        coords[dim] = _indirect(ops, index, [] if scalar else [idx[dim]], x.size[dim])
        return x.load(ops, coords)

    return _gathered(ctx, load, x, [(index, x.size[dim])])


def index_tensor(ctx: LoweringContext, x: TensorValue, indices: Sequence[Any]) -> Lazy:
    """Advanced indexing with integer index tensors (None for a kept dim)."""
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        raise Fallback("boolean mask index (data-dependent shape)")
    if not all(i is None or is_tensor(i) for i in indices):
        raise Fallback("non-tensor index")
    indices = [*indices, *([None] * (len(x.size) - len(indices)))]
    picked = [d for d, i in enumerate(indices) if i is not None]
    bshape = _broadcast([indices[d].size for d in picked])
    # the broadcast index dims go in place of the indexed dims when those are adjacent, else first
    adjacent = picked == list(range(picked[0], picked[-1] + 1))
    first = picked[0] if adjacent else 0
    nb = len(bshape)

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        bidx = idx[first : first + nb]
        rest = [*idx[:first], *idx[first + nb :]]
        coords: list[Expr] = []
        it = iter(rest)
        for d in range(len(x.size)):
            if indices[d] is None:
                coords.append(next(it))
                continue
            ix = indices[d]
            coords.append(_indirect(ops, ix, broadcast_index(ix.size, bshape, bidx), x.size[d]))
        return x.load(ops, coords)

    return _gathered(ctx, load, x, [(indices[d], x.size[d]) for d in picked])


def _broadcast(sizes: Sequence[Sequence[Expr]]) -> tuple[Expr, ...]:
    n = max(len(s) for s in sizes)
    out: list[Expr] = [sympy.Integer(1)] * n
    for s in sizes:
        for k, v in enumerate(s):
            pos = n - len(s) + k
            out[pos] = v if out[pos] == 1 else out[pos]
    return tuple(out)


def searchsorted(
    ctx: LoweringContext,
    boundaries: TensorValue,
    values: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
) -> Lazy:
    """Position of each value in the (last dim) rows of `boundaries`."""
    if not is_tensor(values) or not isinstance(boundaries, StorageView):
        raise Fallback("searchsorted needs realised boundaries and a tensor of values")
    if sorter is not None or len(boundaries.size) != 1:
        raise Fallback("searchsorted with a sorter or batched boundaries")
    return _bucketize(ctx, values, boundaries, right or side == "right", out_int32)


def bucketize(
    ctx: LoweringContext,
    values: TensorValue,
    boundaries: TensorValue,
    *,
    out_int32: bool = False,
    right: bool = False,
) -> Lazy:
    if not isinstance(boundaries, StorageView) or len(boundaries.size) != 1:
        raise Fallback("bucketize needs realised 1-d boundaries")
    return _bucketize(ctx, values, boundaries, right, out_int32)


def _bucketize(
    ctx: LoweringContext, values: TensorValue, bounds: StorageView, right: bool, out_int32: bool
) -> Lazy:
    dtype = torch.int32 if out_int32 else torch.int64
    lay = bounds.layout
    if lay.offset != 0:
        raise Fallback("boundaries with a storage offset")
    length = lay.size[0]
    spec = (bounds.buffer, length, length * lay.stride[0], lay.stride[0])

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        v = values.load(ops, idx)
        start = ops.index_expr(sympy.Integer(0), dtype)
        found = ops.bucketize(v, spec, start, dtype, right)
        if not values.dtype.is_floating_point:
            return found
        # eager sorts NaN after everything: its position is the row length
        return ops.where(ops.isnan(v), ops.index_expr(length, dtype), found)

    return lazy(ctx.out_size(), dtype, ctx.device, load, values)


def table() -> dict[str, LoweringFn]:
    """The indexing lowerings, by aten overload name."""
    return {
        "aten.gather.default": gather,
        "aten.index_select.default": index_select,
        "aten.index.Tensor": index_tensor,
        "aten.searchsorted.Tensor": searchsorted,
        "aten.bucketize.Tensor": bucketize,
    }
