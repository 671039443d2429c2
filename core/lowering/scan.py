"""Scan and sort lowerings: cumsum, cumprod, logcumsumexp, cummax, cummin (scan stages), sort and topk (sort
stages carrying the key and its position). The scanned / sorted dim is the node's reduction range,
every other dim its outer range; results are stored at the input's coordinates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy
import torch

from polyduct.ir import ComputeNode, Expr, Layout, StorageView, TensorValue
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.values import Ops, cast, lazy

Combine = Callable[[Ops, tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]
_UPCAST = (torch.float16, torch.bfloat16)


def _coords(dim: int, x: Sequence[Expr], r: Sequence[Expr]) -> list[Expr]:
    """Full coordinates from the outer ones (every dim but `dim`) and the scanned one."""
    return [*x[:dim], r[0], *x[dim:]]


def _split(x: TensorValue, dim: int) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
    outer = tuple(s for i, s in enumerate(x.size) if i != dim)
    return outer, (x.size[dim],)


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _UPCAST else dtype


def _running(dtype: torch.dtype, device: str) -> torch.dtype:
    """What a running sum or product of `dtype` accumulates in: eager's CPU kernel keeps a
    float32 one in float64 (ATen's CPU accumulate type), so `[1e4, ..., -1e4, x]` ends at x
    exactly where float32 keeps 1e-3 of its error (cpp seed 10709, program 6391); on CUDA,
    float32."""
    return torch.float64 if dtype == torch.float32 and device == "cpu" else _compute(dtype)


def _scan(
    ctx: LoweringContext, x: TensorValue, dim: int, combine: Combine, out: torch.dtype,
    acc: torch.dtype | None = None,
) -> StorageView:
    if not x.size:
        x_size: tuple[Expr, ...] = (sympy.Integer(1),)
        dim = 0
    else:
        x_size, dim = x.size, dim % len(x.size)
    acc = acc or _compute(out)
    layout = Layout.contiguous(x_size, out, x.device)
    graph = ctx.graph
    buf = graph.add_buffer("computed", layout)
    src_dtype, load = x.dtype, x.load
    scalar = not x.size

    def body(ops: Ops, xo: Sequence[Expr], r: Sequence[Expr]) -> None:
        idx = _coords(dim, xo, r)
        v = cast(ops, load(ops, [] if scalar else idx), src_dtype, acc)

        def fn(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
            return combine(ops, a, b)

        (res,) = ops.scan((acc,), fn, (v,))
        ops.store(buf, layout.index(idx), res)

    outer = tuple(s for i, s in enumerate(x_size) if i != dim)
    node = ComputeNode(graph.new_name("node"), "scan", outer, (x_size[dim],), body, (buf,))
    graph.nodes.append(node)
    if scalar:
        return StorageView(buf, Layout.contiguous((), out, x.device))
    return StorageView(buf, layout)


def _add(ops: Ops, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    return (ops.add(a[0], b[0]),)


def _mul(ops: Ops, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    return (ops.mul(a[0], b[0]),)


def _logaddexp(ops: Ops, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    lo, hi = ops.minimum(a[0], b[0]), ops.maximum(a[0], b[0])
    # equal infinities would give inf - inf = NaN: the sum is that infinity (as eager's helper)
    usual = ops.logical_or(ops.ne(lo, hi), ops.logical_not(ops.isinf(lo)))
    return (ops.where(usual, ops.add(hi, ops.log1p(ops.exp(ops.sub(lo, hi)))), hi),)


def _plus_zero(x: TensorValue, out: torch.dtype) -> TensorValue:
    """`x` in `out`, plus 0.0: a scan takes its first element as it is, where eager's starts
    from an identity (cumsum 0, logcumsumexp -inf) and so turns a first -0 into +0."""

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return ops.add(cast(ops, x.load(ops, idx), x.dtype, out), ops.constant(0.0, out))

    return lazy(x.size, out, x.device, load, x)


def cumsum(ctx: LoweringContext, x: TensorValue, dim: int, dtype: Any = None) -> StorageView:
    # eager's running sum starts from +0: cumsum of [-0, -0] is [+0, +0] (halide seed 9103,
    # program 2808, on every backend)
    out = ctx.out_dtype()
    source = _plus_zero(x, out) if out.is_floating_point else x
    return _scan(ctx, source, dim, _add, out, _running(out, ctx.device))


def cumprod(ctx: LoweringContext, x: TensorValue, dim: int, dtype: Any = None) -> StorageView:
    out = ctx.out_dtype()
    return _scan(ctx, x, dim, _mul, out, _running(out, ctx.device))


def logcumsumexp(ctx: LoweringContext, x: TensorValue, dim: int) -> StorageView:
    out = ctx.out_dtype()
    if not out.is_floating_point:
        raise Fallback("logcumsumexp of a non-float tensor")

    # eager starts from -inf: the first result is logaddexp(-inf, x) = x + 0.0, +0 for -0
    return _scan(ctx, _plus_zero(x, out), dim, _logaddexp, out)


def _cum_extreme(
    ctx: LoweringContext, x: TensorValue, dim: int, rtype: str
) -> tuple[StorageView, StorageView]:
    """cummax / cummin: the running extreme and the position it was last taken at.

    As ATen: a later element is taken when it is >= (cummin: <=) the running one or NaN, so
    ties and NaNs name their last position, and a NaN stays once reached. The combine is
    associative (NaN above every value, later positions win ties), as a parallel scan needs.
    """
    if not x.size or x.dtype == torch.bool:
        raise Fallback(f"{rtype} of a 0-d or bool tensor")
    dim = dim % len(x.size)
    graph = ctx.graph
    key = _compute(x.dtype)
    layouts = (
        Layout.contiguous(x.size, x.dtype, x.device),
        Layout.contiguous(x.size, torch.int64, x.device),
    )
    values, positions = (graph.add_buffer("computed", lay) for lay in layouts)
    src_dtype, load, floating = x.dtype, x.load, x.dtype.is_floating_point
    better = "ge" if rtype == "cummax" else "le"

    def body(ops: Ops, xo: Sequence[Expr], r: Sequence[Expr]) -> None:
        idx = _coords(dim, xo, r)
        v = cast(ops, load(ops, idx), src_dtype, key)
        pos = ops.index_expr(r[0], torch.int64)

        def fn(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
            take = getattr(ops, better)(b[0], a[0])
            if floating:
                take = ops.logical_or(take, ops.isnan(b[0]))
            return ops.where(take, b[0], a[0]), ops.where(take, b[1], a[1])

        sv, si = ops.scan((key, torch.int64), fn, (v, pos))
        ops.store(values, layouts[0].index(idx), sv)
        ops.store(positions, layouts[1].index(idx), si)

    outer, red = _split(x, dim)
    node = ComputeNode(graph.new_name("node"), "scan", outer, red, body, (values, positions))
    graph.nodes.append(node)
    return StorageView(values, layouts[0]), StorageView(positions, layouts[1])


def cummax(ctx: LoweringContext, x: TensorValue, dim: int) -> tuple[StorageView, StorageView]:
    return _cum_extreme(ctx, x, dim, "cummax")


def cummin(ctx: LoweringContext, x: TensorValue, dim: int) -> tuple[StorageView, StorageView]:
    return _cum_extreme(ctx, x, dim, "cummin")


def _sort(
    ctx: LoweringContext, x: TensorValue, dim: int, descending: bool, stable: bool
) -> tuple[StorageView, StorageView]:
    """Values and int64 positions of `x` sorted along `dim` (full length)."""
    if not x.size:
        raise Fallback("sort of a 0-d tensor")
    dim = dim % len(x.size)
    if (why := library_sort_reason(x.size[dim], x.device, ctx.sort_limits)) is not None:
        raise Fallback(why)
    graph = ctx.graph
    key = _compute(x.dtype)
    layouts = (
        Layout.contiguous(x.size, x.dtype, x.device),
        Layout.contiguous(x.size, torch.int64, x.device),
    )
    values, positions = (graph.add_buffer("computed", lay) for lay in layouts)
    src_dtype, load = x.dtype, x.load

    def body(ops: Ops, xo: Sequence[Expr], r: Sequence[Expr]) -> None:
        idx = _coords(dim, xo, r)
        v = cast(ops, load(ops, idx), src_dtype, key)
        pos = ops.index_expr(r[0], torch.int64)
        sv, si = ops.sort((key, torch.int64), (v, pos), stable, descending)
        ops.store(values, layouts[0].index(idx), sv)
        ops.store(positions, layouts[1].index(idx), si)

    outer, red = _split(x, dim)
    node = ComputeNode(graph.new_name("node"), "sort", outer, red, body, (values, positions))
    graph.nodes.append(node)
    return StorageView(values, layouts[0]), StorageView(positions, layouts[1])


def library_sort_reason(length: Expr, device: str, limits: Mapping[str, int]) -> str | None:
    """Why a sort along a dim of `length` on `device` is a library call, or None to generate it.

    `limits` is the kernel backend's `caps.sort_limits`: a generated sort network grows (and its
    compile time with it, minutes on CUDA past a few hundred elements) with the length.
    """
    limit = limits.get(device.split(":")[0])
    if limit is None:
        return None
    if not length.is_number:
        return f"sort along a dim of symbolic length on {device}: library call"
    if int(length) > limit:
        return (
            f"sort along a dim of {int(length)} elements on {device} (generated sorts up to "
            f"{limit}, past which they compile slowly): library call"
        )
    return None


def sort(
    ctx: LoweringContext, x: TensorValue, dim: int = -1, descending: bool = False
) -> tuple[StorageView, StorageView]:
    return _sort(ctx, x, dim, descending, stable=False)


def sort_stable(
    ctx: LoweringContext,
    x: TensorValue,
    *,
    stable: bool | None = None,
    dim: int = -1,
    descending: bool = False,
) -> tuple[StorageView, StorageView]:
    return _sort(ctx, x, dim, descending, stable=bool(stable))


def topk(
    ctx: LoweringContext,
    x: TensorValue,
    k: Any,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
) -> tuple[StorageView, StorageView]:
    """The first `k` of a stable sort (NaN counts as largest, as in eager), as views."""
    if not x.size:
        raise Fallback("topk of a 0-d tensor")
    dim = dim % len(x.size)
    full = _sort(ctx, x, dim, descending=largest, stable=True)
    return tuple(_first(view, dim, sympy.sympify(k)) for view in full)  # type: ignore[return-value]


def _first(view: StorageView, dim: int, k: Expr) -> StorageView:
    lay = view.layout
    size = tuple(k if i == dim else s for i, s in enumerate(lay.size))
    return StorageView(view.buffer, Layout(size, lay.stride, lay.offset, lay.dtype, lay.device))


def table() -> dict[str, LoweringFn]:
    """The scan and sort lowerings, by aten overload name."""
    return {
        "aten.cumsum.default": cumsum,
        "aten.cumprod.default": cumprod,
        "aten.logcumsumexp.default": logcumsumexp,
        "aten.cummax.default": cummax,
        "aten.cummin.default": cummin,
        "aten.sort.default": sort,
        "aten.sort.stable": sort_stable,
        "aten.topk.default": topk,
    }
