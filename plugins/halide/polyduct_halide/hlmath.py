"""Halide expression helpers with torch's semantics, imported by generated modules as `_m`.

Each function takes and returns `hl.Expr`. Values of float16/bfloat16 are held in float32; bool
buffers hold one byte and bf16 buffers hold int16 bits (see `values.py`).
"""

from __future__ import annotations

from typing import Any

import halide as hl

from polyduct_halide.hlfmod import fmod, pow2
from polyduct_halide.hlspecial import (  # noqa: F401
    alone,
    c,
    div,
    ex,
    fabs,
    iabs,
    iadd,
    imul,
    is_float,
    isfinite,
    isinf,
    isnan,
    isub,
    neg,
    opaque,
    signbit,
    split64,
    two_sum,
    via64,
)

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
    return decode(buf[index], dtype)


def decode(raw: E, dtype: str) -> E:
    """A buffer element of torch dtype `dtype` as a compute value."""
    if dtype == "float16":
        return hl.cast(hl.Float(32), raw)
    if dtype == "bfloat16":
        return from_bf16_bits(raw)
    if dtype == "bool":
        return raw != 0
    return raw


# bfloat16 by integer arithmetic on the bits, never Halide's BFloat type: LLVM's NVPTX backend
# aborts on Halide's bfloat casts ("Invalid cast!"), which would end the process on CUDA targets.
def from_bf16_bits(bits: E) -> E:
    """float32 of the bfloat16 whose bits are `bits` (int16 or uint16; exact)."""
    wide = hl.cast(hl.Int(32), hl.reinterpret(hl.Int(16), ex(bits))) << 16
    return hl.reinterpret(hl.Float(32), wide)


def bf16_bits(x: E) -> E:
    """The int16 bits of `x` rounded to bfloat16 (nearest, ties to even); a NaN keeps its sign and
    the top of its payload, made quiet (so a NaN read from bfloat16 bits gets its own bits back)."""
    u = hl.reinterpret(hl.UInt(32), hl.cast(hl.Float(32), ex(x)))
    rounded = (u + hl.u32(0x7FFF) + ((u >> 16) & hl.u32(1))) >> 16
    nan = (u & hl.u32(0x7FFFFFFF)) > hl.u32(0x7F800000)
    return hl.reinterpret(
        hl.Int(16), hl.cast(hl.UInt(16), hl.select(nan, (u >> 16) | hl.u32(0x40), rounded))
    )


def encode(value: E, dtype: str) -> E:
    """A compute value as the element type of a buffer of `dtype` (rounding f16/bf16)."""
    if dtype == "bfloat16":
        return bf16_bits(value)
    return hl.cast(_STORAGE[dtype], value)


def convert(x: E, dtype: str) -> E:
    """torch's `.to(dtype)`: f16/bf16 round (held in f32), bool is `x != 0`."""
    x = ex(x)
    if dtype == "bool":
        return x if x.type().is_bool() else x != hl.cast(x.type(), 0)
    if dtype in ("float16", "bfloat16"):
        if dtype == "float16":
            rounded = hl.cast(hl.Float(32), hl.cast(hl.Float(16), x))
        else:
            rounded = from_bf16_bits(bf16_bits(x))
        return hl.select(isnan(x), hl.cast(hl.Float(32), x), rounded) if is_float(x) else rounded
    to = _TYPES[dtype]
    if _narrows(x.type(), to):
        # Halide folds cast(u8, cast(i64, f)) into cast(u8, f), whose out-of-range lanes saturate
        # where torch wraps. Truncate first, in the wide type, to a value `to` holds (low bits,
        # sign-extended for a signed `to`): the cast then changes no value.
        wide = x.type()
        x = x & hl.cast(wide, (1 << to.bits()) - 1)
        if to.is_int():
            half = hl.cast(wide, 1 << (to.bits() - 1))
            x = (x ^ half) - half
    return hl.cast(to, x)


