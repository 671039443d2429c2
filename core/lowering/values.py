"""Helpers lowerings share: broadcasting loaders, casts, scalar operands, type promotion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from polyduct.ir import Expr, Lazy, Loader, StorageView, TensorValue
from polyduct.lowering.graph import Fallback
from polyduct.lowering.sizes import eager_layout, meta_layout
from polyduct.ops import OpHandler

Ops = OpHandler[Any]


def is_tensor(value: Any) -> bool:
    return isinstance(value, (StorageView, Lazy))


def cast(ops: Ops, value: Any, src: torch.dtype, dst: torch.dtype) -> Any:
    """`value` (of `src`) converted to `dst`; no op when they agree."""
    return value if src == dst else ops.to_dtype(value, dst, src_dtype=src)


def broadcast_index(size: Sequence[Expr], out: Sequence[Expr], idx: Sequence[Expr]) -> list[Expr]:
    """Coordinates into a tensor of `size` broadcast to `out`, for output coordinates `idx`."""
    lead = len(out) - len(size)
    return [
        sympy.Integer(0) if s == 1 and o != 1 else i
        for s, o, i in zip(size, out[lead:], idx[lead:], strict=True)
    ]


def operand(value: Any, out_size: Sequence[Expr], dtype: torch.dtype) -> Loader:
    """A loader of `value` broadcast to `out_size` and converted to `dtype` (scalars too)."""
    if is_tensor(value):
        tensor: TensorValue = value
        size = tensor.size

        def load(ops: Ops, idx: Sequence[Expr]) -> Any:
            v = tensor.load(ops, broadcast_index(size, out_size, idx))
            return cast(ops, v, tensor.dtype, dtype)

        return load
    if isinstance(value, sympy.Expr) and not value.is_Number:
        if value.is_integer is not True:  # a float of sizes (a scale): no integer index_expr
            raise Fallback(f"operand {value} is not an integer size expression")
        expr = value

        def load_expr(ops: Ops, idx: Sequence[Expr]) -> Any:
            return cast(ops, ops.index_expr(expr, torch.int64), torch.int64, dtype)

        return load_expr
    if isinstance(value, (bool, int, float, sympy.Number)):
        scalar = _scalar(value, dtype)

        def load_const(ops: Ops, idx: Sequence[Expr]) -> Any:
            return ops.constant(scalar, dtype)

        return load_const
    raise Fallback(f"operand {type(value).__name__} is not a tensor or scalar")


def _scalar(value: Any, dtype: torch.dtype) -> bool | int | float:
    if isinstance(value, sympy.Number):
        value = int(value) if value.is_Integer else float(value)
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    # As torch converts a Python scalar: wrapped into the dtype's range (-2 as uint8 is 254).
    bits = torch.iinfo(dtype).bits
    wrapped = int(value) & ((1 << bits) - 1)
    return wrapped - (1 << bits) if dtype.is_signed and wrapped >> (bits - 1) else wrapped


def cost(*values: Any) -> int:
    """Inlined-expression size of the operands (for the re-compute heuristic)."""
    return 1 + sum(v.cost for v in values if isinstance(v, Lazy))


def lazy(size: Sequence[Expr], dtype: torch.dtype, device: str, fn: Loader, *deps: Any) -> Lazy:
    """A pointwise value of `size` computed by `fn`."""
    return Lazy(tuple(size), dtype, device, fn, cost(*deps))


def promoted(*values: Any, kind: str = "DEFAULT") -> torch.dtype:
    """torch's elementwise type promotion of tensors and scalars: the common dtype every operand
    is converted to (float16 for a float16 tensor and an int64 tensor or a Python float: the int
    and the scalar round to float16, as eager's do, before a comparison computes in float32)."""
    samples: list[Any] = []
    for v in values:
        if is_tensor(v):
            samples.append(torch.empty((1,) * min(len(v.size), 1), dtype=v.dtype))
        elif isinstance(v, sympy.Expr):
            samples.append(1 if v.is_integer else 1.0)
        elif v is not None:
            samples.append(v)
    _, common = elementwise_dtypes(
        *samples, type_promotion_kind=getattr(ELEMENTWISE_TYPE_PROMOTION_KIND, kind)
    )
    return common


BROADCAST_REALIZE_COST = 6
"""A lazy value of at least this many ops that is broadcast into a larger result is computed into
memory first: inlined, it would be recomputed for every broadcast copy (Llama's rotary cos and sin
of a (sequence, dim) table, once per batch and head, were a fifth of its generated code's time)."""


def unbroadcast(ctx: Any, value: Any, out: Sequence[Expr], meta: Any = None) -> Any:
    """`value` in memory if it is a costly lazy value broadcast to `out`, else `value`; stored
    with the strides eager's tensor `meta` has where they are dense (gaps allowed: the GPU's
    attention pads its bias rows, and expands the padded view), else row-major."""
    if not (isinstance(value, Lazy) and value.cost >= BROADCAST_REALIZE_COST):
        return value
    lead = len(out) - len(value.size)
    widened = any(o != 1 for o in out[:lead]) or any(
        s == 1 and o != 1 for s, o in zip(value.size, out[lead:], strict=True)
    )
    if not widened:
        return value
    same = isinstance(meta, torch.Tensor) and meta_layout(meta).size == tuple(value.size)
    layout = eager_layout(value, meta) if same else None
    return ctx.graph.realize(value) if layout is None else ctx.graph.realize(value, layout)


def named_op(name: str) -> Callable[..., Any]:
    """`fn(ops, *values)` applying the op handler's op `name`."""

    def apply(ops: Ops, *values: Any) -> Any:
        return getattr(ops, name)(*values)

    apply.__name__ = f"apply_{name}"
    return apply


def map_values(ctx: Any, args: Sequence[Any], dtype: torch.dtype, fn: Callable[..., Any]) -> Lazy:
    """Pointwise: `fn(ops, *operands)` over `args` broadcast to the node's output size."""
    out = ctx.out_size()
    args = [unbroadcast(ctx, a, out) for a in args]
    loaders = [operand(a, out, dtype) for a in args]

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return fn(ops, *(ld(ops, idx) for ld in loaders))

    return lazy(out, ctx.out_dtype(), ctx.device, load, *args)


def converted(value: TensorValue, dtype: torch.dtype) -> TensorValue:
    """`value` as `dtype` (lazy cast)."""
    if value.dtype == dtype:
        return value
    src = value.dtype

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return cast(ops, value.load(ops, idx), src, dtype)

    return lazy(value.size, dtype, value.device, load, value)
