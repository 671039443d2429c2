"""Other lowerings: factories (full, arange, scalar_tensor), cat, constant padding, slice and
select scatters, copies, and ops torch threads an effect token through.

All of them are pointwise `Lazy` values: factories compute their data from the index with
`value_expr` / `index_expr`; cat, padding and the scatters select between masked loads by the
output index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.errors import LoweringError
from polyduct.indexing import FloorDiv
from polyduct.ir import Expr, Lazy, TensorValue
from polyduct.lowering.externs import extern_call
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn, op_name
from polyduct.lowering.values import Ops, _scalar, cast, is_tensor, lazy, operand
from polyduct.lowering.views import slice_start, wrapped_index


def _index(ops: Ops, expr: Expr) -> Any:
    return ops.index_expr(sympy.sympify(expr), torch.int64)


def full(ctx: LoweringContext, size: Any, fill_value: Any, **kwargs: Any) -> Lazy:
    """full / zeros / ones / new_full: one constant everywhere."""
    dtype = ctx.out_dtype()
    load = operand(fill_value, ctx.out_size(), dtype)
    return lazy(ctx.out_size(), dtype, ctx.device, load)


def full_like(ctx: LoweringContext, x: Any, fill_value: Any, **kwargs: Any) -> Lazy:
    return full(ctx, None, fill_value)


def scalar_tensor(ctx: LoweringContext, value: Any, **kwargs: Any) -> Lazy:
    return full(ctx, (), value)


def arange(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Lazy:
    """arange(end) / arange(start, end, step): element i is start + i * step in the out dtype."""
    nums = [a for a in args if not isinstance(a, (torch.dtype, torch.device))]
    start, step = (0, 1) if len(nums) < 2 else (nums[0], nums[2] if len(nums) > 2 else 1)
    dtype = ctx.out_dtype()
    if any(isinstance(v, float) and not float(v).is_integer() for v in (start, step)):
        if not dtype.is_floating_point:
            raise Fallback("fractional arange into an integer dtype")
        return _float_arange(ctx, float(start), float(step))
    if not all(isinstance(v, (int, float, sympy.Expr)) for v in (start, step)):
        raise Fallback("arange with non-scalar bounds")
    first, delta = _int_expr(start), _int_expr(step)

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return ops.value_expr(first + idx[0] * delta, dtype)

    return lazy(ctx.out_size(), dtype, ctx.device, load)


def _int_expr(value: Any) -> Expr:
    return value if isinstance(value, sympy.Expr) else sympy.Integer(int(value))


def _float_arange(ctx: LoweringContext, start: float, step: float) -> Lazy:
    dtype = ctx.out_dtype()
    # eager computes start + i * step in double precision, then rounds once to the out dtype
    compute = torch.float64

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        i = cast(ops, _index(ops, idx[0]), torch.int64, compute)
        value = ops.add(ops.constant(start, compute), ops.mul(i, ops.constant(step, compute)))
        return cast(ops, value, compute, dtype)

    return lazy(ctx.out_size(), dtype, ctx.device, load)


def _in_range(ops: Ops, i: Expr, lo: Expr | None, hi: Expr | None) -> Any:
    """Bool value of lo <= i < hi (either bound may be absent)."""
    conds = []
    if lo is not None:
        conds.append(ops.ge(_index(ops, i), _index(ops, lo)))
    if hi is not None:
        conds.append(ops.lt(_index(ops, i), _index(ops, hi)))
    result = conds[0]
    for c in conds[1:]:
        result = ops.and_(result, c)
    return result


def cat(ctx: LoweringContext, tensors: Sequence[Any], dim: int = 0) -> Lazy:
    """Concatenation: each output element loads from the input whose slice holds it."""
    out = ctx.out_size()
    dtype = ctx.out_dtype()
    dim = dim % len(out)
    parts = [t for t in tensors if is_tensor(t) and len(t.size) == len(out) and t.size[dim] != 0]
    if not parts:
        raise Fallback("cat of empty tensors only")
    offsets: list[Expr] = [sympy.Integer(0)]
    for t in parts:
        offsets.append(offsets[-1] + t.size[dim])
    loaders = [_shifted(t, dim, off, dtype) for t, off in zip(parts, offsets, strict=False)]

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        value = None
        for i in reversed(range(len(parts))):
            if value is None:
                last = _in_range(ops, idx[dim], offsets[i], None) if i else None
                value = (
                    loaders[i](ops, idx)
                    if last is None
                    else _masked_load(ops, last, loaders[i], idx, dtype)
                )
                continue
            # Both bounds: the masked load must not touch a middle input outside its slice (an
            # index before it would read before the input's buffer).
            take = _in_range(ops, idx[dim], offsets[i] if i else None, offsets[i + 1])
            value = ops.where(take, _masked_load(ops, take, loaders[i], idx, dtype), value)
        return value

    return lazy(out, dtype, ctx.device, load, *parts)


def _shifted(t: TensorValue, dim: int, offset: Expr, dtype: torch.dtype) -> Any:
    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        coords = list(idx)
        coords[dim] = idx[dim] - offset
        return cast(ops, t.load(ops, coords), t.dtype, dtype)

    return load


def _masked_load(ops: Ops, mask: Any, loader: Any, idx: Sequence[Expr], dtype: torch.dtype) -> Any:
    def body() -> Any:
        return loader(ops, idx)

    return ops.masked(mask, body, _scalar(0, dtype))


def constant_pad_nd(
    ctx: LoweringContext, x: TensorValue, pad: Sequence[Any], value: Any = 0
) -> Lazy:
    """Pad (or crop, for negative amounts) the trailing dims; padding holds `value`."""
    out = ctx.out_size()
    n = len(out)
    dtype = x.dtype
    lows = [sympy.Integer(0)] * n
    for k in range(len(pad) // 2):
        lows[n - 1 - k] = sympy.sympify(pad[2 * k])
    fill = _scalar(value, dtype)
    src = x

    def inner(ops: Ops, idx: Sequence[Expr]) -> Any:
        return src.load(ops, [i - lo for i, lo in zip(idx, lows, strict=True)])

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        mask = None
        for d in range(n):
            lo, hi = lows[d], lows[d] + x.size[d]
            need_lo, need_hi = lo != 0, sympy.simplify(out[d] - hi) != 0
            if not (need_lo or need_hi):
                continue
            cond = _in_range(ops, idx[d], lo if need_lo else None, hi if need_hi else None)
            mask = cond if mask is None else ops.and_(mask, cond)
        if mask is None:
            return inner(ops, idx)
        return ops.masked(mask, lambda: inner(ops, idx), fill)

    return lazy(out, dtype, ctx.device, load, x)


def slice_scatter(
    ctx: LoweringContext,
    x: TensorValue,
    src: TensorValue,
    dim: int = 0,
    start: Any = None,
    end: Any = None,
    step: int = 1,
) -> Lazy:
    """`x` with `x[..., start:end:step, ...] = src` along `dim` (the backward of a slice, e.g.
    rotary embeddings' halves): a pointwise choice between `src` and `x` by the output index."""
    out = ctx.out_size()
    dim = dim % len(out)
    if not isinstance(step, int) or step < 1:
        raise Fallback(f"slice_scatter with step {step!r}")
    first = slice_start(start, out[dim])
    last = first + (src.size[dim] - 1) * step + 1  # one past the last element src covers

    def at(idx: Sequence[Expr]) -> list[Expr]:
        coords = list(idx)
        coords[dim] = idx[dim] - first if step == 1 else FloorDiv(idx[dim] - first, step)
        return coords

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        mask = _in_range(ops, idx[dim], first, last)
        if step != 1:
            phase = ops.index_expr(sympy.Mod(idx[dim] - first, step), torch.int64)
            mask = ops.and_(mask, ops.eq(phase, ops.constant(0, torch.int64)))
        new = ops.masked(mask, lambda: cast(ops, src.load(ops, at(idx)), src.dtype, x.dtype),
                         _scalar(0, x.dtype))
        return ops.where(mask, new, x.load(ops, idx))

    return lazy(out, x.dtype, ctx.device, load, x, src)


def select_scatter(ctx: LoweringContext, x: TensorValue, src: TensorValue, dim: int,
                   index: Any) -> Lazy:
    """`x` with `x.select(dim, index) = src` (the backward of a select)."""
    out = ctx.out_size()
    dim = dim % len(out)
    at = wrapped_index(index, out[dim], "select_scatter")

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        hit = ops.eq(_index(ops, idx[dim]), _index(ops, at))
        rest = [*idx[:dim], *idx[dim + 1:]]
        new = ops.masked(hit, lambda: cast(ops, src.load(ops, rest), src.dtype, x.dtype),
                         _scalar(0, x.dtype))
        return ops.where(hit, new, x.load(ops, idx))

    return lazy(out, x.dtype, ctx.device, load, x, src)


def copy(ctx: LoweringContext, dst: TensorValue, src: Any, non_blocking: bool = False) -> Lazy:
    """Functional copy: `src` broadcast to `dst`'s shape in `dst`'s dtype."""
    load = operand(src, ctx.out_size(), dst.dtype)
    return lazy(ctx.out_size(), dst.dtype, ctx.device, load, src)


def with_effects(ctx: LoweringContext, token: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """An effectful op (`aten._linalg_check_errors`, which raises on a singular matrix, after
    linalg.inv or cholesky) runs as a library call in graph order; the token passes through."""
    name = op_name(op)
    val = ctx.meta
    if isinstance(val, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in val[1:]):
        raise LoweringError(name, ctx.node.name, "an effectful op with tensor results")
    ctx.report.add(name, "effectful op: library call")
    extern_call(ctx.graph, ctx.node, name, args, kwargs, effect_only=True)
    return (token,)


def assert_tensor_metadata(ctx: LoweringContext, x: Any, *args: Any, **kwargs: Any) -> None:
    """torch.export's check that a value has the dtype and device it was traced with (`.to(dtype)`
    of a value already of that dtype). Every value's dtype here comes from that trace, so the
    check holds by construction; as a library call it failed on the one value whose device is
    the compiler's choice, a CPU scalar computed on the accelerator (`devices.moved_scalars`:
    DeBERTa-v2's `torch.tensor(...).to(dtype)` on CUDA). Nothing to run."""


def table() -> dict[str, LoweringFn]:
    """The remaining lowerings, by aten overload name."""
    return {
        "aten.full.default": full,
        "aten.full_like.default": full_like,
        "aten.scalar_tensor.default": scalar_tensor,
        "aten.arange.default": arange,
        "aten.arange.start": arange,
        "aten.arange.start_step": arange,
        "aten.cat.default": cat,
        "aten.constant_pad_nd.default": constant_pad_nd,
        "aten.slice_scatter.default": slice_scatter,
        "aten.select_scatter.default": select_scatter,
        "aten.copy.default": copy,
        "with_effects": with_effects,
        "aten._assert_tensor_metadata.default": assert_tensor_metadata,
    }
