"""Exact C fmod for float32 and float64 in Halide expressions (no loops: fixed reduction steps)."""

from __future__ import annotations

from typing import Any

import halide as hl

from polyduct_halide.hlspecial import alone, c, ex, isfinite, isinf, isnan, neg, signbit, split64

E = Any


def _pow2_mod(d: E, m: E) -> E:
    result, base = hl.i64(1), hl.i64(2) % m
    for i in range(9):
        bit = ((d >> i) & 1) != 0
        result = hl.select(bit, (result * base) % m, result)
        base = (base * base) % m
    return result


def _fmod32(a: E, b: E) -> E:
    # Exact: |a| = ma * 2^(ea-150), |b| = mb * 2^(eb-150); fmod = ((ma * 2^(ea-eb)) mod mb) * ulp(b).
    ia = hl.cast(hl.Int(64), hl.reinterpret(hl.Int(32), a) & 0x7FFFFFFF)
    ib = hl.cast(hl.Int(64), hl.reinterpret(hl.Int(32), b) & 0x7FFFFFFF)
    ea, eb = ia >> 23, ib >> 23
    ma = hl.select(ea == 0, ia & 0x7FFFFF, (ia & 0x7FFFFF) | 0x800000)
    mb = hl.select(eb == 0, ib & 0x7FFFFF, (ib & 0x7FFFFF) | 0x800000)
    ea, eb = hl.max(ea, 1), hl.max(eb, 1)
    mb = hl.max(mb, 1)
    rem = ((ma % mb) * _pow2_mod(hl.max(ea - eb, 0), mb)) % mb
    scale = hl.pow(hl.f64(2.0), hl.cast(hl.Float(64), eb - 150))
    mag = hl.select(ia < ib, hl.abs(hl.cast(hl.Float(64), a)), hl.cast(hl.Float(64), rem) * scale)
    return hl.cast(hl.Float(32), hl.select(signbit(a), -mag, mag))


def _ilogb64(x: E) -> E:
    """floor(log2(|x|)) of a finite non-zero float64, exact (subnormals included)."""
    bits = hl.reinterpret(hl.Int(64), x)
    field = hl.cast(hl.Int(32), (bits >> 52) & 0x7FF)
    scaled = hl.reinterpret(hl.Int(64), x * hl.f64(2.0**64))
    sub = hl.cast(hl.Int(32), (scaled >> 52) & 0x7FF) - 64
    return hl.select(field == 0, sub, field) - 1023


def _pow2_64(k: E) -> E:
    """2^k for an int32 k in [-1022, 1023], built from the bits."""
    return hl.reinterpret(hl.Float(64), hl.cast(hl.Int(64), k + 1023) << 52)


def pow2(k: E, ft: Any) -> E:
    """2**k in float type `ft` for an integer k, exactly wherever it is representable, rounded as
    one `pow(2, k)` would be elsewhere (0 far below, inf far above): the product of two normal
    powers built from their bits. `hl.pow` is not exact on every target (on CUDA
    `ldexp(1.0, -4)` came out as 0.06249999999999999)."""
    wide = ft.bits() == 64
    bias, shift, it = (1023, 52, hl.Int(64)) if wide else (127, 23, hl.Int(32))
    k = hl.clamp(hl.cast(hl.Int(32), k), -2 * (bias - 1), 2 * bias)
    half = k / 2  # Halide's integer division floors: both halves are normal exponents

    def normal(e: E) -> E:
        return hl.reinterpret(ft, hl.cast(it, e + bias) << shift)

    return normal(half) * normal(k - half)


def _scale64(x: E, k: E) -> E:
    """x * 2^k for 0 <= k <= 2100 (exact while the result is finite), in three safe steps."""
    k1 = hl.min(k, 1000)
    k2 = hl.min(k - k1, 1000)
    return x * _pow2_64(k1) * _pow2_64(k2) * _pow2_64(k - k1 - k2)


_FMOD_BITS = 25  # quotient bits removed per reduction step: q * (26-bit half of b) stays exact
_FMOD_STEPS = (2098 + _FMOD_BITS - 1) // _FMOD_BITS + 1  # float64 exponents span 2^-1074..2^1023


def _fmod_step(r: E, bs: E, nofuse: E | None) -> E:
    """r - trunc(r / bs) * bs exactly, for bs <= r < 2^(_FMOD_BITS + 1) * bs; result in [0, bs).

    q has at most 26 bits, so with bs = hi + lo (hi its top 26 bits) Dekker's error term
    (q*hi - p) + q*lo of the product p = q*bs is exact, r - p is exact (Sterbenz), and the
    remainder is representable. A quotient rounded up by one leaves a tiny negative remainder.
    Each product is rounded on its own (`alone`), also where LLVM would fuse it.
    """
    q = hl.trunc(r / bs)
    p = alone(q * bs, nofuse)
    hi, lo = split64(bs)
    rem = (r - p) - ((alone(q * hi, nofuse) - p) + alone(q * lo, nofuse))
    rem = hl.select(rem < hl.f64(0.0), rem + bs, rem)
    return hl.select(rem >= bs, rem - bs, rem)


def _fmod64(a: E, b: E, nofuse: E | None) -> E:
    # Exact: |a| is reduced by b * 2^s, s shrinking by _FMOD_BITS per step (b * 2^s is a multiple
    # of b, so the remainder is unchanged), each step exact by splitting b into two halves.
    r, big = hl.abs(a), hl.abs(b)
    r = hl.select(isfinite(r) & isfinite(big) & (big > hl.f64(0.0)), r, hl.f64(0.0))
    eb = _ilogb64(hl.select(big > hl.f64(0.0), big, hl.f64(1.0)))
    for _ in range(_FMOD_STEPS):
        er = _ilogb64(hl.select(r > hl.f64(0.0), r, hl.f64(1.0)))
        shift = hl.max(er - eb - _FMOD_BITS, 0)
        # The scaled divisor is a product too: LLVM would fuse it into every sum using it
        # (harmless, it is exact, but only a kernel without FMAs is easy to check in the PTX).
        bs = alone(_scale64(big, shift), nofuse)
        r = hl.select(r >= big, _fmod_step(r, bs, nofuse), r)
    return hl.select(signbit(a), -r, r)


def fmod(a: E, b: E, nofuse: E | None = None) -> E:
    """C fmod, exact (sign of a); NaN for inf or NaN a and for NaN or zero b. `nofuse` (GPU
    targets) keeps float64's error-free products out of FMA contraction (see `alone`)."""
    a, b = ex(a), ex(b)
    r = _fmod32(a, b) if a.type().bits() == 32 else _fmod64(a, b, nofuse)
    bad = isinf(a) | isnan(a) | isnan(b) | (b == c(b, 0))
    r = hl.select(isinf(b) & isfinite(a), a, hl.select(bad, c(a, float("nan")), r))
    return hl.select(r == c(r, 0), hl.select(signbit(a), neg(c(r, 0)), c(r, 0)), r)
