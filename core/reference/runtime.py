"""Run-time semantics of the pointwise ops for reference kernels, on whole torch tensors.

Generated reference kernels call these functions (imported as `rt`) with tensors that cover the
whole iteration space. Values are torch tensors in their compute dtype: float16/bfloat16 data is
held in float32 (docs/conventions.md); integer ops run in the operand's own dtype, so they wrap
exactly as torch does. Every binary op keeps its first operand's dtype, as the op set states.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import torch

from polyduct.reference import exact

Tensor = torch.Tensor
_LOW: frozenset[torch.dtype] = frozenset({torch.float16, torch.bfloat16})


def compute(dtype: torch.dtype) -> torch.dtype:
    """The dtype values of `dtype` are held in: float32 for float16/bfloat16."""
    return torch.float32 if dtype in _LOW else dtype


def _keep(result: Tensor, like: Tensor) -> Tensor:
    return result if result.dtype == like.dtype else result.to(like.dtype)


def constant(value: bool | float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A 0-d tensor holding `value` rounded to `dtype`, in `dtype`'s compute type."""
    return torch.tensor(value, dtype=dtype, device=device).to(compute(dtype))


# math
abs = torch.abs
acos = torch.acos
acosh = torch.acosh
asin = torch.asin
asinh = torch.asinh
atan = torch.atan
atanh = torch.atanh
ceil = torch.ceil
cos = torch.cos
cosh = exact.cosh
digamma = torch.special.digamma
erf = torch.special.erf
erfc = torch.special.erfc
erfcx = torch.special.erfcx
erfinv = torch.special.erfinv
exp = torch.exp
exp2 = torch.exp2
expm1 = torch.special.expm1
floor = torch.floor
i0 = torch.special.i0
i0e = torch.special.i0e
i1 = torch.special.i1
i1e = torch.special.i1e
lgamma = torch.lgamma
log = torch.log
log10 = torch.log10
log1p = torch.log1p
log2 = torch.log2
log_ndtr = torch.special.log_ndtr
modified_bessel_i0 = torch.special.modified_bessel_i0
modified_bessel_i1 = torch.special.modified_bessel_i1
modified_bessel_k0 = torch.special.modified_bessel_k0
modified_bessel_k1 = torch.special.modified_bessel_k1
ndtri = torch.special.ndtri
neg = torch.neg
reciprocal = torch.reciprocal
round = torch.round
rsqrt = torch.rsqrt
scaled_modified_bessel_k0 = torch.special.scaled_modified_bessel_k0
scaled_modified_bessel_k1 = torch.special.scaled_modified_bessel_k1
sigmoid = torch.sigmoid
sin = torch.sin
sinh = exact.sinh
spherical_bessel_j0 = torch.special.spherical_bessel_j0
sqrt = exact.sqrt
ndtr = exact.ndtr
tan = torch.tan
tanh = torch.tanh
trunc = torch.trunc
identity = torch.Tensor.clone


def add(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.add(a, b), a)


