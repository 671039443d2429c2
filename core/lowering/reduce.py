"""Reduction lowerings: sum, mean, prod, amax/amin, max/min with indices, argmax/argmin,
var/std/var_mean (welford), any/all. Each reduction is a `ComputeNode` whose results are kernel
locals; pointwise producers are inlined into its body and consumers may fuse as epilogues.

A sum, product, max or min over a few elements (at most `UNROLL`, a constant count: the head
groups of grouped-query attention's backward, a dim of size 2) is a pointwise value instead,
the elements combined in order: a reduction loop's set-up and final fold cost more than the
work there."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.indexing import unflatten
from polyduct.ir import ComputeNode, Expr, Layout, Lazy, StorageView, TensorValue, acc_name
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.values import Ops, cast, lazy
from polyduct.ops import ReductionType

_ACC_UP = (torch.float16, torch.bfloat16)
UNROLL = 8  # most elements a reduction combines as a pointwise value (Inductor's threshold too)


def _dims(x: TensorValue, dims: Any) -> list[int]:
    n = len(x.size)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(n))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % n for d in dims}) if n else []


def _combine(
    n: int, dims: Sequence[int], keepdim: bool, xo: Sequence[Expr], r: Sequence[Expr]
) -> list[Expr]:
    """Input coordinates from output coordinates `xo` and reduction coordinates `r`."""
    idx: list[Expr] = []
    rit, xit = iter(r), iter(xo)
    for d in range(n):
        if d in dims:
            idx.append(next(rit))
            if keepdim:
                next(xit)
        else:
            idx.append(next(xit))
    return idx


def _reduced_size(x: TensorValue, dims: Sequence[int], keepdim: bool) -> list[Expr]:
    """The size of a reduction of `x` over `dims` (kept as 1s with `keepdim`)."""
    if keepdim:
        return [sympy.Integer(1) if i in dims else s for i, s in enumerate(x.size)]
    return [s for i, s in enumerate(x.size) if i not in dims]


def reduce_into(
    ctx: LoweringContext,
    x: TensorValue,
    dims: Any,
    keepdim: bool,
    rtype: ReductionType,
    src_dtype: torch.dtype,
    acc_dtype: torch.dtype,
    out_dtypes: Sequence[torch.dtype],
) -> list[StorageView]:
    """A reduction node over `dims` of `x` (read as `src_dtype`); one buffer per result."""
    d = _dims(x, dims)
    n = len(x.size)
    out_size = _reduced_size(x, d, keepdim)
    # a 0-d input reduces over one element: one reduction step, not an empty loop nest
    red = tuple(x.size[i] for i in d) or (sympy.Integer(1),)
    graph = ctx.graph
    layouts = [Layout.contiguous(out_size, dt, x.device) for dt in out_dtypes]
    bufs = [graph.add_buffer("computed", lay) for lay in layouts]
    accs = {b: acc_name(b) for b in bufs}
    xdtype, load = x.dtype, x.load

    def body(ops: Ops, xo: Sequence[Expr], r: Sequence[Expr]) -> None:
        v = cast(ops, load(ops, _combine(n, d, keepdim, xo, r)), xdtype, src_dtype)
        res = ops.reduction(acc_dtype, src_dtype, rtype, v)
        results = res if isinstance(res, tuple) else (res,)
        for b, lay, value in zip(bufs, layouts, results, strict=True):
            ops.store_reduction(accs[b], lay.index(xo), value)

    node = ComputeNode(
        graph.new_name("node"),
        "reduction",
        tuple(out_size),
        red,
        body,
        tuple(bufs),
        accs,
        {b: acc_dtype if rtype not in ("argmax", "argmin") else torch.int64 for b in bufs},
    )
    graph.nodes.append(node)
    return [StorageView(b, lay) for b, lay in zip(bufs, layouts, strict=True)]


def _unrolled(
    x: TensorValue, dims: Any, keepdim: bool, rtype: ReductionType, src: torch.dtype,
    out: torch.dtype,
) -> Lazy | None:
    """The reduction as a pointwise value combining its few elements in order, or None when it
    reduces more than `UNROLL` elements (or a count known only at run time), or when inlining
    its operand that many times would cost too much."""
    d = _dims(x, dims)
    count = _count(x, dims)
    if not d or not count.is_Integer or not 2 <= int(count) <= UNROLL:
        return None
    if rtype in ("max", "min") and x.dtype == torch.bool:
        return None
    if int(count) * (x.cost if isinstance(x, Lazy) else 1) > 2 * UNROLL:
        return None
    n, acc = len(x.size), _acc(src)
    steps = list(itertools.product(*(range(int(x.size[i])) for i in d)))  # row-major order
    combine = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}[rtype]

    def load(ops: Ops, xo: Sequence[Expr]) -> Any:
        total = ops.constant(0, acc) if rtype == "sum" else None
        for r in steps:
            v = x.load(ops, _combine(n, d, keepdim, xo, [sympy.Integer(i) for i in r]))
            v = cast(ops, cast(ops, v, x.dtype, src), src, acc)
            total = v if total is None else getattr(ops, combine)(total, v)
        return cast(ops, total, acc, out)

    return lazy(_reduced_size(x, d, keepdim), out, x.device, load, *[x] * int(count))


def _acc(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _ACC_UP else dtype


def _simple(rtype: ReductionType) -> LoweringFn:
    def lower(
        ctx: LoweringContext, x: TensorValue, dims: Any = None, keepdim: bool = False, **kwargs: Any
    ) -> Any:
        out = ctx.out_dtype()
        src = out if rtype in ("sum", "prod") else x.dtype
        unrolled = _unrolled(x, dims, keepdim, rtype, src, out)
        if unrolled is not None:
            return unrolled
        (buf,) = reduce_into(ctx, x, dims, keepdim, rtype, src, _acc(src), [out])
        return buf

    lower.__name__ = f"lower_{rtype}"
    return lower


def _sum_all(ctx: LoweringContext, x: TensorValue, **kwargs: Any) -> Any:
    return _simple("sum")(ctx, x, None, False)


def _arg(rtype: ReductionType) -> LoweringFn:
    def lower(ctx: LoweringContext, x: TensorValue, dim: Any = None, keepdim: bool = False) -> Any:
        n = len(x.size)
        if dim is None and n > 1:  # over all dims: a flat position in the row-major order
            (flat,) = reduce_into(
                ctx, _flattened(x), 0, False, rtype, x.dtype, x.dtype, [torch.int64]
            )
            if not keepdim:
                return flat
            ones = (sympy.Integer(1),) * n
            return StorageView(
                flat.buffer, Layout(ones, ones, flat.layout.offset, torch.int64, x.device)
            )
        (buf,) = reduce_into(ctx, x, dim, keepdim, rtype, x.dtype, x.dtype, [torch.int64])
        return buf

    return lower


def _flattened(x: TensorValue) -> TensorValue:
    """`x` as one row-major dim (a re-indexing value, no copy)."""
    size = x.size

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return x.load(ops, list(unflatten(idx[0], size)))

    return lazy((sympy.Mul(*size),), x.dtype, x.device, load, x)


def _max_min(rtype: ReductionType) -> LoweringFn:
    def lower(ctx: LoweringContext, x: TensorValue, dim: int, keepdim: bool = False) -> Any:
        (values,) = reduce_into(ctx, x, dim, keepdim, rtype, x.dtype, x.dtype, [x.dtype])
        (index,) = reduce_into(
            ctx,
            x,
            dim,
            keepdim,
            f"arg{rtype}",  # type: ignore[arg-type]
            x.dtype,
            x.dtype,
            [torch.int64],
        )
        return values, index

    return lower


def _max_all(rtype: ReductionType) -> LoweringFn:
    def lower(ctx: LoweringContext, x: TensorValue) -> Any:
        return _simple(rtype)(ctx, x, None, False)

    return lower


def _mean(
    ctx: LoweringContext, x: TensorValue, dims: Any = None, keepdim: bool = False, dtype: Any = None
) -> Any:
    out = ctx.out_dtype()
    if not out.is_floating_point:
        raise Fallback("mean of a non-float result")
    total: TensorValue | None = _unrolled(x, dims, keepdim, "sum", _acc(out), _acc(out))
    if total is None:
        (total,) = reduce_into(ctx, x, dims, keepdim, "sum", _acc(out), _acc(out), [_acc(out)])
    count = _count(x, dims)
    return _scale(ctx, total, count, out)


def _count(x: TensorValue, dims: Any) -> Expr:
    d = _dims(x, dims)
    return sympy.Mul(*(x.size[i] for i in d)) if d else sympy.Integer(1)


def _divisor(ops: Ops, count: Expr, dtype: torch.dtype) -> Any:
    if count.is_number:
        return ops.constant(float(count), dtype)
    return ops.to_dtype(ops.index_expr(count, torch.int64), dtype, src_dtype=torch.int64)


def _scale(ctx: LoweringContext, v: TensorValue, count: Expr, out: torch.dtype) -> Any:
    src = v.dtype

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        value = ops.truediv(v.load(ops, idx), _divisor(ops, count, src))
        return cast(ops, value, src, out)

    return lazy(v.size, out, v.device, load, v)


def _welford(
    ctx: LoweringContext,
    x: TensorValue,
    dims: Any,
    correction: Any,
    keepdim: bool,
    root: bool = False,
) -> tuple[Any, Any]:
    """(variance, mean) of `x` over `dims`, in `x`'s dtype; with `root`, the standard deviation
    in place of the variance, its square root taken at the accumulator's precision (a float16
    variance past 65504 is inf where its root is not)."""
    if not x.dtype.is_floating_point:
        raise Fallback("variance of a non-float tensor")
    acc = _acc(x.dtype)
    mean, m2, _ = reduce_into(ctx, x, dims, keepdim, "welford_reduce", acc, acc, [acc] * 3)
    corr = 1 if correction is None else correction
    denom = sympy.Max(_count(x, dims) - sympy.sympify(corr), 0)
    out = x.dtype

    def load_var(ops: Ops, idx: Sequence[Expr]) -> Any:
        value = ops.truediv(m2.load(ops, idx), _divisor(ops, denom, acc))
        return cast(ops, ops.sqrt(value) if root else value, acc, out)

    var = lazy(m2.size, out, x.device, load_var, m2)
    count = _count(x, dims)
    if count.is_number and count != 0:
        return var, (_scale(ctx, mean, sympy.Integer(1), out) if out != acc else mean)
    return var, _nan_if_empty(mean, count, out)


def _nan_if_empty(mean: TensorValue, count: Expr, out: torch.dtype) -> Any:
    """The mean of no elements is NaN (Welford's running mean starts, and stays, at 0)."""
    src = mean.dtype

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        empty = ops.eq(ops.index_expr(count, torch.int64), ops.constant(0, torch.int64))
        value = ops.where(empty, ops.constant(float("nan"), src), mean.load(ops, idx))
        return cast(ops, value, src, out)

    return lazy(mean.size, out, mean.device, load, mean)


def _var_mean(
    ctx: LoweringContext,
    x: TensorValue,
    dims: Any = None,
    *,
    correction: Any = None,
    keepdim: bool = False,
) -> Any:
    var, mean = _welford(ctx, x, dims, correction, keepdim)
    origin = ctx.node.meta.get("original_aten")
    if origin is not None and origin.overloadpacket is not torch.ops.aten.var_mean:
        # a normalisation's statistics (layer, group, batch norm decompose to var_mean): where
        # the mean differs, the variance is NaN and so is everything normalised by it
        return var, mean
    return var, _welford_mean_of_inf(ctx, x, dims, keepdim, mean)


def _welford_mean_of_inf(
    ctx: LoweringContext, x: TensorValue, dims: Any, keepdim: bool, mean: TensorValue
) -> Any:
    """var_mean's mean where a row holds a non-finite element, as eager's element-by-element
    Welford update gives it: an infinity makes the running mean infinite and any element after it
    makes it NaN (inf - inf), so the mean is infinite only where the row's sole non-finite element
    is its last (every reduced index at its maximum: last in memory for any layout), and NaN
    wherever else one is. A backend's own order (sum / count, interleaved vector lanes, a
    tree across threads) need not agree, so one integer sum beside the Welford pass classifies
    each row: a non-finite element counts 4, the last element only 1 if +inf or 2 if -inf."""
    d = _dims(x, dims)
    src, size = x.dtype, x.size
    i64 = torch.int64

    def flag(ops: Ops, idx: Sequence[Expr]) -> Any:
        v = x.load(ops, idx)
        after = sympy.Add(*(size[i] - 1 - idx[i] for i in d)) if d else sympy.Integer(0)
        last = ops.eq(ops.index_expr(after, i64), ops.constant(0, i64))
        pos, neg = (
            ops.eq(v, ops.constant(float("inf"), src)),
            ops.eq(v, ops.constant(float("-inf"), src)),
        )
        weight = ops.where(
            ops.logical_and(last, pos),
            ops.constant(1, i64),
            ops.where(ops.logical_and(last, neg), ops.constant(2, i64), ops.constant(4, i64)),
        )
        finite = ops.logical_not(ops.logical_or(ops.isinf(v), ops.isnan(v)))
        return ops.where(finite, ops.constant(0, i64), weight)

    flags = lazy(size, i64, x.device, flag, x)
    (kind,) = reduce_into(ctx, flags, dims, keepdim, "sum", i64, i64, [i64])
    out = mean.dtype

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        k = kind.load(ops, idx)

        def const(value: float) -> Any:
            return ops.constant(value, out)

        def when(n: int, then: Any, other: Any) -> Any:
            return ops.where(ops.eq(k, ops.constant(n, i64)), then, other)

        nonfinite = when(1, const(float("inf")), when(2, const(float("-inf")), const(float("nan"))))
        return when(0, mean.load(ops, idx), nonfinite)

    return lazy(mean.size, out, mean.device, load, mean)


def _var(
    ctx: LoweringContext,
    x: TensorValue,
    dims: Any = None,
    *,
    correction: Any = None,
    keepdim: bool = False,
) -> Any:
    return _welford(ctx, x, dims, correction, keepdim)[0]


def _std(
    ctx: LoweringContext,
    x: TensorValue,
    dims: Any = None,
    *,
    correction: Any = None,
    keepdim: bool = False,
) -> Any:
    return _welford(ctx, x, dims, correction, keepdim, root=True)[0]


def _any(ctx: LoweringContext, x: TensorValue, dims: Any = None, keepdim: bool = False) -> Any:
    """any(x) as bool, cast to the result dtype (uint8 for a uint8 input, as eager)."""
    (anyb,) = reduce_into(ctx, x, dims, keepdim, "any", torch.bool, torch.bool, [torch.bool])
    out = ctx.out_dtype()
    return anyb if out == torch.bool else _as_dtype(anyb, out, invert=False)


def _all(ctx: LoweringContext, x: TensorValue, dims: Any = None, keepdim: bool = False) -> Any:
    """all(x) = not any(not x), cast to the result dtype (uint8 for a uint8 input, as eager)."""

    def load_not(ops: Ops, idx: Sequence[Expr]) -> Any:
        return ops.logical_not(x.load(ops, idx))

    negated = lazy(x.size, torch.bool, x.device, load_not, x)
    (anyb,) = reduce_into(ctx, negated, dims, keepdim, "any", torch.bool, torch.bool, [torch.bool])
    return _as_dtype(anyb, ctx.out_dtype(), invert=True)


def _as_dtype(flag: TensorValue, out: torch.dtype, invert: bool) -> Any:
    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        value = flag.load(ops, idx)
        return cast(ops, ops.logical_not(value) if invert else value, torch.bool, out)

    return lazy(flag.size, out, flag.device, load, flag)


def table() -> dict[str, LoweringFn]:
    """The reduction lowerings, by aten overload name."""
    t: dict[str, LoweringFn] = {
        "aten.sum.dim_IntList": _simple("sum"),
        "aten.sum.default": _sum_all,
        "aten.prod.dim_int": _simple("prod"),
        "aten.amax.default": _simple("max"),
        "aten.amin.default": _simple("min"),
        "aten.any.dim": _any,
        "aten.any.dims": _any,
        "aten.any.default": _any,
        "aten.all.dim": _all,
        "aten.all.dims": _all,
        "aten.all.default": _all,
        "aten.argmax.default": _arg("argmax"),
        "aten.argmin.default": _arg("argmin"),
        "aten.max.dim": _max_min("max"),
        "aten.min.dim": _max_min("min"),
        "aten.max.default": _max_all("max"),
        "aten.min.default": _max_all("min"),
        "aten.mean.dim": _mean,
        "aten.mean.default": _mean,
        "aten.var_mean.correction": _var_mean,
        "aten.var.correction": _var,
        "aten.std.correction": _std,
    }
    return t
