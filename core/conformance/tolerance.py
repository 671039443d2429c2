"""Tolerances as data, and the comparison that reports the first mismatching elements.

A `Tol` accepts an element when it is within `ulps` units in the last place of the output dtype
OR within `atol + rtol * |expected|`. NaN matches NaN; infinities must match exactly; +0 == -0
unless the tolerance says `signed_zero`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_BITS_DTYPE = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


@dataclass(frozen=True, slots=True)
class Tol:
    """How far a result may be from the oracle: `ulps` of the dtype, or `atol + rtol*|want|`."""

    ulps: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    signed_zero: bool = False

    def describe(self) -> str:
        parts = [f"{self.ulps} ulp"]
        if self.atol or self.rtol:
            parts.append(f"atol={self.atol:g} rtol={self.rtol:g}")
        return " or ".join(parts) + (" (signed zero)" if self.signed_zero else "")


EXACT = Tol()


def _ordered(bits: torch.Tensor, width: int) -> torch.Tensor:
    """Map float bit patterns (as signed ints) to integers ordered like the floats (-0 == +0)."""
    wide = bits.to(torch.int64)
    sign_mask = (1 << (width - 1)) - 1
    return torch.where(wide < 0, -(wide & sign_mask), wide)


def ulp_distance(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """|got - want| in units in the last place of their (common float) dtype, as float64."""
    bits = _BITS_DTYPE[want.dtype]
    width = torch.finfo(want.dtype).bits
    a = _ordered(got.contiguous().view(bits), width)
    b = _ordered(want.contiguous().view(bits), width)
    return (a - b).abs().to(torch.float64)


def mismatch_mask(got: torch.Tensor, want: torch.Tensor, tol: Tol) -> torch.Tensor:
    """Bool mask of elements of `got` that `tol` rejects (`got`, `want` of the same dtype)."""
    if want.dtype not in FLOATS:
        return got != want
    g, w = got.to(torch.float64), want.to(torch.float64)
    both_nan = g.isnan() & w.isnan()
    same = (g == w) | both_nan
    finite = g.isfinite() & w.isfinite()
    close = (g - w).abs() <= tol.atol + tol.rtol * w.abs()
    if tol.ulps:
        close = close | (ulp_distance(got, want) <= tol.ulps)
    ok = same | (finite & close)
    if tol.signed_zero:  # copysign / constant(-0.0): the sign of a zero is the result
        zero = w == 0
        ok = ok & ~(zero & (torch.signbit(g) != torch.signbit(w)))
    return ~ok


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Why one output of a probe was rejected: counts and the first offending elements."""

    output: str
    count: int
    total: int
    examples: tuple[str, ...]

    def __str__(self) -> str:
        head = f"{self.output}: {self.count}/{self.total} elements differ"
        return "\n".join([head, *("  " + e for e in self.examples)])


def compare(
    name: str,
    got: torch.Tensor,
    want: torch.Tensor,
    tol: Tol,
    inputs: dict[str, torch.Tensor],
    limit: int = 5,
) -> Mismatch | None:
    """None when `got` matches `want` under `tol`; else a `Mismatch` naming the first elements."""
    if got.shape != want.shape or got.dtype != want.dtype:
        detail = f"got {got.dtype}{tuple(got.shape)}, want {want.dtype}{tuple(want.shape)}"
        return Mismatch(name, want.numel(), want.numel(), (detail,))
    bad = mismatch_mask(got, want, tol)
    count = int(bad.sum())
    if count == 0:
        return None
    examples = []
    for flat in bad.reshape(-1).nonzero().reshape(-1)[:limit].tolist():
        pos = _unravel(flat, tuple(want.shape))
        args = ", ".join(
            f"{k}={_scalar(v, pos)}" for k, v in inputs.items() if tuple(v.shape) == want.shape
        )
        examples.append(
            f"at {pos}: inputs({args}) got {_scalar(got, pos)} want {_scalar(want, pos)}"
        )
    return Mismatch(name, count, want.numel(), tuple(examples))


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _scalar(t: torch.Tensor, pos: tuple[int, ...]) -> str:
    value = t[pos].item()
    return repr(value)
