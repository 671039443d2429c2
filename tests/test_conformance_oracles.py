"""The oracle-audit decisions (docs/conformance.md): where torch eager is wrong, the oracle is right."""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

from polyduct.conformance import oracles
from polyduct.conformance.elementwise import reference
from polyduct.conformance.table import CASES

F64 = torch.float64


def _case(op: str) -> object:
    return next(c for c in CASES if c.op == op)


def test_sqrt_is_correctly_rounded() -> None:
    x = torch.full((64,), 0.5, dtype=F64)
    assert oracles.sqrt(x)[0].item() == 0.7071067811865476 == math.sqrt(0.5)


def test_fmod_and_remainder_with_an_overflowing_quotient() -> None:
    a = torch.tensor([1e308, -1e308, 3.0, -0.0, 1.0], dtype=F64).repeat(8)
    b = torch.tensor([1e-300, 3e-310, -2.0, 2.0, -0.0], dtype=F64).repeat(8)
    pairs = list(zip(a.tolist(), b.tolist(), strict=True))[:4]
    assert oracles.fmod(a, b)[:4].tolist() == [math.fmod(x, y) for x, y in pairs]
    assert oracles.remainder(a, b)[:4].tolist() == [x % y for x, y in pairs]
    assert oracles.fmod(a, b)[4].isnan() and oracles.remainder(a, b)[4].isnan()
    ints = torch.tensor([7, -7], dtype=torch.int32)
    assert oracles.remainder(ints, torch.tensor([-3, 3], dtype=torch.int32)).tolist() == [-2, 2]


@pytest.mark.parametrize("op", ["chebyshev_polynomial_u", "legendre_polynomial_p"])
def test_polynomials_at_nan_follow_the_scalar_path(op: str) -> None:
    n = torch.tensor([-2.0, 0.0, 0.5, 1.0, 4.0, 6.0] * 8, dtype=F64)
    x = torch.full_like(n, math.nan)
    got = _case(op).ref(x, n)  # type: ignore[attr-defined]
    assert got[:2].tolist() == [0.0, 1.0] and got[2].item() == 1.0
    assert got[3:6].isnan().all()


def test_ndtr_of_bfloat16_is_the_rounded_true_value() -> None:
    x = torch.tensor([-5.53125, -10.0, 0.0, 3.0], dtype=torch.bfloat16)
    (want,) = reference(_case("ndtr"), [x], ())  # type: ignore[arg-type]
    exact = [float(mpmath.ncdf(v)) for v in x.double().tolist()]
    assert want.to(torch.bfloat16).tolist() == torch.tensor(exact).to(torch.bfloat16).tolist()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_nextafter_of_half_values_is_their_own_neighbour(dtype: torch.dtype) -> None:
    x = torch.tensor([1.0, 0.0], dtype=dtype)
    y = torch.tensor([2.0, -1.0], dtype=dtype)
    (want,) = reference(_case("nextafter"), [x, y], ())  # type: ignore[arg-type]
    eps = torch.finfo(dtype).eps
    assert want.tolist() == [1.0 + eps, -torch.finfo(dtype).smallest_normal * eps]


@pytest.mark.parametrize(
    ("op", "exact"),
    [
        ("bessel_j0", lambda v: mpmath.besselj(0, v)),
        ("airy_ai", mpmath.airyai),
    ],
)
def test_special_functions_use_high_precision_values(op: str, exact: object) -> None:
    x = torch.tensor([5.443143426569281, -2.4278798387713385, math.inf, math.nan], dtype=F64)
    got = getattr(oracles, op)(x)
    with mpmath.workdps(30):
        want = [float(exact(v)) for v in x[:2].tolist()]  # type: ignore[operator]
    assert got[:2].tolist() == want
    assert got[2:].isnan().all()  # ATen's answers at its edges
