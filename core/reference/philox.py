"""Triton's counter-based RNG (`tl.rand`, `tl.randn`, `tl.randint4x`) with torch int64 arithmetic.

Philox 4x32 with 10 rounds: the counter is (offset, 0, 0, 0) with offset taken as 32 bits, the key
is the seed split into its low and high 32-bit words (docs/conventions.md, "Random numbers").
Every 32-bit word is held in an int64 tensor in [0, 2**32); products are formed in int64, whose
wrap-around keeps the low 64 bits exact, which is all `umulhi` needs.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor
_MASK32 = 0xFFFFFFFF
_ROUND_A = 0xD2511F53
_ROUND_B = 0xCD9E8D57
_KEY_A = 0x9E3779B9
_KEY_B = 0xBB67AE85
_ROUNDS = 10
_SCALE32 = 4.6566127342e-10  # largest scale with (2**31 - 1) * scale < 1.0 in float32


def _mulhilo(a: int, b: Tensor) -> tuple[Tensor, Tensor]:
    product = b * a  # low 64 bits of the exact 64-bit product (int64 wraps)
    return (product >> 32) & _MASK32, product & _MASK32


def randint4x(seed: Tensor, offset: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Four uint32 words (in int64 tensors) from Philox4x32-10 of counter (offset, 0, 0, 0)."""
    seed, offset = torch.broadcast_tensors(seed.to(torch.int64), offset.to(torch.int64))
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    c0 = offset & _MASK32
    c1 = torch.zeros_like(c0)
    c2, c3 = c1, c1
    for _ in range(_ROUNDS):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0 = (k0 + _KEY_A) & _MASK32
        k1 = (k1 + _KEY_B) & _MASK32
    return c0, c1, c2, c3


def _uniform(word: Tensor) -> Tensor:
    """Triton's uint_to_uniform_float for 32-bit words: [0, 1) float32."""
    signed = torch.where(word >= 2**31, word - 2**32, word)  # bitcast to int32
    signed = torch.where(signed < 0, -signed - 1, signed)
    return signed.to(torch.float32) * torch.tensor(_SCALE32, dtype=torch.float32)


def rand(seed: Tensor, offset: Tensor) -> Tensor:
    """Uniform [0, 1) float32, as `tl.rand(seed, offset)`."""
    return _uniform(randint4x(seed, offset)[0])


def randn(seed: Tensor, offset: Tensor) -> Tensor:
    """Standard normal float32 (Box-Muller of the first two words), as `tl.randn`."""
    w0, w1, _, _ = randint4x(seed, offset)
    u1 = torch.clamp(_uniform(w0), min=1.0e-7)
    theta = 6.283185307179586 * _uniform(w1)
    radius = torch.sqrt(-2.0 * torch.log(u1))
    return (radius * torch.cos(theta)).to(torch.float32)


def randint64(seed: Tensor, offset: Tensor, low: Tensor, high: Tensor) -> Tensor:
    """Int64 in [low, high): (w0 | w1 << 32) mod (high - low) as unsigned 64-bit, plus low."""
    w0, w1, _, _ = randint4x(seed, offset)
    span = (high.to(torch.int64) - low.to(torch.int64)).to(torch.int64)
    value = _umod64(w0 | (w1 << 32), span)
    return value + low.to(torch.int64)


def _umod64(x: Tensor, m: Tensor) -> Tensor:
    """x mod m with x read as unsigned 64-bit (0 < m < 2**63)."""
    x, m = torch.broadcast_tensors(x, m)
    # A negative x stands for x + 2**64 = (x & (2**63 - 1)) + 2**63.
    low = (x & 0x7FFFFFFFFFFFFFFF) % m
    top = ((2**63 - 1) % m + 1) % m
    wrapped = torch.where(low >= m - top, low - (m - top), low + top)
    return torch.where(x >= 0, x % m, wrapped)
