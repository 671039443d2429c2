"""`CppOps`: the C++ op table. Arithmetic and bits come from `CStyleOps`, special functions from
`SpecialFnOps`; memory, indexing, reductions, scans and sorts are handed to the kernel `Emitter`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

import sympy
import torch

from polyduct.codegen import Value
from polyduct.ops import ReductionType, StoreMode
from polyduct_cpp.ctypes_map import compute_type, literal, storage_type
from polyduct_cpp.special_ops import SpecialFnOps


@final
class CppOps(SpecialFnOps):
    """C++ expressions, one method per op; values are typed temporaries (`Value`)."""

    def _std(self, op: str, fn: str, *args: Value) -> Value:
        return self._v(op, f"std::{fn}({', '.join(a.name for a in args)})", *args)

    def acos(self, x0: Value) -> Value:
        return self._std("acos", "acos", x0)

    def acosh(self, x0: Value) -> Value:
        return self._std("acosh", "acosh", x0)

    def asin(self, x0: Value) -> Value:
        return self._std("asin", "asin", x0)

    def asinh(self, x0: Value) -> Value:
        return self._std("asinh", "asinh", x0)

    def atan(self, x0: Value) -> Value:
        return self._std("atan", "atan", x0)

    def atan2(self, x0: Value, x1: Value) -> Value:
        return self._std("atan2", "atan2", x0, x1)

    def atanh(self, x0: Value) -> Value:
        return self._std("atanh", "atanh", x0)

    def ceil(self, x0: Value) -> Value:
        return self._std("ceil", "ceil", x0)

    def copysign(self, x0: Value, x1: Value) -> Value:
        return self._std("copysign", "copysign", x0, x1)

    def cos(self, x0: Value) -> Value:
        return self._std("cos", "cos", x0)

    def cosh(self, x0: Value) -> Value:
        return self._v("cosh", f"pd_cosh({x0})", x0)

    def erf(self, x0: Value) -> Value:
        return self._v("erf", f"pd_erf({x0})", x0)

    def erfc(self, x0: Value) -> Value:
        return self._std("erfc", "erfc", x0)

    def exp(self, x0: Value) -> Value:
        return self._std("exp", "exp", x0)

    def exp2(self, x0: Value) -> Value:
        return self._std("exp2", "exp2", x0)

    def expm1(self, x0: Value) -> Value:
        return self._std("expm1", "expm1", x0)

    def floor(self, x0: Value) -> Value:
        return self._std("floor", "floor", x0)

    def fma(self, x: Value, y: Value, z: Value) -> Value:
        return self._std("fma", "fma", x, y, z)

    def fmod(self, x0: Value, x1: Value) -> Value:
        return self._v("fmod", f"pd_mod({x0}, {x1})", x0, x1)

    def hypot(self, x0: Value, x1: Value) -> Value:
        return self._std("hypot", "hypot", x0, x1)

    def lgamma(self, x0: Value) -> Value:
        return self._v("lgamma", f"pd_lgamma({x0})", x0)

    def log(self, x0: Value) -> Value:
        return self._std("log", "log", x0)

    def log10(self, x0: Value) -> Value:
        return self._std("log10", "log10", x0)

    def log1p(self, x0: Value) -> Value:
        return self._std("log1p", "log1p", x0)

    def log2(self, x0: Value) -> Value:
        return self._std("log2", "log2", x0)

    def round(self, x0: Value) -> Value:
        return self._std("round", "nearbyint", x0)  # half to even in the default rounding mode

    def sin(self, x0: Value) -> Value:
        return self._std("sin", "sin", x0)

    def sinh(self, x0: Value) -> Value:
        return self._v("sinh", f"pd_sinh({x0})", x0)

    def sqrt(self, x0: Value) -> Value:
        return self._std("sqrt", "sqrt", x0)

    def tan(self, x0: Value) -> Value:
        return self._std("tan", "tan", x0)

    def tanh(self, x0: Value) -> Value:
        return self._std("tanh", "tanh", x0)

    def trunc(self, x0: Value) -> Value:
        return self._std("trunc", "trunc", x0)

    def reciprocal(self, x0: Value) -> Value:
        return self._v("reciprocal", f"{compute_type(x0.dtype)}(1) / {x0}", x0)

    def rsqrt(self, x0: Value) -> Value:
        return self._v("rsqrt", f"{compute_type(x0.dtype)}(1) / std::sqrt({x0})", x0)

    def sigmoid(self, x0: Value) -> Value:
        return self._v("sigmoid", f"pd_sigmoid({x0})", x0)

    def pow(self, x0: Value, x1: Value) -> Value:
        if x0.dtype.is_floating_point:
            return self._v("pow", f"std::pow({x0}, {self._k.coerce(x1, x0.dtype)})", x0, x1)
        return self._v("pow", f"pd_ipow<int64_t>({x0}, {x1})", x0, x1)

    def ldexp(self, x0: Value, n: Value) -> Value:
        return self._v("ldexp", f"pd_ldexp({x0}, {self._k.coerce(n, x0.dtype)})", x0, n)

    def nextafter(self, x0: Value, x1: Value) -> Value:
        # float16/bfloat16 values step in their own dtype (docs/conformance.md, oracle audit).
        narrow = {torch.float16: "pd_half", torch.bfloat16: "pd_bf16"}.get(x0.dtype)
        if narrow is None:
            return self._std("nextafter", "nextafter", x0, x1)
        expr = f"pd_nextafter16<{narrow}>({x0}, {self._k.coerce(x1, x0.dtype)})"
        return self._v("nextafter", expr, x0, x1)

    def int_truediv(self, x0: Value, x1: Value) -> Value:
        expr = f"static_cast<double>({x0}) / static_cast<double>({x1})"
        return self._v("int_truediv", expr, x0, x1)

    def frexp(self, x0: Value) -> tuple[Value, Value]:
        return self._k.frexp(x0)

    def isinf(self, x0: Value) -> Value:
        return self._v("isinf", f"std::isinf({x0})", x0)

    def isnan(self, x0: Value) -> Value:
        return self._v("isnan", f"std::isnan({x0})", x0)

    def signbit(self, x0: Value) -> Value:
        return self._v("signbit", f"pd_signbit({x0})", x0)

    # dtype
    def _to_int(self, fn: str, x: Value, dtype: torch.dtype) -> Value:
        inner = f"std::{fn}({x})" if x.dtype.is_floating_point else x.name
        return self._k.value(f"static_cast<int64_t>({inner})", dtype)

    def ceil_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self._to_int("ceil", x, dtype)

    def floor_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self._to_int("floor", x, dtype)

    def round_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self._to_int("nearbyint", x, dtype)

    def trunc_to_int(self, x: Value, dtype: torch.dtype) -> Value:
        return self._to_int("trunc", x, dtype)

    def to_dtype(
        self,
        x: Value,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> Value:
        return self._k.value(self._k.convert(x, dtype), dtype)

    def to_dtype_bitcast(self, x: Value, dtype: torch.dtype, src_dtype: torch.dtype) -> Value:
        bits = {
            torch.float16: f"pd_bitcast<uint16_t>(static_cast<pd_half>({x}))",
            torch.bfloat16: f"pd_f32_to_bf16({x})",
        }.get(src_dtype, f"static_cast<{storage_type(src_dtype)}>({x})")
        if dtype == torch.float16:
            expr = f"static_cast<float>(pd_bitcast<pd_half>({bits}))"
        elif dtype == torch.bfloat16:
            expr = f"pd_bf16_to_f32(pd_bitcast<uint16_t>({bits}))"
        elif dtype == torch.bool:
            expr = f"static_cast<bool>({bits})"
        else:
            expr = f"pd_bitcast<{storage_type(dtype)}>({bits})"
        return self._k.value(expr, dtype)

    # memory and indexing
    def load(self, name: str, index: sympy.Expr) -> Value:
        return self._k.load(name, index)

    def store(self, name: str, index: sympy.Expr, value: Value, mode: StoreMode = None) -> None:
        self._k.store(name, index, value, mode)

    def store_reduction(self, name: str, index: sympy.Expr, value: Value) -> None:
        self._k.store_reduction(name, index, value)

    def bucketize(
        self,
        values: Value,
        boundaries: tuple[str, sympy.Expr, sympy.Expr, sympy.Expr],
        boundary_indices: Value,
        indexing_dtype: torch.dtype,
        right: bool,
        sorter: tuple[str, sympy.Expr] | None = None,
        sorter_indices: Value | None = None,
    ) -> Value:
        return self._k.bucketize(
            values, boundaries, boundary_indices, indexing_dtype, right, sorter, sorter_indices
        )

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        self._k.check_bounds(expr, size, lower, upper)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Value:
        return self._k.value(f"static_cast<int64_t>({self._k.index(expr)})", dtype)

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Value:
        return self._k.value(self._k.index(expr), dtype)

    def indirect_indexing(
        self, x: Value, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        return self._k.indirect(x, size, check, wrap_neg)

    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: ReductionType, value: Any
    ) -> Value | tuple[Value, ...]:
        return self._k.reduction(dtype, reduction_type, value)

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[Value, ...], tuple[Value, ...]], tuple[Value, ...]],
        values: tuple[Value, ...],
    ) -> tuple[Value, ...]:
        return self._k.scan(dtypes, combine_fn, values)

    def sort(
        self,
        dtypes: tuple[torch.dtype, ...],
        values: tuple[Value, ...],
        stable: bool,
        descending: bool,
    ) -> tuple[Value, ...]:
        return self._k.sort(dtypes, values, descending)

    # random
    def load_seed(self, name: str, offset: Value) -> Value:
        return self._k.load_at(name, offset.name, torch.int64)

    def rand(self, seed: Value, offset: Value) -> Value:
        return self._v("rand", f"pd_rand({seed}, {offset})", seed, offset)

    def randn(self, seed: Value, offset: Value) -> Value:
        return self._v("randn", f"pd_randn({seed}, {offset})", seed, offset)

    def randint64(self, seed: Value, offset: Value, low: Value, high: Value) -> Value:
        expr = f"pd_randint64({seed}, {offset}, {low}, {high})"
        return self._v("randint64", expr, seed, offset, low, high)

    # other
    def constant(self, value: bool | float, dtype: torch.dtype) -> Value:
        return Value(literal(value, dtype), dtype)

    def device_assert_async(self, cond: Value, msg: str) -> None:
        self._k.device_assert(cond, msg)

    def masked(self, mask: Value, body: Callable[[], Any], other: Any) -> Any:
        return self._k.masked(mask, body, other)
