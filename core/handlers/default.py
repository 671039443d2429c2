"""`DefaultHandler`: every op routed, through a real method, to one `_default` method.

Subclass it to build handlers that treat most ops alike (formatting, counting, forwarding) and
override only the ops that differ. Generated once from `polyduct.ops.OpHandler` by hand-run tooling;
edit it like any other source file. A test checks that it defines exactly the ops of the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic

import sympy
import torch

from polyduct.ops import ReductionType, StoreMode, T


class DefaultHandler(Generic[T]):
    """Routes each op as `self._default(name, args, {})`, args in the protocol's parameter order."""

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} handles no op (asked for {name!r})")

    def abs(self, x0: T) -> T:
        return self._default("abs", (x0,), {})

    def acos(self, x0: T) -> T:
        return self._default("acos", (x0,), {})

    def acosh(self, x0: T) -> T:
        return self._default("acosh", (x0,), {})

    def add(self, x0: T, x1: T) -> T:
        return self._default("add", (x0, x1), {})

    def airy_ai(self, x: T) -> T:
        return self._default("airy_ai", (x,), {})

    def asin(self, x0: T) -> T:
        return self._default("asin", (x0,), {})

    def asinh(self, x0: T) -> T:
        return self._default("asinh", (x0,), {})

    def atan(self, x0: T) -> T:
        return self._default("atan", (x0,), {})

    def atan2(self, x0: T, x1: T) -> T:
        return self._default("atan2", (x0, x1), {})

    def atanh(self, x0: T) -> T:
        return self._default("atanh", (x0,), {})

    def bessel_j0(self, x: T) -> T:
        return self._default("bessel_j0", (x,), {})

    def bessel_j1(self, x: T) -> T:
        return self._default("bessel_j1", (x,), {})

    def bessel_y0(self, x: T) -> T:
        return self._default("bessel_y0", (x,), {})

    def bessel_y1(self, x: T) -> T:
        return self._default("bessel_y1", (x,), {})

    def ceil(self, x0: T) -> T:
        return self._default("ceil", (x0,), {})

    def chebyshev_polynomial_t(self, x: T, y: T) -> T:
        return self._default("chebyshev_polynomial_t", (x, y), {})

    def chebyshev_polynomial_u(self, x: T, y: T) -> T:
        return self._default("chebyshev_polynomial_u", (x, y), {})

    def chebyshev_polynomial_v(self, x: T, y: T) -> T:
        return self._default("chebyshev_polynomial_v", (x, y), {})

    def chebyshev_polynomial_w(self, x: T, y: T) -> T:
        return self._default("chebyshev_polynomial_w", (x, y), {})

    def copysign(self, x0: T, x1: T) -> T:
        return self._default("copysign", (x0, x1), {})

    def cos(self, x0: T) -> T:
        return self._default("cos", (x0,), {})

    def cosh(self, x0: T) -> T:
        return self._default("cosh", (x0,), {})

    def digamma(self, x: T) -> T:
        return self._default("digamma", (x,), {})

    def div_rn(self, x0: T, x1: T) -> T:
        return self._default("div_rn", (x0, x1), {})

    def erf(self, x0: T) -> T:
        return self._default("erf", (x0,), {})

    def erfc(self, x0: T) -> T:
        return self._default("erfc", (x0,), {})

    def erfcx(self, x: T) -> T:
        return self._default("erfcx", (x,), {})

    def erfinv(self, x0: T) -> T:
        return self._default("erfinv", (x0,), {})

    def exp(self, x0: T) -> T:
        return self._default("exp", (x0,), {})

    def exp2(self, x0: T) -> T:
        return self._default("exp2", (x0,), {})

    def expm1(self, x0: T) -> T:
        return self._default("expm1", (x0,), {})

    def floor(self, x0: T) -> T:
        return self._default("floor", (x0,), {})

    def floordiv(self, x0: T, x1: T) -> T:
        return self._default("floordiv", (x0, x1), {})

    def fma(self, x: T, y: T, z: T) -> T:
        return self._default("fma", (x, y, z), {})

    def fmod(self, x0: T, x1: T) -> T:
        return self._default("fmod", (x0, x1), {})

    def frexp(self, x0: T) -> tuple[T, T]:
        return self._default("frexp", (x0,), {})

    def gammainc(self, x: T, y: T) -> T:
        return self._default("gammainc", (x, y), {})

    def gammaincc(self, x: T, y: T) -> T:
        return self._default("gammaincc", (x, y), {})

    def hermite_polynomial_h(self, x: T, y: T) -> T:
        return self._default("hermite_polynomial_h", (x, y), {})

    def hermite_polynomial_he(self, x: T, y: T) -> T:
        return self._default("hermite_polynomial_he", (x, y), {})

    def hypot(self, x0: T, x1: T) -> T:
        return self._default("hypot", (x0, x1), {})

    def i0(self, x: T) -> T:
        return self._default("i0", (x,), {})

    def i0e(self, x: T) -> T:
        return self._default("i0e", (x,), {})

    def i1(self, x: T) -> T:
        return self._default("i1", (x,), {})

    def i1e(self, x: T) -> T:
        return self._default("i1e", (x,), {})

    def igamma(self, x: T, y: T) -> T:
        return self._default("igamma", (x, y), {})

    def igammac(self, x: T, y: T) -> T:
        return self._default("igammac", (x, y), {})

    def int_truediv(self, x0: T, x1: T) -> T:
        return self._default("int_truediv", (x0, x1), {})

    def laguerre_polynomial_l(self, x: T, y: T) -> T:
        return self._default("laguerre_polynomial_l", (x, y), {})

    def ldexp(self, x0: T, n: T) -> T:
        return self._default("ldexp", (x0, n), {})

    def legendre_polynomial_p(self, x: T, y: T) -> T:
        return self._default("legendre_polynomial_p", (x, y), {})

    def lgamma(self, x0: T) -> T:
        return self._default("lgamma", (x0,), {})

    def log(self, x0: T) -> T:
        return self._default("log", (x0,), {})

    def log10(self, x0: T) -> T:
        return self._default("log10", (x0,), {})

    def log1p(self, x0: T) -> T:
        return self._default("log1p", (x0,), {})

    def log2(self, x0: T) -> T:
        return self._default("log2", (x0,), {})

    def log_ndtr(self, x: T) -> T:
        return self._default("log_ndtr", (x,), {})

    def maximum(self, x0: T, x1: T) -> T:
        return self._default("maximum", (x0, x1), {})

    def minimum(self, x0: T, x1: T) -> T:
        return self._default("minimum", (x0, x1), {})

    def mod(self, x0: T, x1: T) -> T:
        return self._default("mod", (x0, x1), {})

    def modified_bessel_i0(self, x: T) -> T:
        return self._default("modified_bessel_i0", (x,), {})

    def modified_bessel_i1(self, x: T) -> T:
        return self._default("modified_bessel_i1", (x,), {})

    def modified_bessel_k0(self, x: T) -> T:
        return self._default("modified_bessel_k0", (x,), {})

    def modified_bessel_k1(self, x: T) -> T:
        return self._default("modified_bessel_k1", (x,), {})

    def mul(self, x0: T, x1: T) -> T:
        return self._default("mul", (x0, x1), {})

    def mul_rn(self, x: T, y: T) -> T:
        return self._default("mul_rn", (x, y), {})

    def ndtr(self, x: T) -> T:
        return self._default("ndtr", (x,), {})

    def ndtri(self, x: T) -> T:
        return self._default("ndtri", (x,), {})

    def neg(self, x0: T) -> T:
        return self._default("neg", (x0,), {})

    def nextafter(self, x0: T, x1: T) -> T:
        return self._default("nextafter", (x0, x1), {})

    def polygamma(self, x: T, y: T) -> T:
        return self._default("polygamma", (x, y), {})

    def pow(self, x0: T, x1: T) -> T:
        return self._default("pow", (x0, x1), {})

    def reciprocal(self, x0: T) -> T:
        return self._default("reciprocal", (x0,), {})

    def relu(self, x0: T) -> T:
        return self._default("relu", (x0,), {})

    def remainder(self, x0: T, x1: T) -> T:
        return self._default("remainder", (x0, x1), {})

    def round(self, x0: T) -> T:
        return self._default("round", (x0,), {})

    def rsqrt(self, x0: T) -> T:
        return self._default("rsqrt", (x0,), {})

    def scaled_modified_bessel_k0(self, x: T) -> T:
        return self._default("scaled_modified_bessel_k0", (x,), {})

    def scaled_modified_bessel_k1(self, x: T) -> T:
        return self._default("scaled_modified_bessel_k1", (x,), {})

    def shifted_chebyshev_polynomial_t(self, x: T, y: T) -> T:
        return self._default("shifted_chebyshev_polynomial_t", (x, y), {})

    def shifted_chebyshev_polynomial_u(self, x: T, y: T) -> T:
        return self._default("shifted_chebyshev_polynomial_u", (x, y), {})

    def shifted_chebyshev_polynomial_v(self, x: T, y: T) -> T:
        return self._default("shifted_chebyshev_polynomial_v", (x, y), {})

    def shifted_chebyshev_polynomial_w(self, x: T, y: T) -> T:
        return self._default("shifted_chebyshev_polynomial_w", (x, y), {})

    def sigmoid(self, x0: T) -> T:
        return self._default("sigmoid", (x0,), {})

    def sign(self, x0: T) -> T:
        return self._default("sign", (x0,), {})

    def sin(self, x0: T) -> T:
        return self._default("sin", (x0,), {})

    def sinh(self, x0: T) -> T:
        return self._default("sinh", (x0,), {})

    def spherical_bessel_j0(self, x: T) -> T:
        return self._default("spherical_bessel_j0", (x,), {})

    def sqrt(self, x0: T) -> T:
        return self._default("sqrt", (x0,), {})

    def square(self, x0: T) -> T:
        return self._default("square", (x0,), {})

    def sub(self, x0: T, x1: T) -> T:
        return self._default("sub", (x0, x1), {})

    def tan(self, x0: T) -> T:
        return self._default("tan", (x0,), {})

    def tanh(self, x0: T) -> T:
        return self._default("tanh", (x0,), {})

    def truediv(self, x0: T, x1: T) -> T:
        return self._default("truediv", (x0, x1), {})

    def trunc(self, x0: T) -> T:
        return self._default("trunc", (x0,), {})

    def truncdiv(self, x0: T, x1: T) -> T:
        return self._default("truncdiv", (x0, x1), {})

    def zeta(self, x: T, y: T) -> T:
        return self._default("zeta", (x, y), {})

    def eq(self, x0: T, x1: T) -> T:
        return self._default("eq", (x0, x1), {})

    def ge(self, x0: T, x1: T) -> T:
        return self._default("ge", (x0, x1), {})

    def gt(self, x0: T, x1: T) -> T:
        return self._default("gt", (x0, x1), {})

    def isinf(self, x0: T) -> T:
        return self._default("isinf", (x0,), {})

    def isnan(self, x0: T) -> T:
        return self._default("isnan", (x0,), {})

    def le(self, x0: T, x1: T) -> T:
        return self._default("le", (x0, x1), {})

    def lt(self, x0: T, x1: T) -> T:
        return self._default("lt", (x0, x1), {})

    def ne(self, x0: T, x1: T) -> T:
        return self._default("ne", (x0, x1), {})

    def signbit(self, x0: T) -> T:
        return self._default("signbit", (x0,), {})

    def and_(self, x0: T, x1: T) -> T:
        return self._default("and_", (x0, x1), {})

    def bitwise_and(self, x0: T, x1: T) -> T:
        return self._default("bitwise_and", (x0, x1), {})

    def bitwise_left_shift(self, x0: T, x1: T) -> T:
        return self._default("bitwise_left_shift", (x0, x1), {})

    def bitwise_not(self, x0: T) -> T:
        return self._default("bitwise_not", (x0,), {})

    def bitwise_or(self, x0: T, x1: T) -> T:
        return self._default("bitwise_or", (x0, x1), {})

    def bitwise_right_shift(self, x0: T, x1: T) -> T:
        return self._default("bitwise_right_shift", (x0, x1), {})

    def bitwise_xor(self, x0: T, x1: T) -> T:
        return self._default("bitwise_xor", (x0, x1), {})

    def logical_and(self, x0: T, x1: T) -> T:
        return self._default("logical_and", (x0, x1), {})

    def logical_not(self, x0: T) -> T:
        return self._default("logical_not", (x0,), {})

    def logical_or(self, x0: T, x1: T) -> T:
        return self._default("logical_or", (x0, x1), {})

    def logical_xor(self, x0: T, x1: T) -> T:
        return self._default("logical_xor", (x0, x1), {})

    def lshift(self, x0: T, x1: T) -> T:
        return self._default("lshift", (x0, x1), {})

    def or_(self, x0: T, x1: T) -> T:
        return self._default("or_", (x0, x1), {})

    def rshift(self, x0: T, x1: T) -> T:
        return self._default("rshift", (x0, x1), {})

    def xor(self, x0: T, x1: T) -> T:
        return self._default("xor", (x0, x1), {})

    def ceil_to_int(self, x: T, dtype: torch.dtype) -> T:
        return self._default("ceil_to_int", (x, dtype), {})

    def floor_to_int(self, x: T, dtype: torch.dtype) -> T:
        return self._default("floor_to_int", (x, dtype), {})

    def round_to_int(self, x: T, dtype: torch.dtype) -> T:
        return self._default("round_to_int", (x, dtype), {})

    def to_dtype(
        self,
        x: T,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> T:
        return self._default("to_dtype", (x, dtype, src_dtype, use_compute_types), {})

    def to_dtype_bitcast(self, x: T, dtype: torch.dtype, src_dtype: torch.dtype) -> T:
        return self._default("to_dtype_bitcast", (x, dtype, src_dtype), {})

    def trunc_to_int(self, x: T, dtype: torch.dtype) -> T:
        return self._default("trunc_to_int", (x, dtype), {})

    def load(self, name: str, index: sympy.Expr) -> T:
        return self._default("load", (name, index), {})

    def store(self, name: str, index: sympy.Expr, value: T, mode: StoreMode = None) -> None:
        return self._default("store", (name, index, value, mode), {})

    def store_reduction(self, name: str, index: sympy.Expr, value: T) -> None:
        return self._default("store_reduction", (name, index, value), {})

    def bucketize(
        self,
        values: T,
        boundaries: tuple[str, sympy.Expr, sympy.Expr, sympy.Expr],
        boundary_indices: T,
        indexing_dtype: torch.dtype,
        right: bool,
        sorter: tuple[str, sympy.Expr] | None = None,
        sorter_indices: T | None = None,
    ) -> T:
        return self._default(
            "bucketize",
            (values, boundaries, boundary_indices, indexing_dtype, right, sorter, sorter_indices),
            {},
        )

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        return self._default("check_bounds", (expr, size, lower, upper), {})

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> T:
        return self._default("index_expr", (expr, dtype), {})

    def indirect_indexing(
        self, x: T, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        return self._default("indirect_indexing", (x, size, check, wrap_neg), {})

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> T:
        return self._default("value_expr", (expr, dtype), {})

    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: ReductionType, value: T
    ) -> T | tuple[T, ...]:
        return self._default("reduction", (dtype, src_dtype, reduction_type, value), {})

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[T, ...], tuple[T, ...]], tuple[T, ...]],
        values: tuple[T, ...],
    ) -> tuple[T, ...]:
        return self._default("scan", (dtypes, combine_fn, values), {})

    def sort(
        self, dtypes: tuple[torch.dtype, ...], values: tuple[T, ...], stable: bool, descending: bool
    ) -> tuple[T, ...]:
        return self._default("sort", (dtypes, values, stable, descending), {})

    def load_seed(self, name: str, offset: T) -> T:
        return self._default("load_seed", (name, offset), {})

    def rand(self, seed: T, offset: T) -> T:
        return self._default("rand", (seed, offset), {})

    def randint64(self, seed: T, offset: T, low: T, high: T) -> T:
        return self._default("randint64", (seed, offset, low, high), {})

    def randn(self, seed: T, offset: T) -> T:
        return self._default("randn", (seed, offset), {})

    def constant(self, value: bool | float, dtype: torch.dtype) -> T:
        return self._default("constant", (value, dtype), {})

    def device_assert_async(self, cond: T, msg: str) -> None:
        return self._default("device_assert_async", (cond, msg), {})

    def identity(self, x: T) -> T:
        return self._default("identity", (x,), {})

    def masked(self, mask: T, body: Callable[[], T], other: T | bool | float) -> T:
        return self._default("masked", (mask, body, other), {})

    def where(self, condition: T, input: T, other: T) -> T:
        return self._default("where", (condition, input, other), {})
