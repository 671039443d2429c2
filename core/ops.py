"""The op protocol: the method list of `OpHandler` *is* polyduct's op set.

Ops are scalar (one element), take operands that are already type-promoted (casts are explicit
`to_dtype` calls) and return the handler's value type `T`. float16/bfloat16 compute in float32 unless
an op says otherwise. Semantics follow the same-named torch op (torch.special for special functions).
`index` arguments are sympy expressions over the kernel's index variables and size symbols.

Adding an op means adding a method here, with a docstring, and nowhere else: every other list of op
names in polyduct is derived from this class (`OP_NAMES`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, Protocol, TypeVar

import sympy
import torch

T = TypeVar("T")

ReductionType = Literal[
    "sum",
    "prod",
    "max",
    "min",
    "argmax",
    "argmin",
    "any",
    "xor_sum",
    "welford_reduce",
    "welford_combine",
    "online_softmax_reduce",
]
REDUCTION_TYPES: Final[tuple[ReductionType, ...]] = (
    "sum",
    "prod",
    "max",
    "min",
    "argmax",
    "argmin",
    "any",
    "xor_sum",
    "welford_reduce",
    "welford_combine",
    "online_softmax_reduce",
)
StoreMode = Literal["atomic_add"] | None


def reduction_num_outputs(reduction_type: ReductionType) -> int:
    """How many values `OpHandler.reduction` returns for `reduction_type`."""
    if reduction_type.startswith("welford"):
        return 3
    return 2 if reduction_type == "online_softmax_reduce" else 1


class OpHandler(Protocol[T]):
    """The op set. Each method is one op; its docstring gives semantics, result dtype and domain."""

    # math
    def abs(self, x0: T) -> T:
        """Absolute value. Keeps x0's dtype."""

    def acos(self, x0: T) -> T:
        """Arccos. Keeps x0's dtype. Floats only."""

    def acosh(self, x0: T) -> T:
        """Arcosh. Keeps x0's dtype. Floats only."""

    def add(self, x0: T, x1: T) -> T:
        """x0 + x1. Keeps x0's dtype."""

    def airy_ai(self, x: T) -> T:
        """Airy Ai. Keeps x's dtype. Floats only."""

    def asin(self, x0: T) -> T:
        """Arcsin. Keeps x0's dtype. Floats only."""

    def asinh(self, x0: T) -> T:
        """Arsinh. Keeps x0's dtype. Floats only."""

    def atan(self, x0: T) -> T:
        """Arctan. Keeps x0's dtype. Floats only."""

    def atan2(self, x0: T, x1: T) -> T:
        """Atan2(x0, x1). Keeps x0's dtype. Floats only."""

    def atanh(self, x0: T) -> T:
        """Artanh. Keeps x0's dtype. Floats only."""

    def bessel_j0(self, x: T) -> T:
        """Bessel J0. Keeps x's dtype. Floats only."""

    def bessel_j1(self, x: T) -> T:
        """Bessel J1. Keeps x's dtype. Floats only."""

    def bessel_y0(self, x: T) -> T:
        """Bessel Y0. Keeps x's dtype. Floats only."""

    def bessel_y1(self, x: T) -> T:
        """Bessel Y1. Keeps x's dtype. Floats only."""

    def ceil(self, x0: T) -> T:
        """Ceil, stays float. Keeps x0's dtype. Floats only."""

    def chebyshev_polynomial_t(self, x: T, y: T) -> T:
        """Chebyshev T_n(x). Keeps x's dtype. Floats only."""

    def chebyshev_polynomial_u(self, x: T, y: T) -> T:
        """Chebyshev U_n. Keeps x's dtype. Floats only."""

    def chebyshev_polynomial_v(self, x: T, y: T) -> T:
        """Chebyshev V_n. Keeps x's dtype. Floats only."""

    def chebyshev_polynomial_w(self, x: T, y: T) -> T:
        """Chebyshev W_n. Keeps x's dtype. Floats only."""

    def copysign(self, x0: T, x1: T) -> T:
        """Magnitude of x0 with sign of x1. Keeps x0's dtype. Floats only."""

    def cos(self, x0: T) -> T:
        """Cosine. Keeps x0's dtype. Floats only."""

    def cosh(self, x0: T) -> T:
        """Hyperbolic cos. Keeps x0's dtype. Floats only."""

    def digamma(self, x: T) -> T:
        """ψ(x). Keeps x's dtype. Floats only."""

    def div_rn(self, x0: T, x1: T) -> T:
        """x0 / x1 with IEEE round-to-nearest (as eager CUDA). Keeps x0's dtype. Floats only."""

    def erf(self, x0: T) -> T:
        """error function. Keeps x0's dtype. Floats only."""

    def erfc(self, x0: T) -> T:
        """1 - erf(x). Keeps x0's dtype. Floats only."""

    def erfcx(self, x: T) -> T:
        """scaled erfc e^{x²}·erfc(x). Keeps x's dtype. Floats only."""

    def erfinv(self, x0: T) -> T:
        """Inverse erf. Keeps x0's dtype. Floats only."""

    def exp(self, x0: T) -> T:
        """e**x. Keeps x0's dtype. Floats only."""

    def exp2(self, x0: T) -> T:
        """2**x. Keeps x0's dtype. Floats only."""

    def expm1(self, x0: T) -> T:
        """e**x - 1 (accurate near 0). Keeps x0's dtype. Floats only."""

    def floor(self, x0: T) -> T:
        """Floor, stays float. Keeps x0's dtype. Floats only."""

    def floordiv(self, x0: T, x1: T) -> T:
        """Python-style integer floor division. Keeps x0's dtype. Ints only."""

    def fma(self, x: T, y: T, z: T) -> T:
        """x*y+z fused. Keeps x's dtype."""

    def fmod(self, x0: T, x1: T) -> T:
        """C fmod (sign of dividend). Keeps x0's dtype. Floats only."""

    def frexp(self, x0: T) -> tuple[T, T]:
        """(mantissa, exponent) with x0 = m * 2**e. Returns (x0's dtype, int32). Floats only."""

    def gammainc(self, x: T, y: T) -> T:
        """= igamma. Keeps x's dtype. Floats only."""

    def gammaincc(self, x: T, y: T) -> T:
        """= igammac. Keeps x's dtype. Floats only."""

    def hermite_polynomial_h(self, x: T, y: T) -> T:
        """physicists' Hermite H_n. Keeps x's dtype. Floats only."""

    def hermite_polynomial_he(self, x: T, y: T) -> T:
        """probabilists' Hermite He_n. Keeps x's dtype. Floats only."""

    def hypot(self, x0: T, x1: T) -> T:
        """Sqrt(x0²+x1²). Keeps x0's dtype. Floats only."""

    def i0(self, x: T) -> T:
        """modified Bessel I0. Keeps x's dtype. Floats only."""

    def i0e(self, x: T) -> T:
        """exp-scaled I0. Keeps x's dtype. Floats only."""

    def i1(self, x: T) -> T:
        """modified Bessel I1. Keeps x's dtype. Floats only."""

    def i1e(self, x: T) -> T:
        """exp-scaled I1. Keeps x's dtype. Floats only."""

    def igamma(self, x: T, y: T) -> T:
        """regularised lower incomplete Γ. Keeps x's dtype. Floats only."""

    def igammac(self, x: T, y: T) -> T:
        """regularised upper incomplete Γ. Keeps x's dtype. Floats only."""

    def int_truediv(self, x0: T, x1: T) -> T:
        """int / int as a float, computed in float64 then rounded to float32. Ints only."""

    def laguerre_polynomial_l(self, x: T, y: T) -> T:
        """Laguerre L_n. Keeps x's dtype. Floats only."""

    def ldexp(self, x0: T, n: T) -> T:
        """x0 * 2**n. Keeps x0's dtype. Floats only."""

    def legendre_polynomial_p(self, x: T, y: T) -> T:
        """Legendre P_n. Keeps x's dtype. Floats only."""

    def lgamma(self, x0: T) -> T:
        """Log of abs(Γ(x)). Keeps x0's dtype. Floats only."""

    def log(self, x0: T) -> T:
        """Natural log. Keeps x0's dtype. Floats only."""

    def log10(self, x0: T) -> T:
        """Log base 10. Keeps x0's dtype. Floats only."""

    def log1p(self, x0: T) -> T:
        """Log(1+x) (accurate near 0). Keeps x0's dtype. Floats only."""

    def log2(self, x0: T) -> T:
        """Log base 2. Keeps x0's dtype. Floats only."""

    def log_ndtr(self, x: T) -> T:
        """log of normal CDF. Keeps x's dtype. Floats only."""

    def maximum(self, x0: T, x1: T) -> T:
        """element max, NaN-propagating like torch.maximum. Keeps x0's dtype. Any dtype."""

    def minimum(self, x0: T, x1: T) -> T:
        """element min, NaN-propagating like torch.minimum. Keeps x0's dtype. Any dtype."""

    def mod(self, x0: T, x1: T) -> T:
        """C-style modulus, sign of x0. Keeps x0's dtype."""

    def modified_bessel_i0(self, x: T) -> T:
        """I0. Keeps x's dtype. Floats only."""

    def modified_bessel_i1(self, x: T) -> T:
        """I1. Keeps x's dtype. Floats only."""

    def modified_bessel_k0(self, x: T) -> T:
        """K0. Keeps x's dtype. Floats only."""

    def modified_bessel_k1(self, x: T) -> T:
        """K1. Keeps x's dtype. Floats only."""

    def mul(self, x0: T, x1: T) -> T:
        """x0 * x1. Keeps x0's dtype."""

    def mul_rn(self, x: T, y: T) -> T:
        """x * y rounded to nearest, never contracted into an FMA. Keeps x's dtype. Floats only."""

    def ndtr(self, x: T) -> T:
        """normal CDF. Keeps x's dtype. Floats only."""

    def ndtri(self, x: T) -> T:
        """inverse normal CDF. Keeps x's dtype. Floats only."""

    def neg(self, x0: T) -> T:
        """-x. Keeps x0's dtype."""

    def nextafter(self, x0: T, x1: T) -> T:
        """Next representable float after x0 toward x1. Keeps x0's dtype. Floats only."""

    def polygamma(self, x: T, y: T) -> T:
        """polygamma(n=x, y). Keeps y's dtype. Floats only."""

    def pow(self, x0: T, x1: T) -> T:
        """x0 ** x1 (float result like torch). Keeps x0's dtype."""

    def reciprocal(self, x0: T) -> T:
        """1/x. Keeps x0's dtype. Floats only."""

    def relu(self, x0: T) -> T:
        """Max(x, 0). Keeps x0's dtype."""

    def remainder(self, x0: T, x1: T) -> T:
        """Python-style modulus, sign of x1; a zero result keeps fmod's sign (x0's), as torch's
        does (-4 % 2 is -0). Keeps x0's dtype."""

    def round(self, x0: T) -> T:
        """Round half to even, stays float. Keeps x0's dtype. Floats only."""

    def rsqrt(self, x0: T) -> T:
        """1/sqrt(x). Keeps x0's dtype. Floats only."""

    def scaled_modified_bessel_k0(self, x: T) -> T:
        """e^x·K0. Keeps x's dtype. Floats only."""

    def scaled_modified_bessel_k1(self, x: T) -> T:
        """e^x·K1. Keeps x's dtype. Floats only."""

    def shifted_chebyshev_polynomial_t(self, x: T, y: T) -> T:
        """shifted Chebyshev T*. Keeps x's dtype. Floats only."""

    def shifted_chebyshev_polynomial_u(self, x: T, y: T) -> T:
        """shifted U*. Keeps x's dtype. Floats only."""

    def shifted_chebyshev_polynomial_v(self, x: T, y: T) -> T:
        """shifted V*. Keeps x's dtype. Floats only."""

    def shifted_chebyshev_polynomial_w(self, x: T, y: T) -> T:
        """shifted W*. Keeps x's dtype. Floats only."""

    def sigmoid(self, x0: T) -> T:
        """1/(1+e**-x). Keeps x0's dtype. Floats only."""

    def sign(self, x0: T) -> T:
        """-1/0/+1. Keeps x0's dtype."""

    def sin(self, x0: T) -> T:
        """Sine. Keeps x0's dtype. Floats only."""

    def sinh(self, x0: T) -> T:
        """Hyperbolic sin. Keeps x0's dtype. Floats only."""

    def spherical_bessel_j0(self, x: T) -> T:
        """spherical j0. Keeps x's dtype. Floats only."""

    def sqrt(self, x0: T) -> T:
        """Square root. Keeps x0's dtype. Floats only."""

    def square(self, x0: T) -> T:
        """x*x. Keeps x0's dtype."""

    def sub(self, x0: T, x1: T) -> T:
        """x0 - x1. Keeps x0's dtype."""

    def tan(self, x0: T) -> T:
        """Tangent. Keeps x0's dtype. Floats only."""

    def tanh(self, x0: T) -> T:
        """Hyperbolic tan. Keeps x0's dtype. Floats only."""

    def truediv(self, x0: T, x1: T) -> T:
        """True division of floats. Keeps x0's dtype. Floats only."""

    def trunc(self, x0: T) -> T:
        """Truncate toward 0, stays float. Keeps x0's dtype. Floats only."""

    def truncdiv(self, x0: T, x1: T) -> T:
        """C-style integer division rounding toward 0. Keeps x0's dtype. Ints only."""

    def zeta(self, x: T, y: T) -> T:
        """Hurwitz ζ(x, y). Keeps x's dtype. Floats only."""

    # comparison
    def eq(self, x0: T, x1: T) -> T:
        """x0 == x1 (bool). Bool result. Any dtype."""

    def ge(self, x0: T, x1: T) -> T:
        """x0 >= x1 (bool). Bool result. Any dtype."""

    def gt(self, x0: T, x1: T) -> T:
        """x0 > x1 (bool). Bool result. Any dtype."""

    def isinf(self, x0: T) -> T:
        """Is ±inf (bool). Bool result. Floats only."""

    def isnan(self, x0: T) -> T:
        """Is NaN (bool). Bool result. Floats only."""

    def le(self, x0: T, x1: T) -> T:
        """x0 <= x1 (bool). Bool result. Any dtype."""

    def lt(self, x0: T, x1: T) -> T:
        """x0 < x1 (bool). Bool result. Any dtype."""

    def ne(self, x0: T, x1: T) -> T:
        """x0 != x1 (bool). Bool result. Any dtype."""

    def signbit(self, x0: T) -> T:
        """Sign bit set, incl. -0.0 (bool). Bool result. Floats only."""

    # bitwise
    def and_(self, x0: T, x1: T) -> T:
        """Boolean AND of two predicates (mask combination). Bool result. Bool only."""

    def bitwise_and(self, x0: T, x1: T) -> T:
        """Integer/bool bitwise AND. Keeps x0's dtype. Ints and bool only."""

    def bitwise_left_shift(self, x0: T, x1: T) -> T:
        """x0 << x1. Keeps x0's dtype. Ints only."""

    def bitwise_not(self, x0: T) -> T:
        """Bitwise NOT. Keeps x0's dtype. Ints and bool only."""

    def bitwise_or(self, x0: T, x1: T) -> T:
        """Bitwise OR. Keeps x0's dtype. Ints and bool only."""

    def bitwise_right_shift(self, x0: T, x1: T) -> T:
        """x0 >> x1 (arithmetic for signed). Keeps x0's dtype. Ints only."""

    def bitwise_xor(self, x0: T, x1: T) -> T:
        """Bitwise XOR. Keeps x0's dtype. Ints and bool only."""

    def logical_and(self, x0: T, x1: T) -> T:
        """Logical AND (bool). Bool result. Any dtype."""

    def logical_not(self, x0: T) -> T:
        """Logical NOT (bool). Bool result. Any dtype."""

    def logical_or(self, x0: T, x1: T) -> T:
        """Logical OR (bool). Bool result. Any dtype."""

    def logical_xor(self, x0: T, x1: T) -> T:
        """Logical XOR (bool). Bool result. Any dtype."""

    def lshift(self, x0: T, x1: T) -> T:
        """Shift-left (sympy/Python-operator flavour). Keeps x0's dtype. Ints only."""

    def or_(self, x0: T, x1: T) -> T:
        """Boolean OR of predicates; in boolean_ops. Bool result. Bool only."""

    def rshift(self, x0: T, x1: T) -> T:
        """Shift-right (sympy/Python-operator flavour). Keeps x0's dtype. Ints only."""

    def xor(self, x0: T, x1: T) -> T:
        """Boolean XOR of predicates; in boolean_ops. Bool result. Bool only."""

    # dtype
    def ceil_to_int(self, x: T, dtype: torch.dtype) -> T:
        """Ceil then convert to integer `dtype`. Result: `dtype`."""

    def floor_to_int(self, x: T, dtype: torch.dtype) -> T:
        """Floor then convert to integer `dtype`. Result: `dtype`."""

    def round_to_int(self, x: T, dtype: torch.dtype) -> T:
        """Round-half-even then convert to integer `dtype`. Result: `dtype`."""

    def to_dtype(
        self,
        x: T,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> T:
        """Convert the value to `dtype`; use_compute_types=False keeps f16/bf16 un-upcast."""

    def to_dtype_bitcast(self, x: T, dtype: torch.dtype, src_dtype: torch.dtype) -> T:
        """Reinterpret the bits of x (of src_dtype) as `dtype`. Result: `dtype`."""

    def trunc_to_int(self, x: T, dtype: torch.dtype) -> T:
        """Truncate toward zero, then convert to integer `dtype`. Result: `dtype`."""

    # memory
    def load(self, name: str, index: sympy.Expr) -> T:
        """Element of buffer `name` at flat element offset `index`. Has the buffer's dtype."""

    def store(self, name: str, index: sympy.Expr, value: T, mode: StoreMode = None) -> None:
        """Write `value` to buffer `name` at `index`; `mode` None or 'atomic_add'. No value."""

    def store_reduction(self, name: str, index: sympy.Expr, value: T) -> None:
        """Write the finished accumulator of a reduction to `name` at `index`. Result: no value."""

    # indexing
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
        """searchsorted of `values` in boundaries (name, length, numel, stride). Returns
        indexing_dtype.
        """

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        """Raise an index error unless 0 <= expr (lower) and expr < size (upper). No value."""

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> T:
        """A sympy index expression as a kernel value of `dtype` (advisory). Result: `dtype`."""

    def indirect_indexing(
        self,
        x: T,
        size: sympy.Expr,
        check: bool = True,
        wrap_neg: bool = True,
    ) -> sympy.Expr:
        """Integer value -> sympy symbol for index exprs; check bounds, wrap negatives."""

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> T:
        """A sympy expression as a value whose `dtype` is honoured (e.g. arange data)."""

    # reduction
    def reduction(
        self,
        dtype: torch.dtype,
        src_dtype: torch.dtype,
        reduction_type: ReductionType,
        value: T,
    ) -> T | tuple[T, ...]:
        """Combine `value` over the reduction dims; 1-3 results (reduction_num_outputs)."""

    # scan
    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[T, ...], tuple[T, ...]], tuple[T, ...]],
        values: tuple[T, ...],
    ) -> tuple[T, ...]:
        """Inclusive associative scan of `values` over the reduction dim with `combine_fn`."""

    def sort(
        self,
        dtypes: tuple[torch.dtype, ...],
        values: tuple[T, ...],
        stable: bool,
        descending: bool,
    ) -> tuple[T, ...]:
        """Sort `values` over the reduction dim, first value the key. Results have `dtypes`."""

    # random
    def load_seed(self, name: str, offset: T) -> T:
        """The RNG seed in seed buffer `name` at integer `offset`. Result: int64."""

    def rand(self, seed: T, offset: T) -> T:
        """Uniform [0, 1) float32 from (seed, offset), counter-based (Philox-style)."""

    def randint64(self, seed: T, offset: T, low: T, high: T) -> T:
        """Int64 uniform in [low, high) from (seed, offset). Result: int64."""

    def randn(self, seed: T, offset: T) -> T:
        """Standard-normal float from (seed, int32 offset). Result: float32."""

    # other
    def constant(self, value: bool | float, dtype: torch.dtype) -> T:
        """Scalar literal of the given dtype. Result: `dtype`."""

    def device_assert_async(self, cond: T, msg: str) -> None:
        """emit a device-side assertion that `cond` holds, with message `msg`. Result: no value."""

    def identity(self, x: T) -> T:
        """Returns its input; exists only to force a CSE temporary. Keeps x's dtype. Any dtype."""

    def masked(self, mask: T, body: Callable[[], T], other: T | bool | float) -> T:
        """`body()` with loads predicated on `mask`; `other` (value or scalar) where it is false."""

    def where(self, condition: T, input: T, other: T) -> T:
        """`input` where `condition` else `other`. Has input's dtype. Any dtype."""


OP_NAMES: Final[frozenset[str]] = frozenset(
    name for name in vars(OpHandler) if not name.startswith("_") and callable(vars(OpHandler)[name])
)


def missing_ops(ops_cls: type) -> list[str]:
    """Ops that `ops_cls` neither defines nor inherits from a base other than `OpHandler`."""
    return sorted(
        name for name in OP_NAMES if getattr(ops_cls, name, None) in (None, vars(OpHandler)[name])
    )
