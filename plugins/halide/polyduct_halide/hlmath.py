"""Halide expression helpers with torch's semantics, imported by generated modules as `_m`.

Each function takes and returns `hl.Expr`. Values of float16/bfloat16 are held in float32; bool
buffers hold one byte and bf16 buffers hold int16 bits (see `values.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import halide as hl

from polyduct_halide.hlspecial import *
from polyduct_halide.hlspecial import c, ex, is_float

E = Any  # a Halide expression (hl.Expr, FuncRef, ...)

_TYPES: dict[str, hl.Type] = {
    "float16": hl.Float(32),
    "bfloat16": hl.Float(32),
    "float32": hl.Float(32),
    "float64": hl.Float(64),
    "int8": hl.Int(8),
    "int16": hl.Int(16),
    "int32": hl.Int(32),
    "int64": hl.Int(64),
    "uint8": hl.UInt(8),
    "bool": hl.Bool(),
}
_STORAGE: dict[str, hl.Type] = {
    **_TYPES,
    "float16": hl.Float(16),
    "bfloat16": hl.Int(16),
    "bool": hl.UInt(8),
}


def compute(dtype: str) -> hl.Type:
    """Halide type values of torch dtype `dtype` are computed in."""
    return _TYPES[dtype]


def load(buf: E, index: E, dtype: str) -> E:
    """Element `index` of `buf` as a compute value."""
    raw = buf[index]
    if dtype == "float16":
        return hl.cast(hl.Float(32), raw)
    if dtype == "bfloat16":
        return hl.cast(hl.Float(32), hl.reinterpret(hl.BFloat(16), raw))
    if dtype == "bool":
        return raw != 0
    return raw


def encode(value: E, dtype: str) -> E:
    """A compute value as the element type of a buffer of `dtype` (rounding f16/bf16)."""
    if dtype == "bfloat16":
        return hl.reinterpret(hl.Int(16), hl.cast(hl.BFloat(16), value))
    return hl.cast(_STORAGE[dtype], value)


def convert(x: E, dtype: str) -> E:
    """torch's `.to(dtype)`: f16/bf16 round (held in f32), bool is `x != 0`."""
    x = ex(x)
    if dtype == "bool":
        return x if x.type().is_bool() else x != hl.cast(x.type(), 0)
    if dtype == "float16":
        return hl.cast(hl.Float(32), hl.cast(hl.Float(16), x))
    if dtype == "bfloat16":
        return hl.cast(hl.Float(32), hl.cast(hl.BFloat(16), x))
    return hl.cast(_TYPES[dtype], x)


def _exact(x: E, dtype: str) -> E:
    if dtype == "float16":
        return hl.cast(hl.Float(16), x)
    if dtype == "bfloat16":
        return hl.cast(hl.BFloat(16), x)
    if dtype == "bool":
        return hl.cast(hl.UInt(8), x)
    return x


def bitcast(x: E, dtype: str, src: str) -> E:
    """Reinterpret the bits of `x` (of torch dtype `src`) as torch dtype `dtype`."""
    exact = {"float16": hl.Float(16), "bfloat16": hl.BFloat(16), "bool": hl.UInt(8)}
    bits = hl.reinterpret(exact.get(dtype, _TYPES.get(dtype)), _exact(ex(x), src))
    if dtype in ("float16", "bfloat16"):
        return hl.cast(hl.Float(32), bits)
    return bits != 0 if dtype == "bool" else bits


def truth(x: E) -> E:
    """`x != 0` as bool (bool stays)."""
    x = ex(x)
    return x if x.type().is_bool() else x != hl.cast(x.type(), 0)


def signbit(x: E) -> E:
    """Sign bit of a float (true for -0.0 and negative NaN)."""
    x = ex(x)
    width = x.type().bits()
    return hl.reinterpret(hl.Int(width), x) < 0


def maximum(a: E, b: E) -> E:
    """torch.maximum: NaN wins; bools or."""
    a, b = ex(a), ex(b)
    if a.type().is_bool():
        return a | b
    if is_float(a):
        return hl.select(hl.is_nan(a) | (a > b), a, b)
    return hl.max(a, b)


def minimum(a: E, b: E) -> E:
    """torch.minimum: NaN wins; bools and."""
    a, b = ex(a), ex(b)
    if a.type().is_bool():
        return a & b
    if is_float(a):
        return hl.select(hl.is_nan(a) | (a < b), a, b)
    return hl.min(a, b)