def _narrows(src: hl.Type, to: hl.Type) -> bool:
    """An integer conversion to fewer bits (which truncates)."""
    ints = (src.is_int() or src.is_uint()) and (to.is_int() or to.is_uint())
    return ints and not src.is_bool() and to.bits() < src.bits()


def _exact(x: E, dtype: str) -> E:
    if dtype == "float16":
        return hl.cast(hl.Float(16), x)
    if dtype == "bfloat16":
        return bf16_bits(x)  # the bits (int16)
    if dtype == "bool":
        return hl.cast(hl.UInt(8), x)
    return x


def bitcast(x: E, dtype: str, src: str) -> E:
    """Reinterpret the bits of `x` (of torch dtype `src`) as torch dtype `dtype`."""
    exact = {"float16": hl.Float(16), "bfloat16": hl.Int(16), "bool": hl.UInt(8)}
    bits = hl.reinterpret(exact.get(dtype, _TYPES.get(dtype)), _exact(ex(x), src))
    if dtype == "bfloat16":
        return from_bf16_bits(bits)
    if dtype == "float16":
        return hl.cast(hl.Float(32), bits)
    return bits != 0 if dtype == "bool" else bits


def truth(x: E) -> E:
    """`x != 0` as bool (bool stays)."""
    x = ex(x)
    return x if x.type().is_bool() else x != hl.cast(x.type(), 0)


def maximum(a: E, b: E) -> E:
    """torch.maximum: NaN wins; bools or."""
    a, b = ex(a), ex(b)
    if a.type().is_bool():
        return a | b
    if is_float(a):
        return hl.select(isnan(a) | (a > b), a, b)
    return hl.max(a, b)


def minimum(a: E, b: E) -> E:
    """torch.minimum: NaN wins; bools and."""
    a, b = ex(a), ex(b)
    if a.type().is_bool():
        return a & b
    if is_float(a):
        return hl.select(isnan(a) | (a < b), a, b)
    return hl.min(a, b)


def sign(x: E) -> E:
    """-1, 0 or 1 in x's type; NaN stays NaN."""
    x = ex(x)
    one, zero = c(x, 1), c(x, 0)
    if x.type().is_uint():
        return hl.select(x > zero, one, zero)
    return hl.select(x > zero, one, hl.select(x < zero, -one, zero))


def floordiv(a: E, b: E) -> E:
    """Python floor division of integers."""
    q, r = hl.div_round_to_zero(a, b), hl.mod_round_to_zero(a, b)
    fix = (r != c(r, 0)) & ((r < c(r, 0)) != (ex(b) < c(b, 0)))
    return hl.select(fix, q - c(q, 1), q)


def imod(a: E, b: E) -> E:
    """C remainder of integers (sign of the dividend)."""
    return hl.mod_round_to_zero(a, b)


def remainder(a: E, b: E, nofuse: E | None = None) -> E:
    """Python modulus (sign of the divisor), ints or floats (`nofuse`: see `fmod`)."""
    r = fmod(a, b, nofuse) if is_float(a) else hl.mod_round_to_zero(a, b)
    zero = c(r, 0)
    fix = (r != zero) & ((r < zero) != (ex(b) < zero))
    return hl.select(fix, r + b, r)


def condition(cond: E, zero: E | None) -> E:
    """A select's condition, its truth value passed through the pipeline's opaque zero
    (`hlspecial.opaque`): the same value, about which Halide cannot reason. Halide 21's
    stage-skipping pass raised an internal error ("argument of Not is not a bool") on a condition
    whose value also fed the branch taken when it holds, the other branch reading a reduction:
    `where(b, erfc(b), erfc(b).sum())` of a bool b (halide seed 9103, program 8448)."""
    if zero is None:  # a kernel that stores nothing
        return ex(cond)
    return opaque(hl.cast(hl.UInt(8), truth(cond)), zero) != hl.u8(0)


