"""Elementwise ops as Halide expressions (source text of the Halide Python API).

Ops that Halide lacks or gets wrong for torch's semantics (erf, NaN-propagating
max/min, Python-style integer division, shifts past the width) call `_m.<fn>` from
`polyduct_halide.hlmath`, which the generated module imports.
"""

from __future__ import annotations

import torch

from polyduct.codegen import Value
from polyduct_halide.values import FLOATS, INTS, SIGNED, Emitter, bits

BOOL = torch.bool


WRAPPING = (torch.int32, torch.int64)


def _arith(x: Value, boolean: str, wrapping: str, plain: str) -> str:
    """The format of a binary arithmetic op on `x`'s dtype."""
    if x.dtype == BOOL:
        return boolean
    return f"_m.{wrapping}({{a}}, {{b}}, ZERO)" if x.dtype in WRAPPING else plain


class HalideElementwiseOps:
    """Arithmetic, comparisons, bitwise and elementwise math; needs an `em` Emitter."""

    em: Emitter

    def _u(self, fmt: str, x: Value, dtype: torch.dtype | None = None) -> Value:
        return self.em.emit(fmt.format(x=x), dtype or x.dtype)

    def _b(self, fmt: str, a: Value, b: Value, dtype: torch.dtype | None = None) -> Value:
        return self.em.emit(fmt.format(a=a, b=b), dtype or a.dtype)

    def _m(self, fn: str, *xs: Value) -> Value:
        return self.em.emit(f"_m.{fn}({', '.join(x.name for x in xs)})", xs[0].dtype)

    def _target(self, fn: str, x: Value) -> Value:
        """`_m.<fn>(x, target)`: functions with vector float32 code on CPU targets (`hlexp`,
        `hltrig`) and libm through float64 elsewhere. The argument passes through the opaque
        zero (`hlmath.opaque`): Halide's simplifier tracks the bounds of every subexpression of
        these long float64 expansions, and where the argument's range is known (a cast of a
        uint8, a clamp) that took minutes (halide seed 9203, program 8202: cos of a uint8)."""
        return self._u(f"_m.{fn}(_m.opaque({{x}}, ZERO), target)", x)

    def _m_exact(self, fn: str, *xs: Value) -> Value:
        """`_m.<fn>` built on products rounded on their own: it gets the module's `NOFUSE` (the
        run-time zero that keeps them out of FMA contraction on GPU targets, see `hlmath.alone`)."""
        if fn in ("fmod", "remainder") and xs[0].dtype == torch.float64:
            self.t.heavy = True
        return self._m(fn, *xs, Value("NOFUSE", xs[0].dtype))

    # arithmetic
    # int32 and int64 wrap through `_m.iadd`... (Halide takes them not to overflow)
    def add(self, x0: Value, x1: Value) -> Value:
        return self._b(_arith(x0, "{a} | {b}", "iadd", "{a} + {b}"), x0, x1)

    def sub(self, x0: Value, x1: Value) -> Value:
        return self._b(_arith(x0, "{a} != {b}", "isub", "{a} - {b}"), x0, x1)

    def mul(self, x0: Value, x1: Value) -> Value:
        return self._b(_arith(x0, "{a} & {b}", "imul", "{a} * {b}"), x0, x1)

    def mul_rn(self, x: Value, y: Value) -> Value:
        return self._b("_m.mul_rn({a}, {b}, STRICT_FLOAT, NOFUSE)", x, y)

    def neg(self, x0: Value) -> Value:
        return self._u("{x}" if x0.dtype == BOOL else "_m.neg({x}, ZERO)", x0)

    # Float divisions go through `_m.div`: a divisor that folds to a constant zero must not
    # reach Halide, which refuses to compile one.
    def truediv(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.div({a}, {b}, ZERO)", x0, x1)

    def div_rn(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.div({a}, {b}, ZERO)", x0, x1)

    def int_truediv(self, x0: Value, x1: Value) -> Value:
        fmt = "hl.cast(hl.Float(32), _m.div(hl.cast(hl.Float(64), {a}), hl.cast(hl.Float(64), {b}), ZERO))"
        return self._b(fmt, x0, x1, torch.float32)

    def floordiv(self, x0: Value, x1: Value) -> Value:
        return self._m("floordiv", x0, x1)

    def truncdiv(self, x0: Value, x1: Value) -> Value:
        return self._b("hl.div_round_to_zero({a}, {b})", x0, x1)

    def mod(self, x0: Value, x1: Value) -> Value:
        return self._m_exact("fmod", x0, x1) if x0.dtype in FLOATS else self._m("imod", x0, x1)

    def fmod(self, x0: Value, x1: Value) -> Value:
        return self._m_exact("fmod", x0, x1)

    def remainder(self, x0: Value, x1: Value) -> Value:
        return self._m_exact("remainder", x0, x1)

    def fma(self, x: Value, y: Value, z: Value) -> Value:
        return self._m_exact("fma", x, y, z)

    def abs(self, x0: Value) -> Value:
        if x0.dtype in FLOATS:
            return self._m("fabs", x0)
        if x0.dtype in SIGNED:
            return self._u("_m.iabs({x}, ZERO)", x0)
        return self._u("{x}", x0)

    def square(self, x0: Value) -> Value:
        return self.mul(x0, x0)

    def reciprocal(self, x0: Value) -> Value:
        return self._u("_m.div(hl.cast({x}.type(), 1), {x}, ZERO)", x0)

    def rsqrt(self, x0: Value) -> Value:
        return self._u("_m.div(hl.cast({x}.type(), 1), hl.sqrt({x}), ZERO)", x0)

    def relu(self, x0: Value) -> Value:
        if x0.dtype == BOOL:
            return self._u("{x}", x0)
        return self._u("hl.select({x} < 0, hl.cast({x}.type(), 0), {x})", x0)

    def sign(self, x0: Value) -> Value:
        return self._m("sign", x0) if x0.dtype != BOOL else self._u("{x}", x0)

    def maximum(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.maximum({a}, {b})", x0, x1)

    def minimum(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.minimum({a}, {b})", x0, x1)

    def pow(self, x0: Value, x1: Value) -> Value:
        if x0.dtype in FLOATS:
            return self._m("fpow", x0, x1)
        return self._b("_m.ipow({a}, {b}, ZERO)", x0, x1)

    def hypot(self, x0: Value, x1: Value) -> Value:
        return self._m("hypot", x0, x1)

    def atan2(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.via64(hl.atan2, {a}, {b})", x0, x1)

    def copysign(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.copysign({a}, {b})", x0, x1)

    def nextafter(self, x0: Value, x1: Value) -> Value:
        bf16 = x0.dtype == torch.bfloat16
        return self._b(f"_m.nextafter({{a}}, {{b}}, {bits(x0.dtype)}, {bf16})", x0, x1)

    def ldexp(self, x0: Value, n: Value) -> Value:
        return self._b("_m.ldexp({a}, {b})", x0, n)

    def frexp(self, x0: Value) -> tuple[Value, Value]:
        pair = self.em.emit(f"_m.frexp({x0})", x0.dtype)
        return (
            self.em.emit(f"{pair}[0]", x0.dtype),
            self.em.emit(f"{pair}[1]", torch.int32),
        )

    # unary float math that Halide has
    def exp(self, x0: Value) -> Value:
        return self._target("exp", x0)

    def exp2(self, x0: Value) -> Value:
        return self._u("_m.fpow(hl.cast({x}.type(), 2), {x})", x0)

    def log(self, x0: Value) -> Value:
        return self._target("log", x0)

    def log2(self, x0: Value) -> Value:
        return self._target("log2", x0)

    def log10(self, x0: Value) -> Value:
        return self._target("log10", x0)

    def sqrt(self, x0: Value) -> Value:
        return self._u("hl.sqrt({x})", x0)

    def sin(self, x0: Value) -> Value:
        return self._target("sin", x0)

    def cos(self, x0: Value) -> Value:
        return self._target("cos", x0)

    def tan(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.tan, {x})", x0)

    def asin(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.asin, {x})", x0)

    def acos(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.acos, {x})", x0)

    def atan(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.atan, {x})", x0)

    def sinh(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.sinh, {x})", x0)

    def cosh(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.cosh, {x})", x0)

    def tanh(self, x0: Value) -> Value:
        return self._target("tanh", x0)

    def asinh(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.asinh, {x})", x0)

    def acosh(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.acosh, {x})", x0)

    def atanh(self, x0: Value) -> Value:
        return self._u("_m.via64(hl.atanh, {x})", x0)

    def floor(self, x0: Value) -> Value:
        return self._u("_m.floor({x})", x0)

    def ceil(self, x0: Value) -> Value:
        return self._u("_m.ceil({x})", x0)

    def trunc(self, x0: Value) -> Value:
        return self._u("hl.trunc({x})", x0)

    def round(self, x0: Value) -> Value:
        return self._u("hl.round({x})", x0)

    def sigmoid(self, x0: Value) -> Value:
        return self._target("sigmoid", x0)

    def expm1(self, x0: Value) -> Value:
        return self._target("expm1", x0)

    def log1p(self, x0: Value) -> Value:
        return self._target("log1p", x0)

    def erf(self, x0: Value) -> Value:
        return self._target("erf", x0)

    def erfc(self, x0: Value) -> Value:
        return self._target("erfc", x0)

    # comparisons
    def eq(self, x0: Value, x1: Value) -> Value:
        return self._b("{a} == {b}", x0, x1, BOOL)

    def ne(self, x0: Value, x1: Value) -> Value:
        return self._b("{a} != {b}", x0, x1, BOOL)

    def lt(self, x0: Value, x1: Value) -> Value:
        return self._b(_bool_cmp(x0, "<"), x0, x1, BOOL)

    def le(self, x0: Value, x1: Value) -> Value:
        return self._b(_bool_cmp(x0, "<="), x0, x1, BOOL)

    def gt(self, x0: Value, x1: Value) -> Value:
        return self._b(_bool_cmp(x0, ">"), x0, x1, BOOL)

    def ge(self, x0: Value, x1: Value) -> Value:
        return self._b(_bool_cmp(x0, ">="), x0, x1, BOOL)

    def isnan(self, x0: Value) -> Value:
        return self._u("_m.isnan({x})", x0, BOOL)

    def isinf(self, x0: Value) -> Value:
        return self._u("_m.isinf({x})", x0, BOOL)

    def signbit(self, x0: Value) -> Value:
        return self._u("_m.signbit({x})", x0, BOOL)

    # bitwise and logical
    def bitwise_and(self, x0: Value, x1: Value) -> Value:
        return self._b("{a} & {b}", x0, x1)

    def bitwise_or(self, x0: Value, x1: Value) -> Value:
        return self._b("{a} | {b}", x0, x1)

    def bitwise_xor(self, x0: Value, x1: Value) -> Value:
        return self._b("{a} != {b}" if x0.dtype == BOOL else "{a} ^ {b}", x0, x1)

    def bitwise_not(self, x0: Value) -> Value:
        return self._u("hl.logical_not({x})" if x0.dtype == BOOL else "~{x}", x0)

    def bitwise_left_shift(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.shl({a}, {b})", x0, x1)

    def bitwise_right_shift(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.shr({a}, {b})", x0, x1)

    def lshift(self, x0: Value, x1: Value) -> Value:
        return self.bitwise_left_shift(x0, x1)

    def rshift(self, x0: Value, x1: Value) -> Value:
        return self.bitwise_right_shift(x0, x1)

    def logical_and(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.truth({a}) & _m.truth({b})", x0, x1, BOOL)

    def logical_or(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.truth({a}) | _m.truth({b})", x0, x1, BOOL)

    def logical_xor(self, x0: Value, x1: Value) -> Value:
        return self._b("_m.truth({a}) != _m.truth({b})", x0, x1, BOOL)

    def logical_not(self, x0: Value) -> Value:
        return self._u("hl.logical_not(_m.truth({x}))", x0, BOOL)

    def and_(self, x0: Value, x1: Value) -> Value:
        return self.logical_and(x0, x1)

    def or_(self, x0: Value, x1: Value) -> Value:
        return self.logical_or(x0, x1)

    def xor(self, x0: Value, x1: Value) -> Value:
        return self.logical_xor(x0, x1)

    # conversions
    def to_dtype(
        self,
        x: Value,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> Value:
        return self.em.emit(f"_m.convert({x}, {_dt(dtype)})", dtype)

    def to_dtype_bitcast(self, x: Value, dtype: torch.dtype, src_dtype: torch.dtype) -> Value:
        return self.em.emit(f"_m.bitcast({x}, {_dt(dtype)}, {_dt(src_dtype)})", dtype)

    def trunc_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self.em.emit(f"_m.convert(hl.trunc({x}), {_dt(dtype)})", dtype)

    def floor_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self.em.emit(f"_m.convert(hl.floor({x}), {_dt(dtype)})", dtype)

    def ceil_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self.em.emit(f"_m.convert(hl.ceil({x}), {_dt(dtype)})", dtype)

    def round_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self.em.emit(f"_m.convert(hl.round({x}), {_dt(dtype)})", dtype)

    def where(self, condition: Value, input: Value, other: Value) -> Value:
        return self.em.emit(f"hl.select(_m.condition({condition}, ZERO), {input}, {other})",
                            input.dtype)

    def identity(self, x: Value) -> Value:
        return self._u("{x}", x)


def _dt(dtype: torch.dtype) -> str:
    return f'"{str(dtype).removeprefix("torch.")}"'


def _bool_cmp(x: Value, op: str) -> str:
    # Halide orders bools only after a cast; False < True as in torch.
    if x.dtype == BOOL:
        return f"hl.cast(hl.UInt(8), {{a}}) {op} hl.cast(hl.UInt(8), {{b}})"
    if x.dtype in FLOATS and op in ("<=", ">="):
        # Halide rewrites a <= b as !(b < a), which is true for NaN; spell it out.
        return f"({{a}} {op[0]} {{b}}) | ({{a}} == {{b}})"
    return f"{{a}} {op} {{b}}"


__all__ = ["INTS", "HalideElementwiseOps"]
