"""Triton helper functions of generated kernel modules (source text); a module takes the ones
its kernel calls (`prelude_for`)."""

from __future__ import annotations

import re
from typing import Final

PRELUDE: Final = '''
@triton.jit
def _bf16_bits(x):
    # float32 -> bfloat16 bits, round to nearest even, done on integers: the interpreter's own
    # bfloat16 conversion flushes subnormals.
    b = x.to(tl.int32, bitcast=True)
    r = b + 0x7FFF + ((b >> 16) & 1)
    r = tl.where(x != x, b | 0x400000, r)
    return (r >> 16).to(tl.int16)


@triton.jit
def _ifloordiv(a, b):
    # floor division of integers (index expressions): Triton's `//` truncates, as C's `/`
    q = a // b
    return tl.where((a % b != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def _bf16_value(bits):
    return (bits.to(tl.int32) << 16).to(tl.float32, bitcast=True)

@triton.jit
def _prod_combine(a, b):
    return a * b


@triton.jit
def _xor_combine(a, b):
    return a ^ b


@triton.jit
def _max_nan_combine(a, b):
    # NaN wins (torch's max): one reduction across warps (tl.max's combine skips NaN)
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_nan_combine(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _randint64(seed, offset, low, high):
    # Philox words as in tl.randint4x; two 32-bit words make one 64-bit draw (docs/conventions.md).
    r0, r1, r2, r3 = tl.randint4x(seed, offset)
    r = r0.to(tl.uint64) | (r1.to(tl.uint64) << 32)
    span = (high - low).to(tl.uint64)
    return (r % span).to(tl.int64) + low


@triton.jit
def _atomic_add_narrow(ptr, val, mask, base, WIDTH: tl.constexpr, BF16: tl.constexpr):
    # atomic_add on 8/16-bit elements (no native atomic): compare-and-swap of the aligned 32-bit
    # word holding the element, retried until no lane lost a race. Idle lanes CAS a valid word
    # with itself (atomic_cas has no mask), which never changes memory.
    addr = ptr.to(tl.int64)
    low = addr & 3
    wptr = (addr - low).to(tl.pointer_type(tl.uint32))
    base_i = base.to(tl.int64)
    safe = (base_i - (base_i & 3)).to(tl.pointer_type(tl.uint32))
    shift = (low * 8).to(tl.uint32)
    fmask = (tl.zeros_like(shift) + ((1 << WIDTH) - 1)).to(tl.uint32)
    todo = mask & (addr == addr)
    while tl.max(todo.to(tl.int32)) > 0:
        cur = tl.where(todo, wptr, safe)
        old = tl.load(cur)
        field = (old >> shift) & fmask
        if BF16:
            total = _bf16_bits(_bf16_value(field.to(tl.int16)) + val).to(tl.uint32) & fmask
        else:
            total = (field + val.to(tl.uint32)) & fmask
        new = tl.where(todo, (old & ((fmask << shift) ^ 0xFFFFFFFF)) | (total << shift), old)
        prev = tl.atomic_cas(cur, old, new)
        todo = todo & (prev != old)
    return 0


@triton.jit
def _bucketize(values, bptr, length, numel, stride, bidx, right: tl.constexpr, sptr, sstride,
               sidx, mask, bf16: tl.constexpr):
    low = tl.zeros_like(values).to(tl.int64) + tl.zeros_like(bidx).to(tl.int64)
    high = low + length
    span = length + 1
    while span > 1:
        mid = (low + high) // 2
        ok = mask & (mid < length) & ((bidx + mid * stride) < numel)
        if sptr is None:
            pos = mid
        else:
            pos = tl.load(sptr + sidx + mid * sstride, ok, other=0).to(tl.int64)
        bound = tl.load(bptr + bidx + pos * stride, ok, other=0)
        if bf16:
            bound = _bf16_value(bound)
        if right:
            above = values >= bound
        else:
            above = values > bound
        low = tl.where(above & ok, mid + 1, low)
        high = tl.where(above | (ok == 0), high, mid)
        span = (span + 1) // 2
    return low


@triton.jit
def _sort_rank(keys, valid, descending: tl.constexpr, floating: tl.constexpr):
    ki = keys[:, :, None]
    kj = keys[:, None, :]
    vi = valid[:, :, None]
    vj = valid[:, None, :]
    lanes = tl.arange(0, keys.shape[1])
    earlier = lanes[None, None, :] < lanes[None, :, None]
    if floating:
        ni = ki != ki
        nj = kj != kj
        if descending:
            less = (kj > ki) | (nj & (ni == 0))
        else:
            less = (kj < ki) | (ni & (nj == 0))
        same = (kj == ki) | (ni & nj)
    else:
        if descending:
            less = kj > ki
        else:
            less = kj < ki
        same = kj == ki
    before = (vj & (vi == 0)) | (vj & vi & (less | (same & earlier)))
    return tl.sum(before.to(tl.int32), 2)


@triton.jit
def _rank_gather(values, rank):
    slots = tl.arange(0, values.shape[1])
    hit = rank[:, :, None] == slots[None, None, :]
    return tl.sum(tl.where(hit, values[:, :, None], 0), 1)
'''