def sign(x: E) -> E:
    """-1, 0 or 1 in x's type; NaN stays NaN."""
    x = ex(x)
    one, zero = c(x, 1), c(x, 0)
    if x.type().is_uint():
        return hl.select(x > zero, one, zero)
    return hl.select(x > zero, one, hl.select(x < zero, -one, x))


def floordiv(a: E, b: E) -> E:
    """Python floor division of integers."""
    q, r = hl.div_round_to_zero(a, b), hl.mod_round_to_zero(a, b)
    fix = (r != c(r, 0)) & ((r < c(r, 0)) != (ex(b) < c(b, 0)))
    return hl.select(fix, q - c(q, 1), q)


def imod(a: E, b: E) -> E:
    """C remainder of integers (sign of the dividend)."""
    return hl.mod_round_to_zero(a, b)


def remainder(a: E, b: E) -> E:
    """Python modulus (sign of the divisor), ints or floats."""
    r = fmod(a, b) if is_float(a) else hl.mod_round_to_zero(a, b)
    zero = c(r, 0)
    fix = (r != zero) & ((r < zero) != (ex(b) < zero))
    return hl.select(fix, r + b, r)


def fmod(a: E, b: E) -> E:
    """C fmod: a - trunc(a / b) * b, exact for float32 through float64 arithmetic."""
    a, b = ex(a), ex(b)
    if a.type().bits() == 32:
        wa, wb = hl.cast(hl.Float(64), a), hl.cast(hl.Float(64), b)
        q = hl.trunc(wa / wb)
        r = hl.cast(hl.Float(32), wa - q * wb)
    else:
        q = hl.trunc(a / b)
        r = a - q * b
    r = hl.select(hl.is_inf(b) & hl.is_finite(a), a, r)
    return hl.select(r == c(r, 0), hl.select(signbit(a), -c(r, 0), c(r, 0)), r)


def fma(x: E, y: E, z: E) -> E:
    """x * y + z with one rounding for float32 (through float64)."""
    x = ex(x)
    if is_float(x) and x.type().bits() == 32:
        w = hl.Float(64)
        return hl.cast(x.type(), hl.cast(w, x) * hl.cast(w, y) + hl.cast(w, z))
    return x * y + z


def mul_rn(x: E, y: E) -> E:
    """x * y rounded on its own (strict_float keeps it out of FMA contraction)."""
    return hl.strict_float(ex(x) * y)


def fpow(a: E, b: E) -> E:
    """Float power with C pow's special cases."""
    a, b = ex(a), ex(b)
    one = c(a, 1)
    return hl.select((b == c(b, 0)) | (a == one), one, hl.pow(a, b))


def ipow(a: E, b: E) -> E:
    """Integer power by squaring, wrapping in the type; negative exponents as torch."""
    a, b = ex(a), ex(b)
    result, base = c(a, 1), a
    for i in range(a.type().bits()):
        bit = ((b >> c(b, i)) & c(b, 1)) != c(b, 0)
        result = hl.select(bit, result * base, result)
        base = base * base
    if a.type().is_uint():
        return result
    neg = hl.select(a == c(a, 1), c(a, 1), hl.select(a == c(a, -1), hl.select(
        (b & c(b, 1)) != c(b, 0), c(a, -1), c(a, 1)), c(a, 0)))
    return hl.select(b < c(b, 0), neg, result)


def hypot(a: E, b: E) -> E:
    """sqrt(a^2 + b^2) without overflow; inf wins over NaN."""
    a, b = hl.abs(ex(a)), hl.abs(ex(b))
    big, small = hl.max(a, b), hl.min(a, b)
    ratio = hl.select(big == c(big, 0), c(big, 0), small / big)
    value = big * hl.sqrt(c(big, 1) + ratio * ratio)
    value = hl.select(hl.is_nan(a) | hl.is_nan(b), a + b, value)
    return hl.select(hl.is_inf(a) | hl.is_inf(b), c(a, float("inf")), value)


def ldexp(x: E, n: E) -> E:
    """x * 2**n as torch computes it."""
    x = ex(x)
    return x * hl.pow(c(x, 2), hl.cast(x.type(), n))


def log2(x: E) -> E:
    """Base-2 log (float64 intermediate for float32)."""
    return _via64(x, lambda w: hl.log(w) * (1.0 / 0.6931471805599453))


