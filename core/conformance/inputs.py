"""Input generators: random values plus edge values of a dtype, odd shapes and strided layouts.

A generator kind is a short name in the case table ("any", "moderate", "degree", ...); `generate`
turns (kind, dtype, shape, seed) into a tensor. Edge values come first so every case sees them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SIGNED = (torch.int8, torch.int16, torch.int32, torch.int64)
INTS = (*SIGNED, torch.uint8)
BOOL = (torch.bool,)
ALL = (*FLOATS, *INTS, *BOOL)
INDEX = (torch.int32, torch.int64)
SHAPE = (19, 27)  # odd sizes: no vector width divides them


def float_edges(dtype: torch.dtype) -> list[float]:
    """±0, ±1, ±inf, NaN, largest, smallest normal, a subnormal, halves and a few ordinary values."""
    fi = torch.finfo(dtype)
    return [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        2.5,
        math.inf,
        -math.inf,
        math.nan,
        fi.max,
        -fi.max,
        fi.tiny,
        -fi.tiny,
        fi.tiny / 4,
        3.0,
        -7.25,
        1e-3,
        100.0,
        0.75,
    ]


def int_edges(dtype: torch.dtype) -> list[int]:
    """0, ±1, the extremes and their neighbours."""
    ii = torch.iinfo(dtype)
    values = [0, 1, 2, 7, ii.max, ii.max - 1, ii.min, ii.min + 1, -1, -2, -7]
    return [v for v in values if ii.min <= v <= ii.max]


def _with_edges(rand: torch.Tensor, edges: list[float] | list[int], cross: int) -> torch.Tensor:
    """Put edge values first; `cross` > 0 tiles them so two-input cases see every pair."""
    flat = rand.reshape(-1).clone()
    e = torch.tensor(edges, dtype=torch.float64)
    if cross > 0:  # argument `cross-1` of a 2-input op: repeat / tile so pairs cover e x e
        n = len(edges)
        e = e.repeat_interleave(n) if cross == 1 else e.repeat(n)
    count = min(len(e), flat.numel())
    flat[:count] = e[:count].to(flat.dtype)
    return flat.reshape(rand.shape)


def _any(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    if dtype in FLOATS:
        scale = torch.exp(torch.empty(shape, dtype=torch.float64).uniform_(-4, 4, generator=gen))
        base = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
        return _with_edges(base, float_edges(dtype), arg).to(dtype)
    ii = torch.iinfo(dtype)
    base = torch.randint(ii.min, ii.max, shape, generator=gen, dtype=torch.int64)
    return _with_edges(base, int_edges(dtype), arg).to(dtype)


def _uniform(low: float, high: float) -> Callable[..., torch.Tensor]:
    def make(
        dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
    ) -> torch.Tensor:
        base = torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=gen)
        edges = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.0, 0.5]
        edges = [e for e in edges if math.isnan(e) or low <= e <= high or math.isinf(e)]
        return _with_edges(base, edges, arg).to(dtype)

    return make


def _degree(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    """Small integral polynomial degrees / polygamma orders, stored in the case's float dtype."""
    return torch.randint(0, 7, shape, generator=gen).to(dtype)


def _small_int(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    low = 0 if dtype in (torch.uint8, torch.bool) else -9
    return torch.randint(low, 10, shape, generator=gen).to(dtype)


def _exponent(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    """Non-negative small exponents: integer pow has no negative powers."""
    return torch.randint(0, 6, shape, generator=gen).to(dtype)


def _shift(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    bits = torch.iinfo(dtype).bits
    return torch.randint(0, bits, shape, generator=gen).to(dtype)


def _divisor(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    """Divisors: never 0, and never -1 (INT_MIN / -1 traps in C); division by zero is undefined."""
    if dtype in FLOATS:
        return _any(dtype, shape, gen, arg)
    x = _any(dtype, shape, gen, arg).to(torch.int64)
    x = torch.where((x == 0) | (x == -1), torch.full_like(x, 3), x)
    return x.to(dtype)


def _to_int_range(
    dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator, arg: int
) -> torch.Tensor:
    """Floats whose rounding fits every integer dtype (float -> int overflow is undefined)."""
    base = torch.empty(shape, dtype=torch.float64).uniform_(-120, 120, generator=gen)
    edges = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49, 99.99, -100.5, 127.0, -128.0]
    return _with_edges(base, edges, 0).to(dtype)


GENERATORS: dict[
    str, Callable[[torch.dtype, tuple[int, ...], torch.Generator, int], torch.Tensor]
] = {
    "any": _any,
    "moderate": _uniform(-20.0, 20.0),
    "unit": _uniform(-1.0, 1.0),
    "positive": _uniform(0.0, 30.0),
    "probability": _uniform(0.0, 1.0),
    "degree": _degree,
    "small_int": _small_int,
    "exponent": _exponent,
    "shift": _shift,
    "divisor": _divisor,
    "to_int_range": _to_int_range,
}


def generate(
    kind: str, dtype: torch.dtype, shape: tuple[int, ...], seed: int, arg: int = 0
) -> torch.Tensor:
    """A tensor of `dtype` and `shape` from generator `kind`; deterministic in `seed`."""
    gen = torch.Generator().manual_seed(seed)
    return GENERATORS[kind](dtype, shape, gen, arg)


def as_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """`t` with the same values in `layout`: "contiguous", "transposed" or "sliced" (offset, step)."""
    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed":
        return t.t().contiguous().t()
    if layout == "sliced":
        rows, cols = t.shape
        big = torch.zeros((rows + 1, 2 * cols + 1), dtype=t.dtype)
        view = big[1:, 1 : 2 * cols + 1 : 2]
        view.copy_(t)
        return view
    raise ValueError(f"unknown layout {layout!r}")


def strided_empty(shape: tuple[int, ...], dtype: torch.dtype, layout: str) -> torch.Tensor:
    """An output tensor of `shape` in `layout` (filled with a poison value to catch missed stores)."""
    base = torch.zeros(shape, dtype=dtype)
    out = as_layout(base, layout)
    if dtype.is_floating_point:
        out.fill_(math.nan)
    elif dtype != torch.bool:
        out.fill_(7)
    return out


def seed_of(*parts: object) -> int:
    """A stable seed from case identifiers (hash() is salted per process; this is not)."""
    text = "|".join(str(p) for p in parts)
    value = 0
    for ch in text.encode():
        value = (value * 131 + ch) % (2**31 - 1)
    return value
