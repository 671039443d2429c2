"""The model suite's judge (bench/models_judge.py) on hand-made results."""

from __future__ import annotations

import torch

from bench.models_judge import judge


def _case(got: torch.Tensor | None, eager: torch.Tensor | None) -> tuple[bool, str | None]:
    ref = None if eager is None else eager.double()
    verdict = judge([got], [eager], [ref], ["grad w"], torch.float32)
    return verdict.ok, verdict.error


def test_zero_gradient_where_eager_has_none_passes() -> None:
    # AOTAutograd returns zeros for a parameter that reaches only outputs the loss ignores
    assert _case(torch.zeros(3, 4), None) == (True, None)


def test_nonzero_gradient_where_eager_has_none_fails() -> None:
    ok, error = _case(torch.tensor([0.0, 1e-3]), None)
    assert not ok and error == "grad w: unexpected"


def test_missing_gradient_fails_unless_eager_is_zero() -> None:
    ok, error = _case(None, torch.tensor([0.5, -1.0]))
    assert not ok and error == "grad w: missing"
    assert _case(None, torch.zeros(2))[0]


def test_values_are_judged_against_float64() -> None:
    eager = torch.randn(64, generator=torch.Generator().manual_seed(0))
    assert _case(eager + 1e-6, eager)[0]
    ok, error = _case(eager + 1e-2, eager)
    assert not ok and error is not None and error.startswith("grad w:")
