"""`ReferenceMathOps`: the pure value ops of the reference backend, one method per op.

Each op emits one call of the same-named function of `polyduct.reference.runtime` (imported as
`rt` by generated kernels), or of `polyduct.reference.philox` (`rp`) for random numbers. Values
are source expressions (temporary names); `ReferenceOps` adds the kernel-context ops and decides
where emitted lines go.
"""

from __future__ import annotations

import torch

from polyduct.handlers.dtypes import DtypePropagation
from polyduct.reference.render import arg_code

V = str


class ReferenceMathOps:
    """Pointwise ops: `op(args)` emits `tmpN = rt.op(args)` and returns `tmpN`.

    The storage dtype of each value is tracked where known (`_dtype_of`, by DtypePropagation's
    rules) for the few ops whose result depends on it (nextafter on float16 values).
    """

    _dtypes: DtypePropagation
    _dtype_of: dict[V, torch.dtype]

    def _emit(self, expr: str, *, reuse: bool = True) -> str:
        raise NotImplementedError("ReferenceMathOps needs a subclass that places emitted lines")

    def _emit_multi(self, expr: str, count: int) -> tuple[str, ...]:
        raise NotImplementedError("ReferenceMathOps needs a subclass that places emitted lines")

    def _op(self, name: str, *args: object) -> V:
        value = self._emit(f"rt.{name}({', '.join(arg_code(a) for a in args)})")
        return self._typed(value, self._result_dtype(name, args))

    def _typed(self, value: V, dtype: torch.dtype | None) -> V:
        """Record the storage dtype of `value` (None: unknown) and return `value`."""
        if dtype is not None:
            self._dtype_of[value] = dtype
        return value

    def _result_dtype(self, name: str, args: tuple[object, ...]) -> torch.dtype | None:
        """The storage dtype of op `name` on `args`; None when an operand's is unknown."""
        rule = getattr(self._dtypes, name, None)
        operands = []
        for arg in args:
            if isinstance(arg, str):
                if arg not in self._dtype_of:
                    return None
                arg = self._dtype_of[arg]
            operands.append(arg)
        result = rule(*operands) if rule is not None else None
        return result if isinstance(result, torch.dtype) else None

    def abs(self, x0: V) -> V:
        return self._op("abs", x0)

    def acos(self, x0: V) -> V:
        return self._op("acos", x0)

    def acosh(self, x0: V) -> V:
        return self._op("acosh", x0)

    def add(self, x0: V, x1: V) -> V:
        return self._op("add", x0, x1)

    def airy_ai(self, x: V) -> V:
        return self._op("airy_ai", x)

    def and_(self, x0: V, x1: V) -> V:
        return self._op("and_", x0, x1)

    def asin(self, x0: V) -> V:
        return self._op("asin", x0)

    def asinh(self, x0: V) -> V:
        return self._op("asinh", x0)

    def atan(self, x0: V) -> V:
        return self._op("atan", x0)

    def atan2(self, x0: V, x1: V) -> V:
        return self._op("atan2", x0, x1)

    def atanh(self, x0: V) -> V:
        return self._op("atanh", x0)

    def bessel_j0(self, x: V) -> V:
        return self._op("bessel_j0", x)

    def bessel_j1(self, x: V) -> V:
        return self._op("bessel_j1", x)

    def bessel_y0(self, x: V) -> V:
        return self._op("bessel_y0", x)

    def bessel_y1(self, x: V) -> V:
        return self._op("bessel_y1", x)

    def bitwise_and(self, x0: V, x1: V) -> V:
        return self._op("bitwise_and", x0, x1)

    def bitwise_left_shift(self, x0: V, x1: V) -> V:
        return self._op("bitwise_left_shift", x0, x1)

    def bitwise_not(self, x0: V) -> V:
        return self._op("bitwise_not", x0)

    def bitwise_or(self, x0: V, x1: V) -> V:
        return self._op("bitwise_or", x0, x1)

    def bitwise_right_shift(self, x0: V, x1: V) -> V:
        return self._op("bitwise_right_shift", x0, x1)

    def bitwise_xor(self, x0: V, x1: V) -> V:
        return self._op("bitwise_xor", x0, x1)

    def ceil(self, x0: V) -> V:
        return self._op("ceil", x0)

    def ceil_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self._op("ceil_to_int", x, dtype)

    def chebyshev_polynomial_t(self, x: V, y: V) -> V:
        return self._op("chebyshev_polynomial_t", x, y)

    def chebyshev_polynomial_u(self, x: V, y: V) -> V:
        return self._op("chebyshev_polynomial_u", x, y)

    def chebyshev_polynomial_v(self, x: V, y: V) -> V:
        return self._op("chebyshev_polynomial_v", x, y)

    def chebyshev_polynomial_w(self, x: V, y: V) -> V:
        return self._op("chebyshev_polynomial_w", x, y)

    def copysign(self, x0: V, x1: V) -> V:
        return self._op("copysign", x0, x1)

    def cos(self, x0: V) -> V:
        return self._op("cos", x0)

    def cosh(self, x0: V) -> V:
        return self._op("cosh", x0)

    def digamma(self, x: V) -> V:
        return self._op("digamma", x)

    def div_rn(self, x0: V, x1: V) -> V:
        return self._op("div_rn", x0, x1)

    def eq(self, x0: V, x1: V) -> V:
        return self._op("eq", x0, x1)

    def erf(self, x0: V) -> V:
        return self._op("erf", x0)

    def erfc(self, x0: V) -> V:
        return self._op("erfc", x0)

    def erfcx(self, x: V) -> V:
        return self._op("erfcx", x)

    def erfinv(self, x0: V) -> V:
        return self._op("erfinv", x0)

    def exp(self, x0: V) -> V:
        return self._op("exp", x0)

    def exp2(self, x0: V) -> V:
        return self._op("exp2", x0)

    def expm1(self, x0: V) -> V:
        return self._op("expm1", x0)

    def floor(self, x0: V) -> V:
        return self._op("floor", x0)

    def floor_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self._op("floor_to_int", x, dtype)

    def floordiv(self, x0: V, x1: V) -> V:
        return self._op("floordiv", x0, x1)

    def fma(self, x: V, y: V, z: V) -> V:
        return self._op("fma", x, y, z)

    def fmod(self, x0: V, x1: V) -> V:
        return self._op("fmod", x0, x1)

    def gammainc(self, x: V, y: V) -> V:
        return self._op("gammainc", x, y)

    def gammaincc(self, x: V, y: V) -> V:
        return self._op("gammaincc", x, y)

    def ge(self, x0: V, x1: V) -> V:
        return self._op("ge", x0, x1)

    def gt(self, x0: V, x1: V) -> V:
        return self._op("gt", x0, x1)

    def hermite_polynomial_h(self, x: V, y: V) -> V:
        return self._op("hermite_polynomial_h", x, y)

    def hermite_polynomial_he(self, x: V, y: V) -> V:
        return self._op("hermite_polynomial_he", x, y)

    def hypot(self, x0: V, x1: V) -> V:
        return self._op("hypot", x0, x1)

    def i0(self, x: V) -> V:
        return self._op("i0", x)

    def i0e(self, x: V) -> V:
        return self._op("i0e", x)

    def i1(self, x: V) -> V:
        return self._op("i1", x)

    def i1e(self, x: V) -> V:
        return self._op("i1e", x)

    def identity(self, x: V) -> V:
        return self._op("identity", x)

    def igamma(self, x: V, y: V) -> V:
        return self._op("igamma", x, y)

    def igammac(self, x: V, y: V) -> V:
        return self._op("igammac", x, y)

    def int_truediv(self, x0: V, x1: V) -> V:
        return self._op("int_truediv", x0, x1)

    def isinf(self, x0: V) -> V:
        return self._op("isinf", x0)

    def isnan(self, x0: V) -> V:
        return self._op("isnan", x0)

    def laguerre_polynomial_l(self, x: V, y: V) -> V:
        return self._op("laguerre_polynomial_l", x, y)

    def ldexp(self, x0: V, n: V) -> V:
        return self._op("ldexp", x0, n)

    def le(self, x0: V, x1: V) -> V:
        return self._op("le", x0, x1)

    def legendre_polynomial_p(self, x: V, y: V) -> V:
        return self._op("legendre_polynomial_p", x, y)

    def lgamma(self, x0: V) -> V:
        return self._op("lgamma", x0)

    def log(self, x0: V) -> V:
        return self._op("log", x0)

    def log10(self, x0: V) -> V:
        return self._op("log10", x0)

    def log1p(self, x0: V) -> V:
        return self._op("log1p", x0)

    def log2(self, x0: V) -> V:
        return self._op("log2", x0)

    def log_ndtr(self, x: V) -> V:
        return self._op("log_ndtr", x)

    def logical_and(self, x0: V, x1: V) -> V:
        return self._op("logical_and", x0, x1)

    def logical_not(self, x0: V) -> V:
        return self._op("logical_not", x0)

    def logical_or(self, x0: V, x1: V) -> V:
        return self._op("logical_or", x0, x1)

    def logical_xor(self, x0: V, x1: V) -> V:
        return self._op("logical_xor", x0, x1)

    def lshift(self, x0: V, x1: V) -> V:
        return self._op("lshift", x0, x1)

    def lt(self, x0: V, x1: V) -> V:
        return self._op("lt", x0, x1)

    def maximum(self, x0: V, x1: V) -> V:
        return self._op("maximum", x0, x1)

    def minimum(self, x0: V, x1: V) -> V:
        return self._op("minimum", x0, x1)

    def mod(self, x0: V, x1: V) -> V:
        return self._op("mod", x0, x1)

    def modified_bessel_i0(self, x: V) -> V:
        return self._op("modified_bessel_i0", x)

    def modified_bessel_i1(self, x: V) -> V:
        return self._op("modified_bessel_i1", x)

    def modified_bessel_k0(self, x: V) -> V:
        return self._op("modified_bessel_k0", x)

    def modified_bessel_k1(self, x: V) -> V:
        return self._op("modified_bessel_k1", x)

    def mul(self, x0: V, x1: V) -> V:
        return self._op("mul", x0, x1)

    def mul_rn(self, x: V, y: V) -> V:
        return self._op("mul_rn", x, y)

    def ndtr(self, x: V) -> V:
        return self._op("ndtr", x)

    def ndtri(self, x: V) -> V:
        return self._op("ndtri", x)

    def ne(self, x0: V, x1: V) -> V:
        return self._op("ne", x0, x1)

    def neg(self, x0: V) -> V:
        return self._op("neg", x0)

    def nextafter(self, x0: V, x1: V) -> V:
        # float16/bfloat16 values step in their own dtype, not in their float32 compute type
        return self._op("nextafter", x0, x1, self._dtype_of.get(x0))

    def or_(self, x0: V, x1: V) -> V:
        return self._op("or_", x0, x1)

    def polygamma(self, x: V, y: V) -> V:
        return self._op("polygamma", x, y)

    def pow(self, x0: V, x1: V) -> V:
        return self._op("pow", x0, x1)

    def reciprocal(self, x0: V) -> V:
        return self._op("reciprocal", x0)

    def relu(self, x0: V) -> V:
        return self._op("relu", x0)

    def remainder(self, x0: V, x1: V) -> V:
        return self._op("remainder", x0, x1)

    def round(self, x0: V) -> V:
        return self._op("round", x0)

    def round_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self._op("round_to_int", x, dtype)

    def rshift(self, x0: V, x1: V) -> V:
        return self._op("rshift", x0, x1)

    def rsqrt(self, x0: V) -> V:
        return self._op("rsqrt", x0)

    def scaled_modified_bessel_k0(self, x: V) -> V:
        return self._op("scaled_modified_bessel_k0", x)

    def scaled_modified_bessel_k1(self, x: V) -> V:
        return self._op("scaled_modified_bessel_k1", x)

    def shifted_chebyshev_polynomial_t(self, x: V, y: V) -> V:
        return self._op("shifted_chebyshev_polynomial_t", x, y)

    def shifted_chebyshev_polynomial_u(self, x: V, y: V) -> V:
        return self._op("shifted_chebyshev_polynomial_u", x, y)

    def shifted_chebyshev_polynomial_v(self, x: V, y: V) -> V:
        return self._op("shifted_chebyshev_polynomial_v", x, y)

    def shifted_chebyshev_polynomial_w(self, x: V, y: V) -> V:
        return self._op("shifted_chebyshev_polynomial_w", x, y)

    def sigmoid(self, x0: V) -> V:
        return self._op("sigmoid", x0)

    def sign(self, x0: V) -> V:
        return self._op("sign", x0)

    def signbit(self, x0: V) -> V:
        return self._op("signbit", x0)

    def sin(self, x0: V) -> V:
        return self._op("sin", x0)

    def sinh(self, x0: V) -> V:
        return self._op("sinh", x0)

    def spherical_bessel_j0(self, x: V) -> V:
        return self._op("spherical_bessel_j0", x)

    def sqrt(self, x0: V) -> V:
        return self._op("sqrt", x0)

    def square(self, x0: V) -> V:
        return self._op("square", x0)

    def sub(self, x0: V, x1: V) -> V:
        return self._op("sub", x0, x1)

    def tan(self, x0: V) -> V:
        return self._op("tan", x0)

    def tanh(self, x0: V) -> V:
        return self._op("tanh", x0)

    def truediv(self, x0: V, x1: V) -> V:
        return self._op("truediv", x0, x1)

    def trunc(self, x0: V) -> V:
        return self._op("trunc", x0)

    def trunc_to_int(self, x: V, dtype: torch.dtype) -> V:
        return self._op("trunc_to_int", x, dtype)

    def truncdiv(self, x0: V, x1: V) -> V:
        return self._op("truncdiv", x0, x1)

    def where(self, condition: V, input: V, other: V) -> V:
        return self._op("where", condition, input, other)

    def xor(self, x0: V, x1: V) -> V:
        return self._op("xor", x0, x1)

    def zeta(self, x: V, y: V) -> V:
        return self._op("zeta", x, y)

    def frexp(self, x0: V) -> tuple[V, V]:
        mantissa, exponent = self._emit_multi(f"rt.frexp({x0})", 2)
        return mantissa, exponent

    def to_dtype(
        self,
        x: V,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> V:
        return self._op("to_dtype", x, dtype, use_compute_types)

    def to_dtype_bitcast(self, x: V, dtype: torch.dtype, src_dtype: torch.dtype) -> V:
        return self._op("to_dtype_bitcast", x, dtype, src_dtype)

    def rand(self, seed: V, offset: V) -> V:
        return self._emit(f"rp.rand({seed}, {offset})")

    def randn(self, seed: V, offset: V) -> V:
        return self._emit(f"rp.randn({seed}, {offset})")

    def randint64(self, seed: V, offset: V, low: V, high: V) -> V:
        return self._emit(f"rp.randint64({seed}, {offset}, {low}, {high})")
