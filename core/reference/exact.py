"""Ops where torch's CPU kernels are wrong, computed correctly (docs/conformance.md, oracle audit).

The conformance oracle and the reference runtime both use these, so the reference backend keeps
agreeing with the oracle. Each function takes and returns torch tensors; float16/bfloat16 values
arrive in their float32 compute type unless a function says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from polyduct.decomp.eager import EagerOps

Tensor = torch.Tensor
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_NARROW = (torch.float16, torch.bfloat16)


def _on_host(fn: Callable[..., np.ndarray], *args: Tensor) -> Tensor:
    """Apply a numpy ufunc to CPU copies of `args` (broadcast), back on the first one's device."""
    first = args[0]
    arrays = [a.detach().cpu().numpy() for a in torch.broadcast_tensors(*args)]
    with np.errstate(all="ignore"):  # NaN results are the answer, not a mistake
        result = torch.from_numpy(np.asarray(fn(*arrays)))
    return result.to(device=first.device, dtype=first.dtype)


def sqrt(x: Tensor) -> Tensor:
    """IEEE square root, correctly rounded (torch's float64 CPU kernel is 1 ulp off at 0.5)."""
    if x.dtype not in _FLOATS:
        return torch.sqrt(x)
    return _on_host(np.sqrt, x)


def fmod(a: Tensor, b: Tensor) -> Tensor:
    """C fmod (exact, sign of a); torch's vectorised CPU fmod gives NaN when a/b overflows."""
    if a.dtype not in _FLOATS:
        return torch.fmod(a, b)
    return _on_host(np.fmod, a, b.to(a.dtype))


def remainder(a: Tensor, b: Tensor) -> Tensor:
    """Python's float %: fmod, plus b where a nonzero fmod's sign differs from b's; a zero keeps
    fmod's sign (torch's kernels; numpy's remainder gives a zero b's sign)."""
    if a.dtype not in _FLOATS:
        return torch.remainder(a, b)
    b = b.to(a.dtype)
    r = fmod(a, b)
    return torch.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


def hypot(a: Tensor, b: Tensor) -> Tensor:
    """sqrt(a*a + b*b) without intermediate overflow (torch's CUDA kernel returns inf for
    hypot(1, 1.79e308), whose answer is finite)."""
    if a.dtype not in _FLOATS:
        return torch.hypot(a, b)
    return _on_host(np.hypot, a, b.to(a.dtype))


def _in_float64(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    def wide(x: Tensor) -> Tensor:
        return fn(x.to(torch.float64)).to(x.dtype) if x.dtype in _FLOATS else fn(x)

    wide.__doc__ = (
        f"torch.{fn.__name__} computed in float64 and rounded once: torch's float32 "
        "CPU kernel overflows about 0.7 below the top of the float32 range."
    )
    return wide


cosh = _in_float64(torch.cosh)
sinh = _in_float64(torch.sinh)


def polynomial_at_nan(x: Tensor, n: Tensor, result: Tensor) -> Tensor:
    """`result` with ATen's scalar answers where x is NaN: 0 for degree < 0 (or NaN), 1 for
    degree 0, NaN above (torch's vectorised kernel returns garbage there)."""
    degree = torch.trunc(n.to(result.dtype))
    at_nan = torch.where(degree == 0, 1.0, math.nan).to(result.dtype)
    at_nan = torch.where(degree >= 0, at_nan, torch.zeros_like(at_nan))
    return torch.where(torch.isnan(x), at_nan, result)


def ndtr(x: Tensor) -> Tensor:
    """The normal CDF as erfc(-x/sqrt 2)/2 in float64 (no cancellation in the lower tail),
    rounded to x's dtype."""
    tail: Tensor = torch.special.erfc(x.to(torch.float64) * -math.sqrt(0.5))
    return (tail * 0.5).to(x.dtype)


def nextafter(a: Tensor, b: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """The neighbour of a toward b in `dtype` (the values' storage dtype; default a's dtype).

    float16/bfloat16 values held in float32 step in their own dtype, not in float32.
    """
    if dtype not in _NARROW:
        return torch.nextafter(a, b.to(a.dtype))
    toward = torch.where(b > a, math.inf, -math.inf).to(dtype)
    step = torch.nextafter(a.to(dtype), toward).to(a.dtype)
    out = torch.where(b == a, b.to(a.dtype), step)
    return torch.where(torch.isnan(a) | torch.isnan(b), a + b.to(a.dtype), out)


_EAGER = EagerOps()


def decomposed(name: str, *args: Tensor) -> Tensor:
    """`name` from `polyduct.decomp` evaluated in float64 (1e-12 relative or better in its
    domain), rounded to the first argument's dtype: for the special functions whose ATen kernels
    are off by about 1e-6 (Bessel J/Y, Airy Ai) or 1e-9 (incomplete gamma)."""
    wide = [a.to(torch.float64) for a in torch.broadcast_tensors(*args)]
    result: Tensor = getattr(_EAGER, name)(*wide)
    return result.to(args[0].dtype)
