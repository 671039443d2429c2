"""Philox 4x32-10 random numbers, the same stream as Triton's tl.rand/randn/randint64.

docs/conventions.md "Random numbers": the seed is split into two 32-bit key words and the offset is
the counter, so every backend draws the same numbers for a seed.
"""

from __future__ import annotations

from typing import Any

import halide as hl

from polyduct_halide.hlspecial import ex

E = Any
_U32, _U64 = hl.UInt(32), hl.UInt(64)
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57


def _umulhi(a: int, b: E) -> E:
    return hl.cast(_U32, (hl.cast(_U64, hl.u32(a)) * hl.cast(_U64, b)) >> hl.u64(32))


def philox(seed: E, offset: E) -> tuple[E, E, E, E]:
    """Four uint32 words for counter `offset` under key `seed` (tl.randint4x)."""
    seed, offset = ex(seed), ex(offset)
    seed64 = hl.reinterpret(_U64, hl.cast(hl.Int(64), seed))
    k0 = hl.cast(_U32, seed64 & hl.u64(0xFFFFFFFF))
    k1 = hl.cast(_U32, seed64 >> hl.u64(32))
    off64 = hl.reinterpret(_U64, hl.cast(hl.Int(64), offset))
    c0 = hl.cast(_U32, off64 & hl.u64(0xFFFFFFFF))
    c1 = hl.cast(_U32, off64 >> hl.u64(32)) if offset.type().bits() == 64 else hl.u32(0)
    c2 = c3 = hl.u32(0)
    for _ in range(10):
        n0 = _umulhi(_ROUND_B, c2) ^ c1 ^ k0
        n2 = _umulhi(_ROUND_A, c0) ^ c3 ^ k1
        c1 = hl.u32(_ROUND_B) * c2
        c3 = hl.u32(_ROUND_A) * c0
        c0, c2 = n0, n2
        k0 = k0 + hl.u32(_KEY_A)
        k1 = k1 + hl.u32(_KEY_B)
    return c0, c1, c2, c3


def _uniform(word: E) -> E:
    x = hl.reinterpret(hl.Int(32), word)
    x = hl.select(x < 0, ~x, x)
    return hl.cast(hl.Float(32), x) * hl.f32(4.6566127342e-10)


def rand(seed: E, offset: E) -> E:
    """Uniform float32 in [0, 1) (tl.rand)."""
    return _uniform(philox(seed, offset)[0])


def randn(seed: E, offset: E) -> E:
    """Standard normal float32 (tl.randn: Box-Muller of the first two words)."""
    w0, w1, _, _ = philox(seed, offset)
    u1 = hl.max(hl.f32(1.0e-7), _uniform(w0))
    th = hl.f32(6.283185307179586) * _uniform(w1)
    r = hl.sqrt(hl.f32(-2.0) * hl.log(u1))
    return r * hl.cos(th)


def randint64(seed: E, offset: E, low: E, high: E) -> E:
    """int64 uniform in [low, high) (Inductor's triton randint64)."""
    w0, w1, _, _ = philox(seed, offset)
    value = hl.cast(_U64, w0) | (hl.cast(_U64, w1) << hl.u64(32))
    size = hl.reinterpret(_U64, hl.cast(hl.Int(64), high) - hl.cast(hl.Int(64), low))
    return hl.reinterpret(hl.Int(64), value % size) + hl.cast(hl.Int(64), low)
