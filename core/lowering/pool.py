"""Pooling lowerings: max_pool2d_with_indices and avg_pool2d as pointwise values over an
unrolled window.

Each output element compares the elements of its window in row-major order, exactly as ATen's
kernels do: the running maximum starts at the dtype's lowest value and the index at the window's
first in-bounds element, and an element is taken when it is greater or NaN (so NaN propagates
and the index names the last NaN; ties keep the first). Padding and `ceil_mode` windows read
their out-of-bounds elements at the nearest edge and select them away (no masked loads, so loops
stay SIMD). The value fuses into its producer's and consumer's kernels (a CNN's relu + pool is
one kernel after the convolution).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.ir import Expr, Lazy, TensorValue
from polyduct.lowering import layouts
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.values import Ops, cast, is_tensor, lazy

MAX_WINDOW = 64
"""Largest window (elements) unrolled into one expression; larger pools run as extern calls."""


def _pair(value: Any, default: Sequence[int]) -> tuple[int, int]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        items = list(default)
    if len(items) == 1:
        items = items * 2
    if len(items) != 2 or not all(isinstance(v, int) for v in items):
        raise Fallback(f"pool parameter {value!r}")
    return items[0], items[1]


def _lowest(dtype: torch.dtype) -> float | int:
    if dtype.is_floating_point:
        return float("-inf")
    return int(torch.iinfo(dtype).min)


def max_pool2d_with_indices(
    ctx: LoweringContext,
    x: TensorValue,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> tuple[Lazy, Lazy]:
    """(max over each window, flat index of it within the input plane)."""
    if not is_tensor(x) or len(x.size) not in (3, 4) or x.dtype == torch.bool:
        raise Fallback("max_pool2d of a 3-d or 4-d numeric tensor only")
    kh, kw = _pair(kernel_size, ())
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, ())
    dh, dw = _pair(dilation, ())
    if kh * kw > MAX_WINDOW:
        raise Fallback(f"max_pool2d window of {kh * kw} elements (over {MAX_WINDOW})")
    x = _window_input(ctx, x, kh * kw)
    height, width = x.size[-2], x.size[-1]
    masked = bool(ph or pw or ceil_mode)
    dtype, out = x.dtype, ctx.out_size(0)
    lowest = _lowest(dtype)
    offsets = [(i * dh, j * dw) for i in range(kh) for j in range(kw)]

    def cells_of(idx: Sequence[Expr]) -> tuple[list[Expr], list[tuple[Expr, Expr]]]:
        """The leading coordinates of output `idx`, and its window's (row, column) cells."""
        top, left = idx[-2] * sh - ph, idx[-1] * sw - pw
        return list(idx[:-2]), [(top + di, left + dj) for di, dj in offsets]

    def window(ops: Ops, idx: Sequence[Expr]) -> tuple[Any, Any]:
        lead, cells = cells_of(idx)
        flats = [ops.index_expr(ih * width + iw, torch.int64) for ih, iw in cells]
        valids = [_inside(ops, ih, iw, height, width) if masked else None for ih, iw in cells]
        where = flats[-1]
        for valid, flat in reversed(list(zip(valids, flats, strict=True))):
            # the first in-bounds element: the index of a window where nothing beats `lowest`
            where = flat if valid is None else ops.where(valid, flat, where)
        best = ops.constant(lowest, dtype)
        for (ih, iw), flat, valid in zip(cells, flats, valids, strict=True):
            if valid is None:
                value = x.load(ops, [*lead, ih, iw])
            else:
                edge = _at_edge(ops, lead, ih, iw, height, width)
                value = ops.where(valid, x.load(ops, edge), ops.constant(lowest, dtype))
            take = _taken(ops, value, best, dtype)
            if valid is not None:
                take = ops.logical_and(take, valid)
            best = ops.where(take, value, best)
            where = ops.where(take, flat, where)
        return best, where

    def load_values(ops: Ops, idx: Sequence[Expr]) -> Any:
        if not masked or (dh, dw) != (1, 1):
            return window(ops, idx)[0]
        # Every window of contiguous cells meets the input (ATen's padding is at most half the
        # window, and a ceil_mode window starts inside), so each out-of-bounds cell clamped to
        # the nearest edge repeats a cell of its own window: the same maximum (NaN included),
        # read without masks and without the window's bounds tests (ResNet's stem pool, 3x3 with
        # padding 1 at 64x64: 181 to 15 us with the masked loads as selects).
        lead, cells = cells_of(idx)
        best = ops.constant(lowest, dtype)
        for ih, iw in cells:
            value = x.load(ops, _at_edge(ops, lead, ih, iw, height, width))
            best = ops.where(_taken(ops, value, best, dtype), value, best)
        return best

    def load_indices(ops: Ops, idx: Sequence[Expr]) -> Any:
        return window(ops, idx)[1]

    values = lazy(out, dtype, x.device, load_values, x)
    indices = lazy(out, torch.int64, x.device, load_indices, x)
    return _costly(values, len(offsets)), _costly(indices, len(offsets))


