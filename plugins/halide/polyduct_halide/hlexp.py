"""float32 exp, expm1, sigmoid, tanh, logs, erf and erfc as vectorisable Halide expressions.

Halide's own float32 `exp`/`log` are approximations that get inf and NaN wrong, and libm through
float64 (`via64`) is one scalar call per element. On CPU targets the float32 argument is widened
to float64 (exact) and evaluated there with vector instructions only:

* exp family: x = n ln2 + r with n = round(x log2 e), r by Cody-Waite (ln2 in two parts, the
  first with a short mantissa so that n * LN2_HI is exact), |r| <= ln2/2; expm1(r) = r P(r) with
  P of degree 7 (relative error < 5e-12, `_EXPM1`); the scale 2^n built from exponent bits.
  Arguments are clamped to +-200 first: exp(+-200) is far outside float32 yet inside float64,
  so overflow to inf and underflow through float32 subnormals to 0 come from the final rounding.
* log, log2, log10, log1p: x (1 + x for log1p) = 2^e m with m in [sqrt(1/2), sqrt(2)) from the
  bits; log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, by its odd series to s^19
  (truncation < 1e-15 relative).
* erf/erfc: a Taylor polynomial below 1/2, e^(-x^2) times fitted polynomials above (`_erf_parts`).

The float64 value is within about 2e-11 (relative) of the true one and is rounded once to
float32: the correctly rounded float32 except near ties, then one ulp off (measured on 1.2 million
arguments, special values, random bit patterns and dense ranges: every function within one ulp of
torch's float64 result rounded to float32, at most 20 arguments off by one). torch's vectorised
float32 functions are within one ulp as well. NaN, +-inf, +-0 and negative logs are explicit.
Float64 arguments, and GPU targets, keep libm through float64 (`via64`) and `hlspecial`'s erf.
"""

from __future__ import annotations

import math
from typing import Any

import halide as hl

from polyduct_halide import hlspecial
from polyduct_halide.hlspecial import ex, isinf, isnan, neg, signbit, via64

E = Any
F64 = hl.Float(64)
LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238  # ln 2 with its low 32 mantissa bits zero: n * LN2_HI is exact
LN2_LO = 1.9082149292705877e-10  # ln 2 - LN2_HI
LN2 = 0.6931471805599453
LN10 = 2.302585092994046
LIMIT = 200.0  # |x| beyond which float32 exp is inf or 0 (float64 still holds exp(+-200))
# expm1(r) / r on [-ln2/2, ln2/2], degree 7, highest first: a least-squares fit of the relative
# error at 200 Chebyshev nodes in 50-digit mpmath (max relative error 4.6e-12 over 2000 points).
_EXPM1 = [
    2.479329350394208e-05,
    0.0001990742649961475,
    0.0013888995683344891,
    0.008333283795818536,
    0.04166666584761685,
    0.16666666785151946,
    0.5000000000136022,
    0.999999999995586,
]
_ATANH = [2.0 / k for k in range(19, 0, -2)]  # 2/19 ... 2/1: log(m) = sum 2 s^k / k, k odd
# erf(x) / x for |x| < 1/2 as a polynomial in x^2 (Taylor to x^21, truncation < 1e-15): the
# coefficients 2/sqrt(pi) (-1)^n / (n! (2n + 1)), n = 10 ... 0.
_ERF_SMALL = [
    2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
    for n in range(10, -1, -1)
]
# e^(x^2) erfc(x) on [1/2, 5/2] as a polynomial in x - 3/2, degree 14, highest first: a
# least-squares fit of the relative error at 200 Chebyshev nodes in 40-digit mpmath (max relative
# error 1.2e-11 over 400 points).
_ERFC_MID = [
    2.0969269668549824e-07,
    -7.964555217740799e-07,
    2.023093303341256e-06,
    -6.663162808369045e-06,
    2.287485773766454e-05,
    -7.289904250575085e-05,
    0.0002233199792626508,
    -0.000661832408152047,
    0.0018861277878530367,
    -0.00514597773571309,
    0.013377342515583856,
    -0.03293090347689152,
    0.07615103974229659,
    -0.1636229177796393,
    0.3215854164555708,
]
# x e^(x^2) erfc(x) for x >= 2.5 as a polynomial in t = 1/x^2 in [0, 0.16], degree 10, highest
# first: a least-squares fit of the relative error at 300 Chebyshev nodes in 50-digit mpmath
# (max relative error 1.8e-11 over 500 points).
_ERFC_TAIL = [
    2044.4551583798914,
    -2107.899382322516,
    1011.8815912762794,
    -311.3165685631478,
    73.60904614091183,
    -15.846770439235796,
    3.6780992532689507,
    -1.057412526920343,
    0.4231379573921416,
    -0.28209477573715896,
    0.5641895835375762,
]