MATH_PRELUDE: Final = '''
@triton.jit
def _exp_f32(x, NVIDIA: tl.constexpr):
    # float32 exp without libdevice (linking it is a third of a small kernel's compile), in as
    # many instructions: exp(x) = 2**f * 2**n, n = round(x*log2(e)) clamped to [-126, 127] so
    # that 2**n is a normal float, f = x*log2(e) - n from two fmas (log2(e) in two parts; |f| <=
    # 1/2 unless n is clamped), 2**f from one ex2.approx. The clamp is (x*log2(e) + 126) / 253
    # clamped to [0, 1]: one saturating fma (as PTX: LLVM moves a min/max clamp past the scaling
    # that follows, where ptxas no longer folds it). Times 253 plus 1.5 * 2**23 - 126 it rounds
    # to 1.5 * 2**23 + n, whose low mantissa bits are n: shifted into an exponent they make 2**n.
    # One multiply rounds a subnormal or overflowing result. NaN gives f = NaN, +-inf f = +-inf.
    # On NVIDIA GPUs both steps are PTX instructions (tl.math.exp2 would link libdevice).
    if NVIDIA:
        s = tl.inline_asm_elementwise("fma.rn.sat.f32 $0, $1, 0f3BBADACC, 0f3EFEFCF7;", "=r,r",
                                      [x], dtype=tl.float32, is_pure=True, pack=1)
    else:
        s = tl.minimum(tl.maximum(x * 0.005702352151274681 + 0.49802371859550476, 0.0), 1.0)
    t = s * 253.0 + 12582786.0
    n = t - 12582912.0
    f = tl.fma(x, 1.4426950408889634, -n)
    f = tl.fma(x, 1.925963033500011e-08, f)  # log2(e) less its float32 rounding
    if NVIDIA:
        e = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [f],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        e = tl.math.exp2(f)
    # bits(t) - bits(1.5 * 2**23) = n; + 127: n's biased exponent
    return e * ((t.to(tl.int32, bitcast=True) - 0x4B3FFF81) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _ipow(a, b, signed: tl.constexpr):
    # One shape for both (a constant base meets a block exponent): loop-carried values must keep
    # their type on compiled Triton (the interpreter does not check).
    a, b = tl.broadcast(a, b)
    result = tl.zeros_like(a) + 1
    base = a
    e = b
    for _ in range(64):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    # Negative exponents: only 1 and -1 have integer reciprocals.
    if signed:
        neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b & 1) != 0, -1, 1), 0)).to(a.dtype)
        result = tl.where(b < 0, neg, result)
    return result


@triton.jit
def _two_prod(a, b):
    # Dekker's exact product a*b = hi + lo (Veltkamp splits; no fma needed).
    c = 134217729.0
    ta = a * c
    a_hi = ta - (ta - a)
    a_lo = a - a_hi
    tb = b * c
    b_hi = tb - (tb - b)
    b_lo = b - b_hi
    hi = a * b
    lo = ((a_hi * b_hi - hi) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return hi, lo


@triton.jit
def _log_dd(ax):
    # log(ax) as a double-double (finite ax > 0; 0, inf and NaN via tl.log): ax = m * 2**e with m in [sqrt(1/2), sqrt(2)),
    # log(m) = 2 atanh(s), s = (m - 1) / (m + 1) carried as s_hi + s_lo; ln 2 split Cody-Waite.
    sub = ax < 2.2250738585072014e-308
    xs = tl.where(sub, ax * 18446744073709551616.0, ax)
    b = xs.to(tl.int64, bitcast=True)
    e = ((b >> 52) - 1022 - tl.where(sub, 64, 0)).to(tl.float64)
    m = ((b & 0x000FFFFFFFFFFFFF) | 0x3FE0000000000000).to(tl.float64, bitcast=True)
    low = m < 0.7071067811865476
    m = tl.where(low, m * 2.0, m)
    e = tl.where(low, e - 1.0, e)
    f = m - 1.0
    u_hi = 2.0 + f
    u_lo = f - (u_hi - 2.0)
    s_hi = f / u_hi
    q_hi, q_lo = _two_prod(s_hi, u_hi)
    s_lo = (((f - q_hi) - q_lo) - s_hi * u_lo) / u_hi
    z = s_hi * s_hi
    poly = 2.0 / 27.0
    for k in tl.static_range(12, 0, -1):
        poly = poly * z + 2.0 / (2 * k + 1)
    tail = s_hi * z * poly
    a = e * 0.6931471803691238
    b2 = 2.0 * s_hi
    hi = a + b2
    bv = hi - a
    lo = (a - (hi - bv)) + (b2 - bv)
    lo = lo + (2.0 * s_lo + tail + e * 1.9082149292705877e-10)
    l_hi = hi + lo
    l_lo = lo - (l_hi - hi)
    special = (ax == 0) | (ax == float("inf")) | (ax != ax)
    l_hi = tl.where(special, tl.log(ax), l_hi)
    return l_hi, tl.where(special, 0.0, l_lo)


@triton.jit
def _pow_dd(ax, y):
    # |x|**y for float64 as exp(y * log|x|) with the product carried in double-double, so large
    # |y * log|x|| keeps full precision (plain exp(y*log(x)) loses |y*log x| * 2**-53).
    l_hi, l_lo = _log_dd(ax)
    p_hi, p_lo = _two_prod(y, l_hi)
    p_lo = p_lo + y * l_lo
    big = tl.abs(p_hi) > 1000.0
    p_lo = tl.where(big | (p_lo != p_lo), 0.0, p_lo)
    return tl.exp(p_hi) * (1.0 + p_lo)


@triton.jit
def _fpow(x, y, cpu: tl.constexpr):
    x, y = tl.broadcast(x, y)  # as in _ipow: the squaring loop carries values of x's shape
    ax = tl.abs(x)
    yi = tl.floor(y) == y
    odd = yi & (tl.abs(y) < 9007199254740992.0) & ((y % 2.0) != 0)
    if x.dtype == tl.float32:
        # exp(y*log|x|) in float64 keeps the float32 result correctly rounded in practice.
        general = tl.exp(y.to(tl.float64) * tl.log(ax.to(tl.float64))).to(tl.float32)
    else:
        general = _pow_dd(ax, y)
    # Small integer exponents by repeated squaring: exact squares stay exact.
    ay = tl.abs(y)
    small = yi & (ay <= 64)
    n = tl.where(small, ay, 0).to(tl.int32)
    r = tl.zeros_like(ax) + 1
    base = ax
    for _ in range(7):
        r = tl.where((n & 1) != 0, r * base, r)
        base = base * base
        n = n >> 1
    # Squaring is exact-ish only while every product stays a finite normal number: an overflowing
    # or subnormal power (e.g. 29.75**-29 in float32) takes the exp/log path instead.
    if x.dtype == tl.float32:
        tiny = 1.1754943508222875e-38
        inv = tl.math.div_rn(tl.zeros_like(r) + 1.0, r)  # compiled float32 `/` is div.full
    else:
        tiny = 2.2250738585072014e-308
        inv = 1.0 / r
    lost = (r == float("inf")) | (r < tiny)
    small = small & ((lost == 0) | (ax == 0) | (ax == float("inf")))
    r = tl.where(y < 0, inv, r)
    mag = tl.where(small, r, general)
    mag = tl.where((ax == 1) & (tl.abs(y) == float("inf")), 1.0, mag)
    out = tl.where((x < 0) & odd, -mag, mag)
    finite_neg = (x < 0) & (ax != float("inf"))
    # The NaN of a negative base to a fractional power: CUDA's is positive, the CPU's (x86's
    # default NaN, eager's libm) negative, which `copysign` shows (triton seed 9402, 8123).
    if cpu:
        if x.dtype == tl.float32:
            nan = tl.full(x.shape, -4194304, tl.int32).to(tl.float32, bitcast=True)
        else:
            nan = tl.full(x.shape, -2251799813685248, tl.int64).to(tl.float64, bitcast=True)
    else:
        nan = tl.full(x.shape, float("nan"), x.dtype)
    out = tl.where(finite_neg & (yi == 0) & (ay != float("inf")), nan, out)
    # Signed zero base with odd negative/positive exponent keeps its sign (C pow).
    zneg = (x == 0) & (x.to(tl.float64).to(tl.int64, bitcast=True) < 0) & odd
    out = tl.where(zneg, -out, out)
    out = tl.where(x == 1, 1.0, out)
    return tl.where(y == 0, 1.0, out)


@triton.jit
def _frexp(x, bits: tl.constexpr, mant: tl.constexpr, expmask: tl.constexpr,
           half_bias: tl.constexpr, tiny: tl.constexpr):
    sub = tl.abs(x) < tiny
    xs = tl.where(sub, x * 18446744073709551616.0, x)
    xb = xs.to(bits, bitcast=True)
    e = ((xb & expmask) >> mant).to(tl.int32) - half_bias - tl.where(sub, 64, 0)
    mb = (xb & ~expmask) | (half_bias << mant)
    m = mb.to(x.dtype, bitcast=True)
    special = (x == 0) | (x != x) | (tl.abs(x) == float("inf"))
    return tl.where(special, x, m), tl.where(special, 0, e)


@triton.jit
def _nextafter(x, y, bits: tl.constexpr):
    xb = x.to(bits, bitcast=True)
    away = (y > x) == (x > 0)
    nb = tl.where(away, xb + 1, xb - 1)
    out = nb.to(x.dtype, bitcast=True)
    tiny = (tl.zeros_like(xb) + 1).to(x.dtype, bitcast=True)
    out = tl.where(x == 0, tl.where(y > 0, tiny, -tiny), out)
    out = tl.where(x == y, y, out)
    return tl.where((x != x) | (y != y), x + y, out)


@triton.jit
def _nextafter_narrow(x, y, BF16: tl.constexpr):
    # float16/bfloat16 held in float32 step to their neighbour in their own format, as torch does.
    if BF16:
        xb = _bf16_bits(x)
    else:
        xb = x.to(tl.float16).to(tl.int16, bitcast=True)
    away = (y > x) == (x > 0)
    nb = tl.where(away, xb + 1, xb - 1).to(tl.int16)
    if BF16:
        out = _bf16_value(nb)
        tiny = tl.zeros_like(x) + 9.183549615799121e-41
    else:
        out = nb.to(tl.float16, bitcast=True).to(tl.float32)
        tiny = tl.zeros_like(x) + 5.960464477539063e-08
    out = tl.where(x == 0, tl.where(y > 0, tiny, -tiny), out)
    out = tl.where(x == y, y, out)
    return tl.where((x != x) | (y != y), x + y, out)


@triton.jit
def _erfcx_cf(x, terms: tl.constexpr):
    f = x
    for k in range(terms, 0, -1):
        f = x + (k * 0.5) / f
    return 0.5641895835477563 / f
'''


def _split(prelude: str) -> dict[str, str]:
    chunks = re.split(r"\n(?=@triton\.jit\n)", prelude.strip("\n"))
    return {re.search(r"def (\w+)\(", c).group(1): c for c in chunks}  # type: ignore[union-attr]


_HELPERS: Final = _split(PRELUDE + MATH_PRELUDE)
_WORD: Final = re.compile(r"\w+")
_WORDS: Final = {name: frozenset(_WORD.findall(chunk)) for name, chunk in _HELPERS.items()}


def prelude_for(code: str) -> str:
    """The prelude helpers `code` calls, and those they call in turn, in prelude order."""
    used: set[str] = set()
    names = set(_WORD.findall(code))
    while new := {n for n in names & _HELPERS.keys() if n not in used}:
        used |= new
        names = {w for n in new for w in _WORDS[n]}
    return "\n\n\n".join(c for n, c in _HELPERS.items() if n in used)
