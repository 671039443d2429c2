"""Oracles that replace torch eager where eager is wrong on this machine (docs/conformance.md)."""

from __future__ import annotations

import torch

from polyduct.reference.runtime import fma as _exact_fma


def fma(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """x*y+z with ONE rounding, float64 included (exact rational arithmetic there)."""
    return _exact_fma(x, y, z)