def fast(x: E, target: hl.Target) -> bool:
    """Whether `x` takes the vector float32 path: float32 values on a CPU target."""
    return bool(ex(x).type() == hl.Float(32) and not target.has_gpu_feature())


def _horner(coefficients: list[float], x: E) -> E:
    acc = hl.f64(coefficients[0])
    for coefficient in coefficients[1:]:
        acc = acc * x + hl.f64(coefficient)
    return acc


def _expm1_parts(x: E) -> tuple[E, E]:
    """(2^n, expm1(r)) in float64 with exp(x) = 2^n (1 + expm1(r)), for float32 `x`."""
    xc = hl.clamp(hl.cast(F64, x), hl.f64(-LIMIT), hl.f64(LIMIT))
    n = hl.round(xc * hl.f64(LOG2E))
    r = (xc - n * hl.f64(LN2_HI)) - n * hl.f64(LN2_LO)
    scale = hl.reinterpret(F64, (hl.cast(hl.Int(64), n) + hl.i64(1023)) << hl.i64(52))
    return scale, r * _horner(_EXPM1, r)


def _exp64(x: E) -> E:
    scale, q = _expm1_parts(x)
    return scale * q + scale


def _expm1_64(x: E) -> E:
    scale, q = _expm1_parts(x)
    return scale * q + (scale - hl.f64(1.0))  # exact for n = 0: q itself (of r = +0 at x = -0)


def _float32(x: E, value64: E) -> E:
    """`value64` rounded to float32; NaN `x` gives itself (clamping drops NaN)."""
    x = ex(x)
    return hl.select(isnan(x), x, hl.cast(hl.Float(32), value64))


def _signed(magnitude: E, x: E) -> E:
    """float32 `magnitude` with the sign bit of `x` (NaN `x` stays itself).

    By the bits: Halide's float `abs` keeps the sign of -0, so selects on `x < 0` lose -0."""
    x = ex(x)
    sign = hl.reinterpret(hl.UInt(32), x) & hl.u32(0x80000000)
    bits = (hl.reinterpret(hl.UInt(32), magnitude) & hl.u32(0x7FFFFFFF)) | sign
    return hl.select(isnan(x), x, hl.reinterpret(hl.Float(32), bits))


def _tanh32(x: E) -> E:
    """expm1(2|x|) / (expm1(2|x|) + 2) with x's sign (-0 stays -0)."""
    x = ex(x)
    y = _expm1_64(hl.abs(x) * hl.f32(2.0))  # 2|x| overflows to inf only past the clamp
    return _signed(_float32(x, y / (y + hl.f64(2.0))), x)


def _log_parts(v: E) -> tuple[E, E]:
    """(e, log m) in float64 with v = 2^e m, m in [sqrt(1/2), sqrt(2)), for a positive normal
    float64 `v` (float32 subnormals are normal float64)."""
    bits = hl.reinterpret(hl.Int(64), v)
    e = hl.cast(hl.Int(32), (bits >> hl.i64(52)) & hl.i64(0x7FF)) - 1023
    m = hl.reinterpret(F64, (bits & hl.i64(2**52 - 1)) | hl.i64(1023 << 52))  # [1, 2)
    big = m > hl.f64(1.4142135623730951)
    m = hl.select(big, m * hl.f64(0.5), m)
    e = hl.select(big, e + 1, e)
    s = (m - hl.f64(1.0)) / (m + hl.f64(1.0))  # m - 1 is exact
    return hl.cast(F64, e), s * _horner(_ATANH, s * s)


def _log_result(x: E, value64: E, pole: float) -> E:
    """`value64` rounded to float32: -inf where x == pole, NaN below, inf at inf, NaN x itself."""
    x = ex(x)
    out = hl.cast(hl.Float(32), value64)
    out = hl.select(x == hl.f32(pole), hl.f32(float("-inf")), out)
    out = hl.select(x == hl.f32(float("inf")), x, out)
    out = hl.select(x < hl.f32(pole), hl.f32(float("nan")), out)
    return hl.select(isnan(x), x, out)


def _log32(x: E, e_scale: float, m_scale: float) -> E:
    """log of float32 `x` in the base where log 2 = `e_scale` and log e = `m_scale`: powers of
    two are exact in base 2 (log m = 0)."""
    e, log_m = _log_parts(hl.cast(F64, x))
    return _log_result(x, e * hl.f64(e_scale) + log_m * hl.f64(m_scale), 0.0)


def _log1p32(x: E) -> E:
    """log(1 + x): 1 + x is exact in float64 for |x| >= 2^-29, below that log1p(x) rounds to x."""
    xd = hl.cast(F64, x)
    e, log_m = _log_parts(hl.f64(1.0) + xd)
    value = hl.select(hl.abs(xd) < hl.f64(2.0**-29), xd, e * hl.f64(LN2) + log_m)
    return _log_result(x, value, -1.0)


