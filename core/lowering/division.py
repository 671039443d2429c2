"""Products and quotients: float division as eager computes it (floor and trunc modes too), and
the scalar operands eager's CPU kernels read at float32 in float16 / bfloat16 arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch

from polyduct.lowering.graph import LoweringContext
from polyduct.lowering.values import Ops, is_tensor, map_values, named_op


def _operand_dtype(ctx: LoweringContext, b: Any) -> torch.dtype:
    """The dtype mul and div read their operands in: the result's, or float32 where eager's CPU
    kernel reads divisor or factor `b` at float32 (its "opmath") rather than rounded to a float16
    / bfloat16 result: a number, or a 0-d float32 / float64 tensor, as the second operand (floor
    and trunc division too). `x // b` of a bfloat16 1000 and b = 1.1369 is 880 (879.6 floored,
    rounded); with b rounded to 1.1406 first, 876 (triton seed 9402, program 5754). The float32
    result is left unrounded: a float16 / bfloat16 value is held in float32 until it is stored,
    as every other (docs/conventions.md), so a fused `a + (a / b) * -2` (addcdiv) still rounds
    once, as eager's does."""
    out = ctx.out_dtype()
    if out not in (torch.float16, torch.bfloat16):
        return out
    if is_tensor(b):
        wide = len(b.size) == 0 and b.dtype in (torch.float32, torch.float64)
    else:
        wide = isinstance(b, (bool, int, float, sympy.Number))
    return torch.float32 if wide else out


def mul(ctx: LoweringContext, a: Any, b: Any) -> Any:
    return map_values(ctx, (a, b), _operand_dtype(ctx, b), named_op("mul"))


def div(ctx: LoweringContext, a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    out = ctx.out_dtype()
    if not out.is_floating_point and rounding_mode is not None:
        name = "floordiv" if rounding_mode == "floor" else "truncdiv"
        return map_values(ctx, (a, b), out, named_op(name))
    if rounding_mode is None:
        apply = named_op("truediv")
    elif rounding_mode == "floor":
        apply = _float_floordiv(out)
    else:

        def apply(ops: Ops, x: Any, y: Any) -> Any:
            return ops.trunc(ops.truediv(x, y))

    return map_values(ctx, (a, b), _operand_dtype(ctx, b), apply)


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