def sub(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype == torch.bool:  # torch refuses bool subtraction; xor is the mod-2 difference
        return torch.logical_xor(a, b)
    return _keep(torch.sub(a, b), a)


def mul(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.mul(a, b), a)


mul_rn = mul


def truediv(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.div(a, b), a)


div_rn = truediv


def int_truediv(a: Tensor, b: Tensor) -> Tensor:
    """int / int computed in float64, then rounded to float32 (the op's docstring)."""
    return (a.to(torch.float64) / b.to(torch.float64)).to(torch.float32)


def floordiv(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.div(a, b, rounding_mode="floor"), a)


def truncdiv(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.div(a, b, rounding_mode="trunc"), a)


def mod(a: Tensor, b: Tensor) -> Tensor:
    return _keep(exact.fmod(a, b), a)


fmod = mod


def remainder(a: Tensor, b: Tensor) -> Tensor:
    return _keep(exact.remainder(a, b), a)


def fma(x: Tensor, y: Tensor, z: Tensor) -> Tensor:
    """x*y+z with one rounding: exact in float64 for float32 and narrower operands."""
    if x.dtype in (torch.float32, torch.float16, torch.bfloat16):
        wide = x.double() * y.double() + z.double()
        return wide.to(x.dtype)
    if x.dtype != torch.float64:
        return _keep(x * y + z, x)
    # float64 products are not exact in float64: round the exact rational x*y+z once.
    xs, ys, zs = (torch.broadcast_tensors(x, y, z)[i].reshape(-1).tolist() for i in range(3))
    out = [_fma64(a, b, c) for a, b, c in zip(xs, ys, zs, strict=True)]
    return torch.tensor(out, dtype=x.dtype, device=x.device).reshape(
        torch.broadcast_shapes(x.shape, y.shape, z.shape)
    )


def _fma64(a: float, b: float, c: float) -> float:
    if not all(math.isfinite(v) for v in (a, b, c)):
        return a * b + c  # inf/NaN results do not depend on the rounding
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the sign of an exact zero follows IEEE's rule for x*y + z
    try:
        return float(exact)  # correctly rounded
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def pow(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.pow(a, b), a)


def atan2(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.atan2(a, b), a)


def copysign(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.copysign(a, b), a)


def hypot(a: Tensor, b: Tensor) -> Tensor:
    return _keep(exact.hypot(a, b), a)


def nextafter(a: Tensor, b: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Step in `dtype`, the storage dtype of a (float16 values step as float16)."""
    return _keep(exact.nextafter(a, b, dtype), a)


def ldexp(a: Tensor, n: Tensor) -> Tensor:
    return _keep(torch.ldexp(a, n), a)


def frexp(x: Tensor) -> tuple[Tensor, Tensor]:
    mantissa, exponent = torch.frexp(x)
    return mantissa, exponent.to(torch.int32)


def maximum(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.maximum(a, b.to(a.dtype)), a)


def minimum(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.minimum(a, b.to(a.dtype)), a)


def relu(x: Tensor) -> Tensor:
    if x.dtype == torch.bool:
        return x.clone()
    return torch.relu(x)


def sign(x: Tensor) -> Tensor:
    if x.dtype == torch.bool:
        return x.clone()
    return torch.sign(x)


def square(x: Tensor) -> Tensor:
    return mul(x, x)


def airy_ai(x: Tensor) -> Tensor:
    return exact.decomposed("airy_ai", x)


def bessel_j0(x: Tensor) -> Tensor:
    return exact.decomposed("bessel_j0", x)


def bessel_j1(x: Tensor) -> Tensor:
    return exact.decomposed("bessel_j1", x)


def bessel_y0(x: Tensor) -> Tensor:
    return exact.decomposed("bessel_y0", x)


def bessel_y1(x: Tensor) -> Tensor:
    return exact.decomposed("bessel_y1", x)


def gammainc(x: Tensor, y: Tensor) -> Tensor:
    return exact.decomposed("igamma", x, y)


def gammaincc(x: Tensor, y: Tensor) -> Tensor:
    return exact.decomposed("igammac", x, y)


igamma = gammainc
igammac = gammaincc


def zeta(x: Tensor, y: Tensor) -> Tensor:
    return _keep(torch.special.zeta(x, y), x)


def polygamma(n: Tensor, y: Tensor) -> Tensor:
    """polygamma(n, y) for a tensor of orders `n`: torch takes one int order per call."""
    n, y = torch.broadcast_tensors(n, y)
    result = torch.full_like(y, float("nan"))
    for order in torch.unique(n).tolist():
        if math.isfinite(order) and order == int(order) and order >= 0:
            result = torch.where(n == order, torch.special.polygamma(int(order), y), result)
    return result


def _polynomial(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, n: Tensor) -> Tensor:
    """ATen's polynomial, with its scalar answers at x = NaN (docs/conformance.md)."""
    return _keep(exact.polynomial_at_nan(x, n, fn(x, n)), x)


def chebyshev_polynomial_t(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.chebyshev_polynomial_t, x, n)


def chebyshev_polynomial_u(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.chebyshev_polynomial_u, x, n)


def chebyshev_polynomial_v(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.chebyshev_polynomial_v, x, n)


def chebyshev_polynomial_w(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.chebyshev_polynomial_w, x, n)


def shifted_chebyshev_polynomial_t(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.shifted_chebyshev_polynomial_t, x, n)


def shifted_chebyshev_polynomial_u(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.shifted_chebyshev_polynomial_u, x, n)


def shifted_chebyshev_polynomial_v(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.shifted_chebyshev_polynomial_v, x, n)


def shifted_chebyshev_polynomial_w(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.shifted_chebyshev_polynomial_w, x, n)


def hermite_polynomial_h(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.hermite_polynomial_h, x, n)


def hermite_polynomial_he(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.hermite_polynomial_he, x, n)


def laguerre_polynomial_l(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.laguerre_polynomial_l, x, n)


def legendre_polynomial_p(x: Tensor, n: Tensor) -> Tensor:
    return _polynomial(torch.special.legendre_polynomial_p, x, n)


# comparison
eq = torch.eq
ge = torch.ge
gt = torch.gt
le = torch.le
lt = torch.lt
ne = torch.ne
isinf = torch.isinf
isnan = torch.isnan
signbit = torch.signbit

# bitwise and logical
and_ = torch.logical_and
or_ = torch.logical_or
xor = torch.logical_xor
logical_and = torch.logical_and
logical_not = torch.logical_not
logical_or = torch.logical_or
logical_xor = torch.logical_xor
bitwise_not = torch.bitwise_not


def bitwise_and(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.bitwise_and(a, b), a)


def bitwise_or(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.bitwise_or(a, b), a)


def bitwise_xor(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.bitwise_xor(a, b), a)


def bitwise_left_shift(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.bitwise_left_shift(a, b), a)


def bitwise_right_shift(a: Tensor, b: Tensor) -> Tensor:
    return _keep(torch.bitwise_right_shift(a, b), a)


lshift = bitwise_left_shift
rshift = bitwise_right_shift


# dtype conversions
def to_dtype(x: Tensor, dtype: torch.dtype, use_compute_types: bool = True) -> Tensor:
    """Convert (rounding to `dtype`); narrow floats are then held in float32 unless asked not."""
    result = x.to(dtype)
    return result.to(compute(dtype)) if use_compute_types else result


def to_dtype_bitcast(x: Tensor, dtype: torch.dtype, src_dtype: torch.dtype) -> Tensor:
    """Reinterpret the bits of x, stored as `src_dtype`, as `dtype`."""
    return x.to(src_dtype).contiguous().view(dtype).to(compute(dtype))


def ceil_to_int(x: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.ceil(x).to(dtype)


def floor_to_int(x: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.floor(x).to(dtype)


def round_to_int(x: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.round(x).to(dtype)


def trunc_to_int(x: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.trunc(x).to(dtype)


def where(condition: Tensor, a: Tensor, b: Tensor | bool | float) -> Tensor:
    if not isinstance(b, Tensor):  # a Python scalar from a lowering: take a's dtype
        b = torch.tensor(b, device=a.device)
    return torch.where(condition, a, b.to(a.dtype))


def masked(mask: Tensor, value: Tensor, other: Tensor | bool | float) -> Tensor:
    """`value` where `mask`, else `other` (a value, or a Python scalar cast to value's dtype)."""
    if not isinstance(other, Tensor):
        other = torch.tensor(other, device=value.device).to(value.dtype)
    return torch.where(mask, value, other.to(value.dtype))