def _log2_libm(w: E) -> E:
    return hl.log(w) / hl.f64(LN2)


def _log10_libm(w: E) -> E:
    return hl.log(w) / hl.f64(LN10)


def _log1p_libm(x: E) -> E:
    # Goldberg: log(u) * x / (u - 1) with u = 1 + x rounded.
    u = hl.f64(1.0) + x
    mid = hl.log(u) * (x / (u - hl.f64(1.0)))
    return hl.select(u == hl.f64(1.0), x, hl.select(isinf(u) | (u <= hl.f64(0.0)), hl.log(u), mid))


def _sigmoid_libm(x: E) -> E:
    return hl.f64(1.0) / (hl.f64(1.0) + hl.exp(neg(x)))


def _expm1_libm(x: E) -> E:
    # Kahan: (u - 1) * x / log(u) with u = exp(x) rounded.
    u = hl.exp(x)
    um1 = u - hl.f64(1.0)
    mid = um1 * (x / hl.log(u))
    small = hl.select(u == hl.f64(1.0), x, hl.select(um1 == hl.f64(-1.0), hl.f64(-1.0), mid))
    return hl.select(isinf(u) | isnan(x), um1, small)


def exp(x: E, target: hl.Target) -> E:
    """e^x."""
    return _float32(x, _exp64(x)) if fast(x, target) else via64(hl.exp, x)


def expm1(x: E, target: hl.Target) -> E:
    """e^x - 1, accurate near 0."""
    if not fast(x, target):
        return via64(_expm1_libm, x)
    x = ex(x)
    return hl.select(x == hl.f32(0.0), x, _float32(x, _expm1_64(x)))  # -0 stays -0


def sigmoid(x: E, target: hl.Target) -> E:
    """1 / (1 + e^-x)."""
    if fast(x, target):
        return _float32(x, hl.f64(1.0) / (hl.f64(1.0) + _exp64(neg(x))))
    return via64(_sigmoid_libm, x)


def tanh(x: E, target: hl.Target) -> E:
    """Hyperbolic tangent."""
    return _tanh32(x) if fast(x, target) else via64(hl.tanh, x)


def log(x: E, target: hl.Target) -> E:
    """Natural logarithm."""
    return _log32(x, LN2, 1.0) if fast(x, target) else via64(hl.log, x)


def log2(x: E, target: hl.Target) -> E:
    """Base-2 logarithm."""
    return _log32(x, 1.0, 1.0 / LN2) if fast(x, target) else via64(_log2_libm, x)


def log10(x: E, target: hl.Target) -> E:
    """Base-10 logarithm."""
    scales = (LN2 / LN10, 1.0 / LN10)
    return _log32(x, *scales) if fast(x, target) else via64(_log10_libm, x)


def log1p(x: E, target: hl.Target) -> E:
    """log(1 + x), accurate near 0."""
    return _log1p32(x) if fast(x, target) else via64(_log1p_libm, x)


def _erf_parts(x: E) -> tuple[E, E, E]:
    """(|x|, erf(|x|) for |x| < 1/2, erfc(|x|) for |x| >= 1/2) in float64, for float32 `x`.

    erfc is e^(-x^2) times a polynomial: in x on [1/2, 5/2), in 1/x^2 above (clamped at 10.5,
    where erfc is far below float32's smallest subnormal). No divisions but one, no libm.
    """
    ax = hl.abs(hl.cast(F64, x))
    small = ax * _horner(_ERF_SMALL, ax * ax)
    far = hl.clamp(ax, hl.f64(0.5), hl.f64(10.5))
    inv = hl.f64(1.0) / far
    tail = hl.select(
        ax < hl.f64(2.5),
        _horner(_ERFC_MID, far - hl.f64(1.5)),
        _horner(_ERFC_TAIL, inv * inv) * inv,
    )
    return ax, small, tail * _exp64(neg(far * far))


def erf(x: E, target: hl.Target) -> E:
    """Error function (odd: -0 stays -0)."""
    if not fast(x, target):
        return hlspecial.erf(x)
    ax, small, erfc_pos = _erf_parts(x)
    magnitude = hl.select(ax < hl.f64(0.5), small, hl.f64(1.0) - erfc_pos)
    return _signed(_float32(x, magnitude), x)


def erfc(x: E, target: hl.Target) -> E:
    """Complementary error function, relative accuracy for x >= 1/2."""
    if not fast(x, target):
        return hlspecial.erfc(x)
    ax, small, erfc_pos = _erf_parts(x)
    negative = signbit(x)
    near = hl.f64(1.0) - hl.select(negative, neg(small), small)
    far = hl.select(negative, hl.f64(2.0) - erfc_pos, erfc_pos)
    return _float32(x, hl.select(ax < hl.f64(0.5), near, far))
