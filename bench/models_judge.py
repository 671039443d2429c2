"""Correctness as PyTorch's benchmark suites judge it: a compiled result is compared with a float64
run of eager; it passes when it is within a fixed tolerance of it, or when its error is no worse
than a small multiple of eager's own error (in the same dtype) against float64. Integer and
boolean outputs must equal eager's exactly."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

# fixed tolerance (rtol = atol) per dtype, and how much worse than eager's own error may be
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-3}
MULTIPLIER = 3.0


def flatten(out: Any) -> list[torch.Tensor]:
    """The tensors of a (nested) model output in a fixed order: ModelOutput fields, tuples,
    lists and dicts; None and non-tensors skipped."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):  # a transformers ModelOutput is an OrderedDict of its set fields
        return [t for v in out.values() for t in flatten(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in flatten(v)]
    return []


def main_output(out: Any) -> torch.Tensor:
    """The first floating-point tensor of an output (logits, last hidden state, ...)."""
    for t in flatten(out):
        if t.is_floating_point():
            return t
    raise ValueError("model output has no floating-point tensor")


@dataclass(frozen=True)
class Verdict:
    ok: bool
    error: str | None = None  # why it failed, one line
    max_abs: float = 0.0  # largest |compiled - float64| over all tensors
    rmse: float = 0.0  # worst root-mean-square error of the compiled tensors vs float64
    eager_rmse: float = 0.0  # eager's own, for the same tensor

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "error": self.error,
            "max_abs": self.max_abs,
            "rmse": self.rmse,
            "eager_rmse": self.eager_rmse,
        }


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    diff = (a.double() - b.double()).nan_to_num(nan=math.inf)
    return float(diff.square().mean().sqrt()) if diff.numel() else 0.0


def _one(
    name: str, got: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor, tol: float
) -> tuple[str | None, float, float, float]:
    """(error or None, max abs error, rmse, eager's rmse) of one tensor."""
    if got.shape != eager.shape:
        return f"{name}: shape {tuple(got.shape)}, eager {tuple(eager.shape)}", math.inf, 0, 0
    if not got.is_floating_point():
        same = got.dtype == eager.dtype and bool(torch.equal(got.cpu(), eager.cpu()))
        return (None if same else f"{name}: integer output differs from eager"), 0, 0, 0
    g, r = got.detach().cpu().double(), ref.detach().cpu().double()
    max_abs = float((g - r).abs().nan_to_num(nan=math.inf).max()) if g.numel() else 0.0
    rmse, eager_rmse = _rmse(g, r), _rmse(eager.detach().cpu(), r)
    if torch.allclose(g, r, rtol=tol, atol=tol, equal_nan=True):
        return None, max_abs, rmse, eager_rmse
    if rmse <= MULTIPLIER * eager_rmse + tol / 10:
        return None, max_abs, rmse, eager_rmse
    error = (
        f"{name}: max abs err {max_abs:.3g}, rmse {rmse:.3g} > {MULTIPLIER:g} x eager's "
        f"{eager_rmse:.3g} + {tol / 10:.1g}"
    )
    return error, max_abs, rmse, eager_rmse


def _zeros(t: torch.Tensor | None) -> bool:
    return t is not None and not bool(t.ne(0).any())


def judge(
    got: Sequence[torch.Tensor | None],
    eager: Sequence[torch.Tensor | None],
    ref: Sequence[torch.Tensor | None],
    names: Sequence[str],
    dtype: torch.dtype,
) -> Verdict:
    """Compare tensors pairwise. A None (a parameter the loss does not reach has no gradient)
    must be None or all zeros on the other side: AOTAutograd, under every compiler, returns
    zeros for a parameter that reaches only outputs the loss ignores (CLIP's pooler LayerNorm)."""
    if len(got) != len(eager):
        return Verdict(False, f"{len(got)} output tensors, eager has {len(eager)}")
    tol = TOLERANCE.get(dtype, 1e-4)
    worst = Verdict(True)
    for name, g, e, r in zip(names, got, eager, ref, strict=True):
        if g is None or e is None or r is None:
            if (g is None) != (e is None) and not _zeros(g if e is None else e):
                return Verdict(False, f"{name}: {'missing' if g is None else 'unexpected'}")
            continue
        error, max_abs, rmse, eager_rmse = _one(name, g, e, r, tol)
        if error is not None:
            return Verdict(False, error, max_abs, rmse, eager_rmse)
        if rmse >= worst.rmse:
            worst = Verdict(True, None, max(max_abs, worst.max_abs), rmse, eager_rmse)
    return worst
