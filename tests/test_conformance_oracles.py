"""The oracle-audit decisions (docs/conformance.md): where torch eager is wrong, the oracle is
right, and the reference backend's kernels agree with it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mpmath
import pytest
import sympy
import torch

from polyduct.conformance import oracles
from polyduct.conformance.elementwise import reference
from polyduct.conformance.table import CASES
from polyduct.kernel import KernelBuffer, KernelSpec, Stage
from polyduct.reference.backend import ReferenceBackend

F64 = torch.float64
Body = Callable[[Any, Sequence[sympy.Expr], Sequence[sympy.Expr]], None]


@pytest.fixture(autouse=True)
def _cache(isolated_cache: Path) -> Path:
    return isolated_cache


def buf(name: str, dtype: torch.dtype, role: str, numel: int) -> KernelBuffer:
    return KernelBuffer(name, dtype, role, sympy.Integer(numel))  # type: ignore[arg-type]


def run(n: int, body: Body, buffers: Sequence[KernelBuffer], args: Sequence[torch.Tensor]) -> None:
    """One pointwise reference kernel over n elements."""
    spec = KernelSpec("k_test", (sympy.Integer(n),), (), (Stage("outer", body),), tuple(buffers))
    backend = ReferenceBackend()
    backend.load([backend.codegen(spec)])["k_test"](*args)


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


def test_hypot_does_not_overflow_and_cosh_sinh_reach_the_top_of_float32() -> None:
    big = torch.tensor([1.7976931348623157e308, 3.0] * 8, dtype=F64)
    assert oracles.hypot(torch.ones_like(big), big)[:2].tolist() == [
        big[0].item(),
        math.hypot(1, 3),
    ]
    x = torch.tensor([-89.02455139160156, 0.5] * 8, dtype=torch.float32)
    for op, exact in (("cosh", mpmath.cosh), ("sinh", mpmath.sinh)):
        want = torch.tensor([float(exact(v)) for v in x[:2].double().tolist()]).float()
        assert torch.isfinite(_case(op).ref(x)).all()  # type: ignore[attr-defined]
        assert _case(op).ref(x)[:2].tolist() == want.tolist()  # type: ignore[attr-defined]


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


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_nextafter_of_half_values_steps_in_their_own_dtype(dtype: torch.dtype) -> None:
    """Values loaded from a float16 buffer are held in float32, yet step to the float16 neighbour
    (a float32 step would round back to x when stored)."""
    a = torch.tensor([1.0, 0.0, -2.5, 1.0, float("nan"), 65504.0, 3.0], dtype=dtype)
    b = torch.tensor([2.0, 1.0, 0.0, 1.0, 0.0, float("inf"), 3.0], dtype=dtype)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.store("out", x[0], ops.nextafter(ops.load("a", x[0]), ops.load("b", x[0])))

    out = torch.empty(7, dtype=dtype)
    buffers = (buf("a", dtype, "in", 7), buf("b", dtype, "in", 7), buf("out", dtype, "out", 7))
    run(7, body, buffers, (a, b, out))
    torch.testing.assert_close(out, torch.nextafter(a, b), equal_nan=True, rtol=0, atol=0)
    assert out[0] > 1.0 and out[1] > 0.0


def test_fmod_remainder_and_sqrt_are_exact_where_torch_is_not() -> None:
    """fmod/remainder with an overflowing quotient or a subnormal divisor (torch's vectorised
    kernel: NaN) and float64 sqrt(0.5) (torch: 1 ulp low), per the oracle audit."""
    a = torch.tensor([1e308, -1e308, 3.0, 1.0, 0.5], dtype=torch.float64)
    b = torch.tensor([1e-300, 3e-310, -2.0, 5e-324, 0.25], dtype=torch.float64)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        va, vb = ops.load("a", x[0]), ops.load("b", x[0])
        ops.store("f", x[0], ops.fmod(va, vb))
        ops.store("m", x[0], ops.remainder(va, vb))
        ops.store("s", x[0], ops.sqrt(va))

    outs = [torch.empty(5, dtype=torch.float64) for _ in range(3)]
    buffers = [buf("a", torch.float64, "in", 5), buf("b", torch.float64, "in", 5)]
    buffers += [buf(n, torch.float64, "out", 5) for n in ("f", "m", "s")]
    run(5, body, buffers, (a, b, *outs))
    pairs = list(zip(a.tolist(), b.tolist(), strict=True))
    assert outs[0].tolist() == [math.fmod(x, y) for x, y in pairs]
    assert outs[1].tolist() == [x % y for x, y in pairs]
    assert outs[2][4].item() == 0.7071067811865476  # sqrt(0.5) correctly rounded
    assert outs[2][0].item() == math.sqrt(1e308) and outs[2][1].isnan()