def log10(x: E) -> E:
    """Base-10 log (float64 intermediate for float32)."""
    return _via64(x, lambda w: hl.log(w) * (1.0 / 2.302585092994046))


def _via64(x: E, fn: Callable[[E], E]) -> E:
    x = ex(x)
    return hl.cast(x.type(), fn(hl.cast(hl.Float(64), x)))


def sigmoid(x: E) -> E:
    """1 / (1 + exp(-x))."""
    x = ex(x)
    return c(x, 1) / (c(x, 1) + hl.exp(-x))


def expm1(x: E) -> E:
    """exp(x) - 1, accurate near 0 (Kahan's method)."""
    x = ex(x)
    u = hl.exp(x)
    um1 = u - c(x, 1)
    mid = um1 * x / hl.log(u)
    small = hl.select(u == c(x, 1), x, hl.select(um1 == c(x, -1), c(x, -1), mid))
    return hl.select(hl.is_inf(u) | hl.is_nan(x), u - c(x, 1), small)


def log1p(x: E) -> E:
    """log(1 + x), accurate near 0 (Goldberg's method)."""
    x = ex(x)
    u = c(x, 1) + x
    mid = hl.log(u) * x / (u - c(x, 1))
    return hl.select((u == c(x, 1)), x, hl.select(hl.is_inf(u) | (u <= c(x, 0)), hl.log(u), mid))


def shl(a: E, b: E) -> E:
    """a << b; shifts past the width give 0 (torch)."""
    a, b = ex(a), ex(b)
    width = a.type().bits()
    out = a << hl.cast(a.type(), hl.clamp(b, c(b, 0), c(b, width - 1)))
    return hl.select((b >= c(b, width)) | (b < c(b, 0)), c(a, 0), out)


def shr(a: E, b: E) -> E:
    """a >> b (arithmetic for signed); past the width gives the sign fill."""
    a, b = ex(a), ex(b)
    width = a.type().bits()
    out = a >> hl.cast(a.type(), hl.clamp(b, c(b, 0), c(b, width - 1)))
    fill = hl.select(a < c(a, 0), c(a, -1), c(a, 0)) if not a.type().is_uint() else c(a, 0)
    return hl.select((b >= c(b, width)) | (b < c(b, 0)), fill, out)


def nextafter(a: E, b: E, width: int, bf16: bool) -> E:
    """Next float of a's storage format (f16/bf16/f32/f64) after a toward b."""
    a, b = ex(a), ex(b)
    store = {16: hl.BFloat(16) if bf16 else hl.Float(16), 32: hl.Float(32), 64: hl.Float(64)}
    ft, it = store[width], hl.Int(width)
    bits = hl.reinterpret(it, hl.cast(ft, a))
    one = hl.cast(it, 1)
    away = (a < b) == (a > c(a, 0))
    stepped = hl.select(away, bits + one, bits - one)
    tiny = hl.select(b > c(b, 0), one, hl.cast(it, 1) | (one << hl.cast(it, width - 1)))
    stepped = hl.select(a == c(a, 0), tiny, stepped)
    out = hl.cast(a.type(), hl.reinterpret(ft, stepped))
    return hl.select(hl.is_nan(a) | hl.is_nan(b), a + b, hl.select(a == b, b, out))


def frexp(x: E) -> tuple[E, E]:
    """(mantissa in [0.5, 1), int32 exponent); 0, inf and NaN give (x, 0)."""
    x = ex(x)
    w = hl.cast(hl.Float(64), x)
    e = hl.cast(hl.Int(32), hl.floor(hl.log(hl.abs(w)) * (1.0 / 0.6931471805599453))) + 1
    mant = w * hl.pow(hl.f64(2.0), hl.cast(hl.Float(64), -e))
    big, small = hl.abs(mant) >= 1.0, hl.abs(mant) < 0.5
    mant = hl.select(big, mant * 0.5, hl.select(small, mant * 2.0, mant))
    e = hl.select(big, e + 1, hl.select(small, e - 1, e))
    special = (x == c(x, 0)) | hl.is_inf(x) | hl.is_nan(x)
    return hl.select(special, x, hl.cast(x.type(), mant)), hl.select(special, hl.i32(0), e)


from polyduct_halide.hlrandom import rand, randint64, randn
from polyduct_halide.hlreduce import REDUCTIONS, same_key, sorts_before

__all__ = ["REDUCTIONS", "rand", "randint64", "randn", "same_key", "sorts_before"]