def negative_zero(zero: E | None, type_: hl.Type) -> E:
    """-0.0 of float type `type_`, its sign bit set at run time on the pipeline's opaque zero
    (`runtime.opaque_zero`). Halide's IR equality holds the constants -0.0 and +0.0 equal, and
    its common-subexpression pass then makes one of the other: `select(c, 0.0, -0.0)` was +0
    everywhere, `copysign(select(c, x, 0.0), -0.0)` positive (halide seed 9103, program 2461)."""
    if zero is None:  # a kernel that stores nothing
        return hl.cast(type_, -0.0)
    bits = hl.UInt(type_.bits())
    return hl.reinterpret(type_, hl.cast(bits, zero) | (hl.cast(bits, 1) << (type_.bits() - 1)))


def copysign(a: E, b: E) -> E:
    """|a| with the sign bit of b."""
    a, b = ex(a), ex(b)
    it = hl.Int(a.type().bits())
    mask = hl.cast(it, 1) << (a.type().bits() - 1)
    bits = (hl.reinterpret(it, a) & ~mask) | (hl.reinterpret(it, b) & mask)
    return hl.reinterpret(a.type(), bits)


def fma(x: E, y: E, z: E, nofuse: E | None = None) -> E:
    """x * y + z with one rounding: float32 through float64, float64 by error-free transforms
    (whose products `alone` keeps out of FMA contraction with `nofuse`)."""
    x = ex(x)
    if is_float(x) and x.type().bits() == 32:
        w = hl.Float(64)
        return hl.cast(x.type(), hl.cast(w, x) * hl.cast(w, y) + hl.cast(w, z))
    if is_float(x) and x.type().bits() == 64:
        return _fma64(x, ex(y), ex(z), nofuse)
    return x * y + z


def _fma64(x: E, y: E, z: E, nofuse: E | None) -> E:
    # Boldo-Melquiond: x*y = ph + pl exactly (Dekker), ph + z = sh + sl exactly (Knuth), then
    # RN(sh + RO(pl + sl)) with RO rounding to odd: one correct rounding of x*y + z. Products or
    # sums near overflow or underflow, and non-finite inputs, take the plain (two-rounding) path.
    # Every product is rounded on its own, as on the host, also where LLVM would fuse it.
    def mul(a: E, b: E) -> E:
        return alone(a * b, nofuse)

    ph = mul(x, y)
    xh, xl = split64(x)
    yh, yl = split64(y)
    pl = ((mul(xh, yh) - ph) + mul(xh, yl) + mul(xl, yh)) + mul(xl, yl)
    sh, sl = two_sum(ph, z)
    u, err = two_sum(pl, sl)
    ubits = hl.reinterpret(hl.Int(64), u)
    even = (ubits & 1) == 0
    toward = hl.select((err > hl.f64(0.0)) == (u > hl.f64(0.0)), ubits + 1, ubits - 1)
    odd = hl.select((err != hl.f64(0.0)) & even & (u != hl.f64(0.0)), toward, ubits)
    fused = sh + hl.reinterpret(hl.Float(64), odd)
    mags = hl.max(hl.max(hl.abs(ph), hl.abs(z)), hl.abs(sh))
    tiny = hl.min(hl.abs(x), hl.abs(y))
    safe = (mags < hl.f64(2.0**990)) & (hl.abs(ph) > hl.f64(2.0**-960)) & (tiny > hl.f64(0.0))
    return hl.select(safe & isfinite(z), fused, x * y + z)


def mul_rn(x: E, y: E, strict: bool, nofuse: E | None = None) -> E:
    """x * y rounded on its own: on the host the target's StrictFloat already forbids FMA
    contraction (`strict`); otherwise `hl.strict_float` marks the product (it rewrites its whole
    argument tree, so it is avoided where the target makes it redundant). On GPU targets neither
    stops LLVM's NVPTX backend: `nofuse` makes the product opaque (`alone`)."""
    product = ex(x) * y
    return alone(product if strict else hl.strict_float(product), nofuse)


