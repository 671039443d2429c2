"""Ops that map directly onto Triton expressions (arithmetic, comparisons, bits, casts)."""

from __future__ import annotations

import math

import torch

from polyduct.codegen import Value
from polyduct_triton.context import KernelContext
from polyduct_triton.values import (
    BITS,
    LOW_PRECISION,
    TL_DTYPE,
    bit_width,
    compute_tl,
    is_float,
    literal,
)

V = Value
B = torch.bool
_NVIDIA = torch.version.hip is None  # compiled kernels may carry PTX (float32 exp's ex2.approx)


# float compute type -> (the integer type of its bits, its sign bit as that integer)
_SIGN_BIT = {
    "tl.float32": ("tl.int32", "-2147483648"),
    "tl.float64": ("tl.int64", "-9223372036854775808"),
}


class TritonEmitter:
    """Shared plumbing: a kernel context, CSE'd temporaries and typed constants."""

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx = ctx

    def _v(self, expr: str, dtype: torch.dtype, reuse: bool = True) -> V:
        return V(self.ctx.cse.generate(expr, reuse=reuse), dtype)

    def _c(self, value: bool | float, dtype: torch.dtype) -> V:
        shape = self.ctx.const_shape
        ctype = compute_tl(dtype)
        if is_float(dtype) and value == 0 and math.copysign(1.0, float(value)) < 0:
            # -0.0 as bits: compiled kernels fold the literal -0.0 into +0.0.
            ibits, ival = _SIGN_BIT[ctype]
            return V(f"tl.full({shape}, {ival}, {ibits}).to({ctype}, bitcast=True)", dtype)
        return V(f"tl.full({shape}, {literal(value, dtype)}, {ctype})", dtype)

    def constant(self, value: bool | float, dtype: torch.dtype) -> V:
        """`value` rounded to `dtype` (a float16 / bfloat16 one is then held in float32); the
        kernels' own constants (`_c`) are compute-type values."""
        if dtype in LOW_PRECISION:
            value = float(torch.tensor(float(value), dtype=dtype))
        return self._v(self._c(value, dtype).name, dtype)

    def _cast(self, x: V, dtype: torch.dtype) -> str:
        if dtype == B:
            return f"({x} != 0)"
        if x.dtype == B:
            return f"{x}.to({TL_DTYPE[torch.int8]}).to({compute_tl(dtype)})"
        if dtype == torch.bfloat16 and self.ctx.interpret:
            return f"_bf16_value(_bf16_bits({x}.to(tl.float32)))"
        if dtype == torch.bfloat16:  # the hardware conversion rounds to nearest even
            return f"{x}.to(tl.float32).to(tl.bfloat16).to(tl.float32)"
        if dtype in LOW_PRECISION:
            return f"{x}.to({TL_DTYPE[dtype]}).to(tl.float32)"
        return f"{x}.to({compute_tl(dtype)})"