def _taken(ops: Ops, value: Any, best: Any, dtype: torch.dtype) -> Any:
    """Whether a window cell replaces the running maximum: greater, or NaN (ATen's order)."""
    take = ops.gt(value, best)
    return ops.logical_or(take, ops.isnan(value)) if dtype.is_floating_point else take


def _at_edge(
    ops: Ops, lead: list[Expr], ih: Expr, iw: Expr, height: Expr, width: Expr
) -> list[Expr]:
    """The coordinates of window cell (ih, iw), clamped into the input plane."""
    return [*lead, _clamped(ops, ih, height), _clamped(ops, iw, width)]


def _clamped(ops: Ops, at: Expr, size: Expr) -> Expr:
    """Index `at` clamped into [0, size): an out-of-bounds window cell read at the nearest edge
    (and its value then discarded or repeated), so the load needs no mask and stays SIMD."""
    value = ops.index_expr(at, torch.int64)
    value = ops.maximum(value, ops.constant(0, torch.int64))
    value = ops.minimum(value, ops.index_expr(sympy.sympify(size - 1), torch.int64))
    return ops.indirect_indexing(value, size, False, False)


def _inside(
    ops: Ops, ih: Expr, iw: Expr, height: Expr, width: Expr, top: int = 0, left: int = 0
) -> Any:
    """Bool: `top <= ih < top + height` and `left <= iw < left + width`."""

    def within(i: Expr, lo: int, size: Expr) -> Any:
        at = ops.index_expr(i, torch.int64)
        low = ops.ge(at, ops.constant(lo, torch.int64))
        high = ops.index_expr(sympy.sympify(size + lo), torch.int64)
        return ops.and_(low, ops.lt(at, high))

    return ops.and_(within(ih, top, height), within(iw, left, width))


def _window_input(ctx: LoweringContext, x: TensorValue, window: int) -> TensorValue:
    """The pooled input, computed into memory first when it is more than a load: each output
    reads `window` input elements, and a lazy input would be recomputed for every one of them
    (ResNet's batch norm and ReLU nine times per max-pooled element, a sqrt and a divide each)."""
    if isinstance(x, Lazy) and x.cost > WINDOW_INLINE_COST and window > 1:
        return layouts.realize_planned(ctx.graph, x, ctx.node.args[0], ctx.channels_last)
    return x


WINDOW_INLINE_COST = 3
"""A pooled input of at most this many ops (`relu(x) - 1`) is recomputed per window cell,
fused into the pooling kernel; a costlier one (a batch norm: a sqrt and a divide) is computed
into memory first."""


def _costly(value: Lazy, window: int) -> Lazy:
    """`value` costed by its window, so several readers share one computed buffer."""
    return Lazy(value.size, value.dtype, value.device, value.fn, value.cost + 4 * window)


def avg_pool2d(
    ctx: LoweringContext,
    x: TensorValue,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Lazy:
    """Mean of each window, with ATen's divisor: `divisor_override`, else the window's elements
    inside the padded input (`count_include_pad`) or inside the input itself."""
    if not is_tensor(x) or len(x.size) not in (3, 4) or not x.dtype.is_floating_point:
        raise Fallback("avg_pool2d of a 3-d or 4-d float tensor only")
    kh, kw = _pair(kernel_size, ())
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, ())
    if kh * kw > MAX_WINDOW:
        raise Fallback(f"avg_pool2d window of {kh * kw} elements (over {MAX_WINDOW})")
    x = _window_input(ctx, x, kh * kw)
    height, width = x.size[-2], x.size[-1]
    masked = bool(ph or pw or ceil_mode)
    dtype = x.dtype
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        lead, top, left = list(idx[:-2]), idx[-2] * sh - ph, idx[-1] * sw - pw
        total, count = ops.constant(0.0, acc), ops.constant(0.0, acc)
        for di in range(kh):
            for dj in range(kw):
                ih, iw = top + di, left + dj
                coords = [*lead, ih, iw]
                if not masked:
                    total = ops.add(total, cast(ops, x.load(ops, coords), dtype, acc))
                    continue
                valid = _inside(ops, ih, iw, height, width)
                edge = _at_edge(ops, lead, ih, iw, height, width)
                value = ops.where(valid, x.load(ops, edge), ops.constant(0.0, dtype))
                total = ops.add(total, cast(ops, value, dtype, acc))
                counted = _inside(ops, ih, iw, height + 2 * ph, width + 2 * pw, -ph, -pw)
                counted = counted if count_include_pad else valid
                count = ops.add(count, ops.to_dtype(counted, acc, src_dtype=torch.bool))
        if divisor_override:
            count = ops.constant(float(divisor_override), acc)
        elif not masked:
            count = ops.constant(float(kh * kw), acc)
        return cast(ops, ops.truediv(total, count), acc, dtype)

    return _costly(lazy(ctx.out_size(), dtype, x.device, load, x), kh * kw)


def table() -> dict[str, LoweringFn]:
    """The pooling lowerings, by aten overload name."""
    return {
        "aten.max_pool2d_with_indices.default": max_pool2d_with_indices,
        "aten.avg_pool2d.default": avg_pool2d,
    }