def fpow(a: E, b: E) -> E:
    """Float power with C pow's special cases (libm pow in float64)."""
    return via64(hl.pow, a, b)


def ipow(a: E, b: E, zero: E | None = None) -> E:
    """Integer power by squaring, wrapping in the type; negative exponents as torch (`zero`:
    the pipeline's opaque zero, see `hlspecial.iadd`)."""
    a, b = ex(a), ex(b)
    result, base = c(a, 1), a
    for i in range(a.type().bits()):
        bit = ((b >> c(b, i)) & c(b, 1)) != c(b, 0)
        result = hl.select(bit, imul(result, base, zero), result)
        base = imul(base, base, zero)
    if a.type().is_uint():
        return result
    inverse = hl.select(
        a == c(a, 1),
        c(a, 1),
        hl.select(a == c(a, -1), hl.select((b & c(b, 1)) != c(b, 0), c(a, -1), c(a, 1)), c(a, 0)),
    )
    return hl.select(b < c(b, 0), inverse, result)


def hypot(a: E, b: E) -> E:
    """sqrt(a^2 + b^2) without overflow; inf wins over NaN."""
    return via64(_hypot, a, b)


def _hypot(a: E, b: E) -> E:
    a, b = fabs(a), fabs(b)
    big, small = hl.max(a, b), hl.min(a, b)
    ratio = hl.select(big == c(big, 0), c(big, 0), small / big)
    value = big * hl.sqrt(c(big, 1) + ratio * ratio)
    value = hl.select(isnan(a) | isnan(b), a + b, value)
    return hl.select(isinf(a) | isinf(b), c(a, float("inf")), value)


def _subnormal32(x: E) -> tuple[E, E]:
    """(x is a float32 subnormal, its sign bit), from the bits: CUDA's float32 instructions
    flush subnormal operands to zero (`ceil(2.9e-39)` gave 0 there), integer tests do not."""
    bits = hl.reinterpret(hl.UInt(32), x)
    exponent, fraction = bits & hl.u32(0x7F800000), bits & hl.u32(0x007FFFFF)
    return (exponent == hl.u32(0)) & (fraction != hl.u32(0)), (bits >> 31) != hl.u32(0)


def _f32_bits(pattern: int) -> E:
    return hl.reinterpret(hl.Float(32), hl.u32(pattern))


def ceil(x: E) -> E:
    """ceil; a float32 subnormal is decided on its bits (1 when positive, -0 when negative)."""
    x = ex(x)
    if x.type() != hl.Float(32):
        return hl.ceil(x)
    sub, negative = _subnormal32(x)
    return hl.select(sub, hl.select(negative, _f32_bits(0x80000000), hl.f32(1.0)), hl.ceil(x))


def floor(x: E) -> E:
    """floor; a float32 subnormal is decided on its bits (0 when positive, -1 when negative)."""
    x = ex(x)
    if x.type() != hl.Float(32):
        return hl.floor(x)
    sub, negative = _subnormal32(x)
    return hl.select(sub, hl.select(negative, hl.f32(-1.0), _f32_bits(0)), hl.floor(x))


def ldexp(x: E, n: E) -> E:
    """x * 2**n as torch computes it (x * pow(2, n), the power exact for integer n)."""
    x, n = ex(x), ex(n)
    if n.type().is_float():
        return x * hl.pow(c(x, 2), hl.cast(x.type(), n))
    return x * pow2(n, x.type())


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
    store = {16: hl.Float(16), 32: hl.Float(32), 64: hl.Float(64)}
    ft, it = store[width], hl.Int(width)
    bits = bf16_bits(a) if bf16 else hl.reinterpret(it, hl.cast(ft, a))
    one = hl.cast(it, 1)
    away = (a < b) == (a > c(a, 0))
    stepped = hl.select(away, bits + one, bits - one)
    tiny = hl.select(b > c(b, 0), one, hl.cast(it, 1) | (one << hl.cast(it, width - 1)))
    stepped = hl.select(a == c(a, 0), tiny, stepped)
    low = from_bf16_bits(stepped) if bf16 else hl.reinterpret(ft, stepped)
    out = hl.cast(a.type(), low)
    return hl.select(isnan(a) | isnan(b), a + b, hl.select(a == b, b, out))