class TritonPrimitiveOps(TritonEmitter):
    """One Triton expression per op; float16/bfloat16 operands are already float32."""

    def add(self, x0: V, x1: V) -> V:
        return self._v(f"({x0} | {x1})" if x0.dtype == B else f"({x0} + {x1})", x0.dtype)

    def sub(self, x0: V, x1: V) -> V:
        return self._v(f"({x0} ^ {x1})" if x0.dtype == B else f"({x0} - {x1})", x0.dtype)

    def mul(self, x0: V, x1: V) -> V:
        return self._v(f"({x0} & {x1})" if x0.dtype == B else f"({x0} * {x1})", x0.dtype)

    def mul_rn(self, x: V, y: V) -> V:
        return self._v(f"({x} * {y})", x.dtype)

    def neg(self, x0: V) -> V:
        if x0.dtype == B:
            return self._v(f"({x0} == 0)", x0.dtype)
        if not is_float(x0.dtype):
            return self._v(f"(-{x0})", x0.dtype)
        if x0.dtype == torch.bfloat16:
            # eager rounds its float result to bfloat16, and a NaN rounds to the positive one
            return self._v(f"tl.where({x0} != {x0}, float('nan'), {x0} * -1)", x0.dtype)
        # Eager flips the sign bit, of zeros and NaNs too. Triton lowers `-x` to `0 - x` (+0.0
        # for +0.0 on GPUs), and `x * -1` keeps a NaN's sign (triton seed 9402, program 8177).
        bits, sign = _SIGN_BIT[compute_tl(x0.dtype)]
        flipped = f"({x0}.to({bits}, bitcast=True) ^ {sign})"
        return self._v(f"{flipped}.to({x0}.dtype, bitcast=True)", x0.dtype)

    def square(self, x0: V) -> V:
        return self.mul(x0, x0)

    def abs(self, x0: V) -> V:
        return x0 if x0.dtype == B else self._v(f"tl.abs({x0})", x0.dtype)

    def fma(self, x: V, y: V, z: V) -> V:
        if is_float(x.dtype):
            return self._v(f"tl.fma({x}, {y}, {z})", x.dtype)
        return self.add(self.mul(x, y), z)

    def truediv(self, x0: V, x1: V) -> V:
        if compute_tl(x0.dtype) == "tl.float32":
            return self._v(f"tl.math.div_rn({x0}, {x1})", x0.dtype)
        return self._v(f"({x0} / {x1})", x0.dtype)

    div_rn = truediv

    def reciprocal(self, x0: V) -> V:
        return self.truediv(self._c(1.0, x0.dtype), x0)

    def int_truediv(self, x0: V, x1: V) -> V:
        return self._v(f"({x0}.to(tl.float64) / {x1}.to(tl.float64)).to(tl.float32)", torch.float32)

    def truncdiv(self, x0: V, x1: V) -> V:
        return self._v(f"({x0} // {x1})", x0.dtype)

    def floordiv(self, x0: V, x1: V) -> V:
        q = self.truncdiv(x0, x1)
        fix = f"((({x0} % {x1}) != 0) & (({x0} < 0) != ({x1} < 0)))"
        return self._v(f"({q} - {fix}.to({compute_tl(x0.dtype)}))", x0.dtype)

    def mod(self, x0: V, x1: V) -> V:
        if is_float(x0.dtype) and not self.ctx.interpret:
            # Float % becomes LLVM frem, which NVPTX expands to x - y*trunc(x/y): wrong once the
            # quotient is large. libdevice fmod is exact (the interpreter's % is numpy's fmod).
            return self._v(f"libdevice.fmod({x0}, {x1})", x0.dtype)
        return self._v(f"({x0} % {x1})", x0.dtype)

    fmod = mod

    def remainder(self, x0: V, x1: V) -> V:
        r = self.mod(x0, x1)
        fix = f"(({r} != 0) & (({r} < 0) != ({x1} < 0)))"
        return self._v(f"tl.where({fix}, {r} + {x1}, {r})", x0.dtype)

    def maximum(self, x0: V, x1: V) -> V:
        return self._minmax(x0, x1, ">")

    def minimum(self, x0: V, x1: V) -> V:
        return self._minmax(x0, x1, "<")

    def _minmax(self, x0: V, x1: V, cmp: str) -> V:
        pick = f"({x0} {cmp} {x1})"
        if is_float(x0.dtype):
            pick = f"({pick} | ({x0} != {x0}))"
        return self._v(f"tl.where({pick}, {x0}, {x1})", x0.dtype)

    def relu(self, x0: V) -> V:
        if x0.dtype == B:
            return x0
        zero = self._c(0, x0.dtype)
        if self.ctx.interpret or not is_float(x0.dtype):  # CPU eager: x < 0 ? 0 : x keeps -0
            return self._v(f"tl.where({x0} < 0, {zero}, {x0})", x0.dtype)
        # CUDA eager's max(x, 0) gives +0 for -0 (1 / relu(-0.0) is inf there), NaN kept
        return self._v(f"tl.where(({x0} > 0) | ({x0} != {x0}), {x0}, {zero})", x0.dtype)

    def sign(self, x0: V) -> V:
        if x0.dtype == B:
            return x0
        one, zero = self._c(1, x0.dtype), self._c(0, x0.dtype)
        if is_float(x0.dtype):
            inner = f"tl.where({x0} < 0, -{one}, {zero})"
            return self._v(f"tl.where({x0} > 0, {one}, {inner})", x0.dtype)
        pos = f"({x0} > 0).to({compute_tl(x0.dtype)})"
        return self._v(f"({pos} - ({x0} < 0).to({compute_tl(x0.dtype)}))", x0.dtype)

    def _cmp(self, x0: V, x1: V, op: str) -> V:
        return self._v(f"({x0} {op} {x1})", B)

    def eq(self, x0: V, x1: V) -> V:
        return self._cmp(x0, x1, "==")

    def ne(self, x0: V, x1: V) -> V:
        return self._cmp(x0, x1, "!=")

    def lt(self, x0: V, x1: V) -> V:
        return self._cmp(x0, x1, "<")

    def le(self, x0: V, x1: V) -> V:
        return self._cmp(x0, x1, "<=")

    def gt(self, x0: V, x1: V) -> V:
        return self._cmp(x0, x1, ">")

    def ge(self, x0: V, x1: V) -> V:
        return self._cmp(x0, x1, ">=")

    def isnan(self, x0: V) -> V:
        return self._v(f"({x0} != {x0})", B)

    def isinf(self, x0: V) -> V:
        return self._v(f"(tl.abs({x0}) == float(\"inf\"))", B)

    def signbit(self, x0: V) -> V:
        bits = TL_DTYPE[BITS[torch.float32 if x0.dtype in LOW_PRECISION else x0.dtype]]
        return self._v(f"({x0}.to({bits}, bitcast=True) < 0)", B)

    def _bin(self, x0: V, x1: V, op: str) -> V:
        return self._v(f"({x0} {op} {x1})", x0.dtype)

    def bitwise_and(self, x0: V, x1: V) -> V:
        return self._bin(x0, x1, "&")

    def bitwise_or(self, x0: V, x1: V) -> V:
        return self._bin(x0, x1, "|")

    def bitwise_xor(self, x0: V, x1: V) -> V:
        return self._bin(x0, x1, "^")

    def bitwise_not(self, x0: V) -> V:
        if x0.dtype == B:
            return self._v(f"({x0} == 0)", B)
        if not x0.dtype.is_signed:  # Triton 3.6's interpreter takes ~ as ^ -1, out of range
            ones = self._c(2 ** bit_width(x0.dtype) - 1, x0.dtype)
            return self._v(f"({x0} ^ {ones})", x0.dtype)
        return self._v(f"(~{x0})", x0.dtype)

    def bitwise_left_shift(self, x0: V, x1: V) -> V:
        # Shifting by the width or more is 0 in torch, undefined in Triton/LLVM.
        big = f"(({x1} >= {bit_width(x0.dtype)}) | ({x1} < 0))"
        return self._v(f"tl.where({big}, {self._c(0, x0.dtype)}, {x0} << {x1})", x0.dtype)

    def bitwise_right_shift(self, x0: V, x1: V) -> V:
        width = bit_width(x0.dtype)
        big = f"(({x1} >= {width}) | ({x1} < 0))"
        fill = str(self._c(0, x0.dtype))
        if x0.dtype.is_signed:
            fill = f"tl.where({x0} < 0, {self._c(-1, x0.dtype)}, {fill})"
        return self._v(f"tl.where({big}, {fill}, {x0} >> {x1})", x0.dtype)

    lshift = bitwise_left_shift
    rshift = bitwise_right_shift

    def _truth(self, x: V) -> str:
        return str(x) if x.dtype == B else f"({x} != 0)"

    def logical_and(self, x0: V, x1: V) -> V:
        return self._v(f"({self._truth(x0)} & {self._truth(x1)})", B)

    def logical_or(self, x0: V, x1: V) -> V:
        return self._v(f"({self._truth(x0)} | {self._truth(x1)})", B)

    def logical_xor(self, x0: V, x1: V) -> V:
        return self._v(f"({self._truth(x0)} ^ {self._truth(x1)})", B)

    def logical_not(self, x0: V) -> V:
        return self._v(f"({self._truth(x0)} == 0)", B)

    and_ = logical_and
    or_ = logical_or
    xor = logical_xor

    def where(self, condition: V, input: V, other: V) -> V:
        return self._v(f"tl.where({condition}, {input}, {other})", input.dtype)

    def identity(self, x: V) -> V:
        return self._v(str(x), x.dtype, reuse=False)

    def to_dtype(
        self,
        x: V,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> V:
        if is_float(x.dtype) and not is_float(dtype) and dtype != B:
            # Triton's float->int conversion of NaN/out-of-range differs by target; torch is
            # undefined there too (docs/conventions.md), so only the in-range truncation matters.
            return self._v(f"{x}.to({compute_tl(dtype)})", dtype)
        return self._v(self._cast(x, dtype), dtype)

    def to_dtype_bitcast(self, x: V, dtype: torch.dtype, src_dtype: torch.dtype) -> V:
        src = f"{x}.to({TL_DTYPE[src_dtype]})" if src_dtype in LOW_PRECISION else str(x)
        if src_dtype == torch.bfloat16:
            src = f"_bf16_bits({x})"
        out = f"{src}.to({TL_DTYPE[dtype]}, bitcast=True)"
        if dtype == torch.bfloat16:
            out = f"_bf16_value({src}.to(tl.int16, bitcast=True))"
        elif dtype in LOW_PRECISION:
            out = f"{out}.to(tl.float32)"
        return self._v(out, dtype)

    def floor(self, x0: V) -> V:
        return self._v(f"tl.floor({x0})", x0.dtype)

    def ceil(self, x0: V) -> V:
        return self._v(f"tl.ceil({x0})", x0.dtype)

    def trunc(self, x0: V) -> V:
        return self._v(f"tl.where({x0} < 0, tl.ceil({x0}), tl.floor({x0}))", x0.dtype)

    def round(self, x0: V) -> V:
        f = self.floor(x0)
        d = self._v(f"({x0} - {f})", x0.dtype)
        odd = f"(({f} % 2) != 0)"
        up = f"(({d} > 0.5) | (({d} == 0.5) & {odd}))"
        r = self._v(f"tl.where({up}, {f} + 1, {f})", x0.dtype)
        # -0.3 rounds to -0 (floor -1, plus 1, is +0): a zero takes x's sign
        return self._v(f"tl.where(({r} == 0) & ({x0} < 0), {r} * -1.0, {r})", x0.dtype)

    def floor_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self.to_dtype(self.floor(x), dtype)

    def ceil_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self.to_dtype(self.ceil(x), dtype)

    def trunc_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self.to_dtype(x, dtype)

    def round_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self.to_dtype(self.round(x), dtype)

    def sqrt(self, x0: V) -> V:
        if compute_tl(x0.dtype) == "tl.float32":
            return self._v(f"tl.sqrt_rn({x0})", x0.dtype)
        return self._v(f"tl.sqrt({x0})", x0.dtype)

    def rsqrt(self, x0: V) -> V:
        return self.reciprocal(self.sqrt(x0))

    def _fn(self, fn: str, x: V) -> V:
        if not self.ctx.interpret and fn.startswith("tl."):
            # Compiled: libdevice's correctly-ranged versions (tl.exp/tl.exp2 on float32 lower
            # to ex2.approx, whose error grows with |x|); the interpreter has numpy's.
            fn = "libdevice." + fn[3:]
        return self._v(f"{fn}({x})", x.dtype)

    def exp(self, x0: V) -> V:
        if x0.dtype in LOW_PRECISION and not self.ctx.interpret:
            # A 16-bit float's exp, computed in float32, needs far less than float32's accuracy:
            # Triton's own exp (ex2.approx of x * log2(e), subnormal results kept) is within
            # 2**-17 of exp(x) wherever the 16-bit result is finite and nonzero, against a
            # half-ulp of 2**-9 (bfloat16) or 2**-12 (float16). It is 4 instructions per
            # element fewer than `_exp_f32`: bfloat16 pointwise3 on the H200 went from 0.131 to
            # 0.122 ms, Inductor's time (docs/backends/triton.md).
            return self._v(f"tl.exp({x0})", x0.dtype)
        if compute_tl(x0.dtype) == "tl.float32" and (self.ctx.interpret or _NVIDIA):
            return self._v(f"_exp_f32({x0}, {not self.ctx.interpret})", x0.dtype)
        return self._fn("tl.exp", x0)

    def exp2(self, x0: V) -> V:
        return self._fn("tl.exp2", x0)

    def log(self, x0: V) -> V:
        return self._fn("tl.log", x0)

    def log2(self, x0: V) -> V:
        return self._fn("tl.log2", x0)

    def sin(self, x0: V) -> V:
        return self._fn("tl.sin", x0)

    def cos(self, x0: V) -> V:
        return self._fn("tl.cos", x0)

    def erf(self, x0: V) -> V:
        return self._fn("tl.erf", x0)
