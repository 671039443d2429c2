"""Random ops: same seed gives the same values, another seed others, and the distribution holds.

Each probe draws three tensors in one kernel: twice with seed 0 of the seed buffer (must be
identical) and once with seed 1 (must differ), then checks range and moments with bounds wide
enough (about 5 standard errors for 513 samples) that a correct generator never fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from polyduct.conformance.inputs import SHAPE
from polyduct.conformance.probe import BodyBase, Probe, out_like
from polyduct.conformance.special import SpecialCase
from polyduct.ops import OpHandler

Idx = Sequence[sympy.Expr]
LOW, HIGH = -5, 17
SEEDS = torch.tensor([20240611, 987654321987], dtype=torch.int64)


@dataclass(frozen=True)
class RandomBody(BodyBase):
    """o0, o1: op(seed[0], offset); o2: op(seed[1], offset); offset = flat index (int32)."""

    op: str = "rand"

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        offset = ops.index_expr(x[0] * SHAPE[1] + x[1], torch.int32)
        for k, slot in enumerate((0, 0, 1)):
            seed = ops.load_seed(self.buf("seeds"), ops.constant(slot, torch.int32))
            if self.op == "load_seed":
                value = seed
            elif self.op == "randint64":
                low = ops.constant(LOW, torch.int64)
                high = ops.constant(HIGH, torch.int64)
                value = ops.randint64(seed, offset, low, high)
            else:
                value = getattr(ops, self.op)(seed, offset)
            ops.store(self.buf(f"o{k}"), x[0] * SHAPE[1] + x[1], value)


def _moments(t: torch.Tensor) -> tuple[float, float]:
    d = t.double()
    return float(d.mean()), float(d.std())


def check_random(probe: Probe, got: dict[str, torch.Tensor]) -> list[str]:
    """Determinism, seed sensitivity, range and moments of one random op's three draws."""
    a, b, c = got["o0"], got["o1"], got["o2"]
    problems = []
    if not torch.equal(a, b):
        problems.append(f"same seed gave different values in {int((a != b).sum())} places")
    if probe.op == "load_seed":
        if not (torch.all(a == SEEDS[0]) and torch.all(c == SEEDS[1])):
            problems.append(f"load_seed gave {a.reshape(-1)[:3].tolist()}, {c.reshape(-1)[:3]}")
        return problems
    if float((a == c).double().mean()) > 0.2:
        problems.append("seeds 0 and 1 gave mostly equal values")
    mean, std = _moments(a)
    if probe.op == "rand":
        if not (a.min() >= 0 and a.max() < 1):
            problems.append(f"rand outside [0, 1): min {a.min()} max {a.max()}")
        if abs(mean - 0.5) > 0.065 or abs(std - 0.2887) > 0.05:
            problems.append(f"rand moments mean={mean:.4f} std={std:.4f} (want 0.5, 0.2887)")
    elif probe.op == "randn":
        if abs(mean) > 0.22 or abs(std - 1.0) > 0.16 or not torch.isfinite(a).all():
            problems.append(f"randn moments mean={mean:.4f} std={std:.4f} (want 0, 1)")
    else:
        if a.min() < LOW or a.max() >= HIGH:
            problems.append(f"randint64 outside [{LOW}, {HIGH}): {a.min()}..{a.max()}")
        if len(torch.unique(a)) != HIGH - LOW or abs(mean - (LOW + HIGH - 1) / 2) > 1.2:
            problems.append(f"randint64 covers {len(torch.unique(a))} values, mean {mean:.3f}")
    return problems


def _probe(op: str, dtype: torch.dtype) -> list[Probe]:
    outputs = {f"o{k}": out_like(SHAPE, dtype) for k in range(3)}
    return [
        Probe(
            op,
            dtype,
            "random",
            "seeded",
            SHAPE,
            (("outer", RandomBody(op=op)),),
            {"seeds": SEEDS},
            outputs,
            check=check_random,
        )
    ]


def _rand(dtype: torch.dtype) -> list[Probe]:
    return _probe("rand", dtype)


def _randn(dtype: torch.dtype) -> list[Probe]:
    return _probe("randn", dtype)


def _randint64(dtype: torch.dtype) -> list[Probe]:
    return _probe("randint64", dtype)


def _load_seed(dtype: torch.dtype) -> list[Probe]:
    return _probe("load_seed", dtype)


RANDOM: tuple[SpecialCase, ...] = (
    SpecialCase("load_seed", "random", (torch.int64,), _load_seed),
    SpecialCase("rand", "random", (torch.float32,), _rand),
    SpecialCase("randn", "random", (torch.float32,), _randn),
    SpecialCase("randint64", "random", (torch.int64,), _randint64),
)
