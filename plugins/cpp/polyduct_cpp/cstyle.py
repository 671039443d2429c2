"""`CStyleOps`: the ops every C-like target spells the same way (arithmetic, comparisons, bits).

Values are `polyduct.codegen.Value`s: the name of a typed C++ temporary (or a literal) plus its torch dtype. Result
dtypes come from `polyduct.handlers.dtypes.DtypePropagation`, so an op method only spells its C++.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from polyduct.codegen import Value

if TYPE_CHECKING:
    from polyduct_cpp.stage import StageEmitter


class CStyleOps:
    """Arithmetic, comparison, logical and bitwise ops in C syntax (shared C-family spelling)."""

    def __init__(self, emitter: StageEmitter) -> None:
        self._k = emitter

    def _v(self, op: str, expr: str, *args: Value) -> Value:
        """A temporary holding `expr`, typed by DtypePropagation's rule for `op`."""
        dtype = getattr(self._k.dtypes, op)(*(a.dtype for a in args))
        return self._k.value(expr, dtype)

    def add(self, x0: Value, x1: Value) -> Value:
        return self._v("add", f"{x0} + {x1}", x0, x1)

    def sub(self, x0: Value, x1: Value) -> Value:
        return self._v("sub", f"{x0} - {x1}", x0, x1)

    def mul(self, x0: Value, x1: Value) -> Value:
        return self._v("mul", f"{x0} * {x1}", x0, x1)

    def mul_rn(self, x: Value, y: Value) -> Value:
        # Kernels compile with -ffp-contract=off, so a product is never fused into an FMA.
        return self._v("mul_rn", f"{x} * {y}", x, y)

    def truediv(self, x0: Value, x1: Value) -> Value:
        return self._v("truediv", f"{x0} / {x1}", x0, x1)

    def div_rn(self, x0: Value, x1: Value) -> Value:
        return self._v("div_rn", f"{x0} / {x1}", x0, x1)

    def truncdiv(self, x0: Value, x1: Value) -> Value:
        return self._v("truncdiv", f"{x0} / {x1}", x0, x1)

    def floordiv(self, x0: Value, x1: Value) -> Value:
        return self._v("floordiv", f"pd_floordiv({x0}, {x1})", x0, x1)

    def mod(self, x0: Value, x1: Value) -> Value:
        return self._v("mod", f"pd_mod({x0}, {x1})", x0, x1)

    def remainder(self, x0: Value, x1: Value) -> Value:
        return self._v("remainder", f"pd_remainder({x0}, {x1})", x0, x1)

    def neg(self, x0: Value) -> Value:
        return self._v("neg", f"-{x0}", x0)

    def square(self, x0: Value) -> Value:
        return self._v("square", f"{x0} * {x0}", x0)

    def abs(self, x0: Value) -> Value:
        if x0.dtype.is_floating_point:
            return self._v("abs", f"std::fabs({x0})", x0)
        if x0.dtype == torch.bool:
            return self._v("abs", f"{x0}", x0)
        return self._v("abs", f"({x0} < 0 ? -{x0} : {x0})", x0)

    def relu(self, x0: Value) -> Value:
        return self._v("relu", f"({x0} < 0 ? 0 : {x0})", x0)

    def sign(self, x0: Value) -> Value:
        return self._v("sign", f"pd_sign({x0})", x0)

    def maximum(self, x0: Value, x1: Value) -> Value:
        return self._v("maximum", f"pd_maximum({x0}, {x1})", x0, x1)

    def minimum(self, x0: Value, x1: Value) -> Value:
        return self._v("minimum", f"pd_minimum({x0}, {x1})", x0, x1)

    def where(self, condition: Value, input: Value, other: Value) -> Value:
        dtype = input.dtype
        other_expr = self._k.coerce(other, dtype)
        input_expr = self._k.coerce(input, dtype)
        return self._k.value(f"({condition} ? {input_expr} : {other_expr})", dtype)

    # comparison
    def eq(self, x0: Value, x1: Value) -> Value:
        return self._v("eq", f"{x0} == {x1}", x0, x1)

    def ne(self, x0: Value, x1: Value) -> Value:
        return self._v("ne", f"{x0} != {x1}", x0, x1)

    def lt(self, x0: Value, x1: Value) -> Value:
        return self._v("lt", f"{x0} < {x1}", x0, x1)

    def le(self, x0: Value, x1: Value) -> Value:
        return self._v("le", f"{x0} <= {x1}", x0, x1)

    def gt(self, x0: Value, x1: Value) -> Value:
        return self._v("gt", f"{x0} > {x1}", x0, x1)

    def ge(self, x0: Value, x1: Value) -> Value:
        return self._v("ge", f"{x0} >= {x1}", x0, x1)

    # logical (any dtype: non-zero is true, NaN included)
    def logical_and(self, x0: Value, x1: Value) -> Value:
        return self._v("logical_and", f"{_b(x0)} && {_b(x1)}", x0, x1)

    def logical_or(self, x0: Value, x1: Value) -> Value:
        return self._v("logical_or", f"{_b(x0)} || {_b(x1)}", x0, x1)

    def logical_xor(self, x0: Value, x1: Value) -> Value:
        return self._v("logical_xor", f"{_b(x0)} != {_b(x1)}", x0, x1)

    def logical_not(self, x0: Value) -> Value:
        return self._v("logical_not", f"!{_b(x0)}", x0)

    def and_(self, x0: Value, x1: Value) -> Value:
        return self._v("and_", f"{_b(x0)} && {_b(x1)}", x0, x1)

    def or_(self, x0: Value, x1: Value) -> Value:
        return self._v("or_", f"{_b(x0)} || {_b(x1)}", x0, x1)

    def xor(self, x0: Value, x1: Value) -> Value:
        return self._v("xor", f"{_b(x0)} != {_b(x1)}", x0, x1)

    # bitwise
    def bitwise_and(self, x0: Value, x1: Value) -> Value:
        return self._v("bitwise_and", f"{x0} & {x1}", x0, x1)

    def bitwise_or(self, x0: Value, x1: Value) -> Value:
        return self._v("bitwise_or", f"{x0} | {x1}", x0, x1)

    def bitwise_xor(self, x0: Value, x1: Value) -> Value:
        return self._v("bitwise_xor", f"{x0} ^ {x1}", x0, x1)

    def bitwise_not(self, x0: Value) -> Value:
        expr = f"!{x0}" if x0.dtype == torch.bool else f"~{x0}"
        return self._v("bitwise_not", expr, x0)

    def bitwise_left_shift(self, x0: Value, x1: Value) -> Value:
        return self._v(
            "bitwise_left_shift", f"pd_shl({x0}, {self._k.coerce(x1, x0.dtype)})", x0, x1
        )

    def bitwise_right_shift(self, x0: Value, x1: Value) -> Value:
        expr = f"pd_shr({x0}, {self._k.coerce(x1, x0.dtype)})"
        return self._v("bitwise_right_shift", expr, x0, x1)

    def lshift(self, x0: Value, x1: Value) -> Value:
        return self._v("lshift", f"pd_shl({x0}, {self._k.coerce(x1, x0.dtype)})", x0, x1)

    def rshift(self, x0: Value, x1: Value) -> Value:
        return self._v("rshift", f"pd_shr({x0}, {self._k.coerce(x1, x0.dtype)})", x0, x1)

    def identity(self, x: Value) -> Value:
        return self._k.value(x.name, x.dtype, reuse=False)


def _b(x: Any) -> str:
    """`x` as a C++ bool (non-zero and NaN are true)."""
    return f"static_cast<bool>({x})"
