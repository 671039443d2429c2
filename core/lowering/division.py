"""Products and quotients: float division as eager computes it (floor and trunc modes too), and
the scalar operands eager's CPU kernels read at float32 in float16 / bfloat16 arithmetic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from polyduct.lowering.graph import LoweringContext
from polyduct.lowering.values import Ops, is_tensor, map_values


def _by_name(name: str) -> Callable[..., Any]:
    def apply(ops: Ops, x: Any, y: Any) -> Any:
        return getattr(ops, name)(x, y)

    return apply


_MUL, _TRUEDIV = _by_name("mul"), _by_name("truediv")


def _scalar_in_float32(ctx: LoweringContext, b: Any) -> bool:
    """Whether eager's CPU kernel reads divisor or factor `b` at float32 (its "opmath") rather
    than rounded to the float16 / bfloat16 result: a number, or a 0-d float32 / float64 tensor,
    as the second operand of mul and div (floor, trunc too). `x // b` of a bfloat16 1000 and
    b = 1.1369 is 880 (879.6 floored, rounded); with b rounded to 1.1406 first, 876 (triton
    seed 9402, program 5754)."""
    if ctx.out_dtype() not in (torch.float16, torch.bfloat16):
        return False
    if is_tensor(b):
        return len(b.size) == 0 and b.dtype in (torch.float32, torch.float64)
    return isinstance(b, (bool, int, float, sympy.Number))


def _in_float32(ctx: LoweringContext, args: Sequence[Any], fn: Callable[..., Any]) -> Any:
    """`fn` of `args` read at float32. Its result is left unrounded: a float16 / bfloat16 value
    is held in float32 until it is stored, as every other (docs/conventions.md), so a fused
    `a + (a / b) * -2` (addcdiv) still rounds once, as eager's does."""
    return map_values(ctx, args, torch.float32, fn)


def mul(ctx: LoweringContext, a: Any, b: Any) -> Any:
    if _scalar_in_float32(ctx, b):
        return _in_float32(ctx, (a, b), _MUL)
    return map_values(ctx, (a, b), ctx.out_dtype(), _MUL)


def div(ctx: LoweringContext, a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    out = ctx.out_dtype()
    if not out.is_floating_point and rounding_mode is not None:
        name = "floordiv" if rounding_mode == "floor" else "truncdiv"
        return map_values(ctx, (a, b), out, _by_name(name))
    if rounding_mode is None:
        apply = _TRUEDIV
    elif rounding_mode == "floor":
        apply = _float_floordiv(out)
    else:

        def apply(ops: Ops, x: Any, y: Any) -> Any:
            return ops.trunc(ops.truediv(x, y))

    if _scalar_in_float32(ctx, b):
        return _in_float32(ctx, (a, b), apply)
    return map_values(ctx, (a, b), out, apply)


def _float_floordiv(out: torch.dtype) -> Callable[..., Any]:
    """Float floor division as eager computes it (c10's div_floor_floating), not floor(x / y):
    through fmod, so inf // y is NaN and 1 // 0.1 is 9, with a correction for the rounding."""
    # 16-bit values compute in float32 (docs/conventions.md).
    dtype = torch.float32 if out in (torch.float16, torch.bfloat16) else out

    def apply(ops: Ops, x: Any, y: Any) -> Any:
        return _floordiv_of(ops, x, y, dtype)

    return apply


def _floordiv_of(ops: Ops, x: Any, y: Any, dtype: torch.dtype) -> Any:
    zero, one = ops.constant(0.0, dtype), ops.constant(1.0, dtype)
    quotient = ops.truediv(x, y)
    mod = ops.fmod(x, y)
    div = ops.truediv(ops.sub(x, mod), y)
    signs_differ = ops.ne(ops.lt(y, zero), ops.lt(mod, zero))
    div = ops.where(ops.logical_and(ops.ne(mod, zero), signs_differ), ops.sub(div, one), div)
    floor = ops.floor(div)
    half = ops.constant(0.5, dtype)
    floor = ops.where(ops.gt(ops.sub(div, floor), half), ops.add(floor, one), floor)
    result = ops.where(ops.ne(div, zero), floor, ops.copysign(zero, quotient))
    return ops.where(ops.eq(y, zero), quotient, result)
