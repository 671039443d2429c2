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
    operands = _operand_dtype(ctx, b)
    if rounding_mode is None:
        apply = named_op("truediv")
    elif operands in (torch.float16, torch.bfloat16) and (
            rounding_mode == "trunc" or ctx.device == "cpu"):
        apply = _rounding_each_step(operands, rounding_mode)
    elif rounding_mode == "floor":
        apply = _float_floordiv(out)
    else:

        def apply(ops: Ops, x: Any, y: Any) -> Any:
            return ops.trunc(ops.truediv(x, y))

    return map_values(ctx, (a, b), operands, apply)


def _rounding_each_step(dtype: torch.dtype, rounding_mode: str) -> Callable[..., Any]:
    """Floor or trunc division of two float16 / bfloat16 tensors as eager's kernels compute it:
    in that dtype's arithmetic, every step rounded to it. Trunc division is the trunc of the
    rounded quotient, on the CPU and on CUDA: a bfloat16 29952 / -0.957 is -31296.8, rounded
    -31360, and eager's answer is -31360 where trunc first gives -31232 (reference seed 10204,
    program 520). Floor division rounds each step of `_floordiv_of` on the CPU only: eager's
    CUDA kernel computes its steps in float32 (`_float_floordiv`). Operands eager reads at
    float32 (a number divisor) take the float32 path instead (`_operand_dtype`)."""
    wide = torch.float32

    def rounded(ops: Ops, v: Any) -> Any:
        return ops.to_dtype(ops.to_dtype(v, dtype, src_dtype=wide), wide, src_dtype=dtype)

    def apply(ops: Ops, x: Any, y: Any) -> Any:
        x, y = (ops.to_dtype(v, wide, src_dtype=dtype) for v in (x, y))
        if rounding_mode == "floor":
            result = _floordiv_of(ops, x, y, wide, lambda v: rounded(ops, v))
        else:
            result = ops.trunc(rounded(ops, ops.truediv(x, y)))
        return ops.to_dtype(result, dtype, src_dtype=wide)

    return apply


def _float_floordiv(out: torch.dtype) -> Callable[..., Any]:
    """Float floor division as eager computes it (c10's div_floor_floating), not floor(x / y):
    through fmod, so inf // y is NaN and 1 // 0.1 is 9, with a correction for the rounding."""
    # 16-bit values compute in float32 (docs/conventions.md).
    dtype = torch.float32 if out in (torch.float16, torch.bfloat16) else out

    def apply(ops: Ops, x: Any, y: Any) -> Any:
        return _floordiv_of(ops, x, y, dtype)

    return apply


def _floordiv_of(ops: Ops, x: Any, y: Any, dtype: torch.dtype,
                 rounded: Callable[[Any], Any] = lambda v: v) -> Any:
    """c10's div_floor_floating; `rounded` rounds each inexact step (16-bit arithmetic)."""
    zero, one = ops.constant(0.0, dtype), ops.constant(1.0, dtype)
    quotient = rounded(ops.truediv(x, y))
    mod = ops.fmod(x, y)
    div = rounded(ops.truediv(rounded(ops.sub(x, mod)), y))
    signs_differ = ops.ne(ops.lt(y, zero), ops.lt(mod, zero))
    div = ops.where(ops.logical_and(ops.ne(mod, zero), signs_differ), rounded(ops.sub(div, one)),
                    div)
    floor = ops.floor(div)
    half = ops.constant(0.5, dtype)
    floor = ops.where(ops.gt(rounded(ops.sub(div, floor)), half), rounded(ops.add(floor, one)),
                      floor)
    result = ops.where(ops.ne(div, zero), floor, ops.copysign(zero, quotient))
    return ops.where(ops.eq(y, zero), quotient, result)