def frexp(x: E) -> tuple[E, E]:
    """(mantissa in [0.5, 1), int32 exponent); 0, inf and NaN give (x, 0)."""
    x = ex(x)
    w = hl.cast(hl.Float(64), x)
    e = hl.cast(hl.Int(32), hl.floor(hl.log(hl.abs(w)) * hl.f64(1.0 / 0.6931471805599453))) + 1
    mant = w * pow2(-e, hl.Float(64))
    big, small = hl.abs(mant) >= 1.0, hl.abs(mant) < 0.5
    mant = hl.select(big, mant * 0.5, hl.select(small, mant * 2.0, mant))
    e = hl.select(big, e + 1, hl.select(small, e - 1, e))
    special = (x == c(x, 0)) | isinf(x) | isnan(x)
    return hl.select(special, x, hl.cast(x.type(), mant)), hl.select(special, hl.i32(0), e)


def bucketize(
    values: E,
    buf: E,
    dtype: str,
    length: E,
    numel: E,
    stride: E,
    const_length: int | None,
    start: E,
    right: bool,
    sorter: tuple[E, str] | None,
    sorter_stride: E,
    sorter_start: E,
    out_dtype: str,
) -> E:
    """searchsorted of `values` in a row of `buf` by a binary search unrolled to fixed steps."""
    values = ex(values)
    if values.type().bits() < 32:
        # v | (v & 2**40) is v (bit 40 of a sign-extended narrow value is its sign), but bounds
        # inference loses the narrow range through it. With the range known, Halide reads the
        # search's first probe (the same for every point) on the host to size the boundaries
        # buffer: a null host pointer for CUDA tensors, where int8/int16/uint8 crashed.
        wide = hl.cast(hl.Int(64), values)
        values = wide | (wide & hl.i64(1 << 40))
    low = hl.i64(0)
    high = hl.cast(hl.Int(64), length)
    base = hl.cast(hl.Int(64), start)
    steps = const_length.bit_length() + 1 if const_length is not None else 33
    last = hl.cast(hl.Int(32), hl.max(ex(numel) - 1, 0))
    for _ in range(steps):
        active = low < high
        mid = (low + high) / 2
        pos = mid
        if sorter is not None:
            sbuf, sdt = sorter
            sidx = hl.cast(hl.Int(64), sorter_start) + mid * hl.cast(hl.Int(64), sorter_stride)
            sidx32 = hl.clamp(hl.cast(hl.Int(32), sidx), 0, sbuf.dim(0).extent() - 1)
            pos = hl.cast(hl.Int(64), load(sbuf, sidx32, sdt))
        idx = hl.clamp(hl.cast(hl.Int(32), base + pos * hl.cast(hl.Int(64), stride)), 0, last)
        bound = hl.cast(values.type(), load(buf, idx, dtype))
        above = ((values > bound) | (values == bound)) if right else (values > bound)
        low = hl.select(active & above, mid + 1, low)
        high = hl.select(active & hl.logical_not(above), mid, high)
    return hl.cast(_TYPES[out_dtype], low)


from polyduct_halide.hlexp import (  # noqa: F401
    erf,
    erfc,
    exp,
    expm1,
    log,
    log1p,
    log2,
    log10,
    sigmoid,
    tanh,
)
from polyduct_halide.hlrandom import rand, randint64, randn  # noqa: F401
from polyduct_halide.hlreduce import REDUCTIONS, same_key, sorts_before  # noqa: F401
from polyduct_halide.hltrig import cos, sin  # noqa: F401
