"""The special-function decompositions (`polyduct.decomp`) against torch.special, on torch tensors
through `EagerOps`: float32 and float64, random inputs over each function's domain plus edges."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.special as sp

from polyduct.decomp import SpecialFunctionsMixin
from polyduct.decomp.eager import EagerOps
from polyduct.decomp.polynomials import POLY_MAX_DEGREE
from polyduct.ops import OP_NAMES
from polyduct.reference import exact

Tensor = torch.Tensor
OPS = EagerOps()
EDGES = (0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, math.inf, -math.inf, math.nan, 1e-30, 50.0)


@dataclass(frozen=True)
class Case:
    """One special function: its torch reference, input ranges and tolerances (f64, f32)."""

    op: str
    ref: Callable[..., Tensor]
    ranges: tuple[tuple[float, float], ...]
    rtol64: float = 1e-12
    rtol32: float = 1e-5
    atol64: float = 0.0
    atol32: float = 0.0
    edges: bool = True
    exp_inputs: bool = False  # sample log-uniformly: the inputs are exp(x) for x in `ranges`
    n: int = 1500  # random samples (a third of it times 60 for two-argument ops)


def _sample(lo: float, hi: float, n: int, seed: int, edges: bool) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.empty(n, dtype=torch.float64).uniform_(lo, hi, generator=gen)
    if lo == math.floor(lo) and hi - lo < 40:  # a degree / order: whole numbers only
        return torch.randint(int(lo), int(hi) + 1, (n,), generator=gen).to(torch.float64)
    if not edges:
        return x
    return torch.cat([x, torch.tensor(EDGES, dtype=torch.float64)])


def _inputs(case: Case, dtype: torch.dtype, n: int = 1500) -> list[Tensor]:
    count = n if len(case.ranges) == 1 else n // 3
    args = [
        _sample(lo, hi, count, 17 * i + 1, case.edges) for i, (lo, hi) in enumerate(case.ranges)
    ]
    if len(args) == 2:  # every pairing of a few values of each: a grid beats a zip for 2-arg ops
        a, b = args[0][:, None], args[1][None, :60]
        args = [a.expand(-1, b.shape[1]).reshape(-1), b.expand(a.shape[0], -1).reshape(-1)]
    if case.exp_inputs:
        args = [a.exp() for a in args]
    return [a.to(dtype) for a in args]


def _degree_ref(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def ref(x: Tensor, n: Tensor) -> Tensor:
        return fn(x, n)

    return ref


def _polygamma(n: Tensor, x: Tensor) -> Tensor:
    out = torch.empty_like(x)
    for k in n.unique().tolist():
        mask = n == k
        out[mask] = torch.polygamma(int(k), x[mask])
    return out


def assert_matches(got: Tensor, want: Tensor, rtol: float, atol: float, what: str) -> None:
    """Elementwise |got - want| <= atol + rtol |want|, NaN where want is NaN, infinities equal."""
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    err = (got - want).abs()
    ok = same | (err <= atol + rtol * want.abs())
    if not bool(ok.all()):
        bad = (~ok).nonzero().flatten()[:5].tolist()
        pairs = [(float(got[i]), float(want[i])) for i in bad]
        raise AssertionError(f"{what}: {int((~ok).sum())} mismatches, first (got, want): {pairs}")


CASES: tuple[Case, ...] = (
    Case("lgamma", torch.lgamma, ((-40.0, 40.0),), rtol64=2e-12, atol64=5e-14, atol32=2e-5),
    Case("lgamma", torch.lgamma, ((0.0, 6.0),), rtol64=1e-13),
    Case("digamma", torch.digamma, ((-40.0, 40.0),), atol64=1e-14, atol32=2e-5),
    Case("digamma", torch.digamma, ((0.0, 6.0),), rtol64=1e-13, atol64=1e-15, atol32=1e-6),
    Case("polygamma", _polygamma, ((0, 6), (0.05, 30.0)), rtol64=1e-12, rtol32=2e-5),
    Case("erfcx", torch.special.erfcx, ((-27.0, 40.0),), rtol32=2e-5),
    Case("erfcx", torch.special.erfcx, ((-1.0, 1e6),)),
    Case("erfinv", torch.erfinv, ((-1.0, 1.0),), atol32=1e-7),
    Case("erfinv", torch.erfinv, ((0.999999, 1.0),)),
    # erfc form, accurate in the lower tail where ATen's (1 + erf)/2 cancels (oracle audit)
    Case("ndtr", exact.ndtr, ((-40.0, 10.0),), atol32=1e-38),
    Case("ndtri", torch.special.ndtri, ((0.0, 1.0),), atol32=1e-7),
    Case("ndtri", torch.special.ndtri, ((-700.0, 0.0),), rtol32=1e-4, exp_inputs=True),
    Case("log_ndtr", torch.special.log_ndtr, ((-50.0, 10.0),), atol32=1e-10),
    Case("spherical_bessel_j0", torch.special.spherical_bessel_j0, ((-30.0, 30.0),), atol64=1e-16),
    *(
        Case(
            f"{pre}chebyshev_polynomial_{k}",
            getattr(sp, f"{pre}chebyshev_polynomial_{k}"),
            ((-1.5, 1.5) if pre == "" else (-0.2, 1.2), (-2, 24)),
            atol64=1e-13,
            atol32=2e-4,
            edges=False,
        )
        for pre in ("", "shifted_")
        for k in "tuvw"
    ),
    Case(
        "hermite_polynomial_h",
        sp.hermite_polynomial_h,
        ((-4.0, 4.0), (-2, 16)),
        atol64=1e-12,
        atol32=1e-3,
        edges=False,
    ),
    Case(
        "hermite_polynomial_he",
        sp.hermite_polynomial_he,
        ((-4.0, 4.0), (-2, 16)),
        atol64=1e-12,
        atol32=1e-4,
        edges=False,
    ),
    Case(
        "laguerre_polynomial_l",
        sp.laguerre_polynomial_l,
        ((-1.0, 30.0), (-2, 16)),
        atol64=1e-12,
        rtol32=1e-4,
        atol32=1e-3,
        edges=False,
    ),
    Case(
        "legendre_polynomial_p",
        sp.legendre_polynomial_p,
        ((-1.0, 1.0), (-2, 16)),
        atol64=1e-14,
        atol32=1e-6,
        edges=False,
    ),
    Case("i0", torch.i0, ((-720.0, 720.0),)),
    Case("i0", torch.i0, ((-10.0, 10.0),)),
    Case("i0e", sp.i0e, ((-100.0, 100.0),)),
    Case("i1", sp.i1, ((-720.0, 720.0),)),
    Case("i1", sp.i1, ((-10.0, 10.0),)),
    Case("i1e", sp.i1e, ((-100.0, 100.0),)),
    Case("modified_bessel_i0", sp.modified_bessel_i0, ((-30.0, 30.0),)),
    Case("modified_bessel_i1", sp.modified_bessel_i1, ((-30.0, 30.0),)),
    Case("modified_bessel_k0", sp.modified_bessel_k0, ((-1.0, 700.0),), atol32=1e-37),
    Case("modified_bessel_k0", sp.modified_bessel_k0, ((0.0, 4.0),)),
    Case("modified_bessel_k1", sp.modified_bessel_k1, ((-1.0, 700.0),), atol32=1e-37),
    Case("modified_bessel_k1", sp.modified_bessel_k1, ((0.0, 4.0),)),
    Case("scaled_modified_bessel_k0", sp.scaled_modified_bessel_k0, ((-1.0, 1e4),)),
    Case("scaled_modified_bessel_k1", sp.scaled_modified_bessel_k1, ((0.0, 4.0),)),
    # ATen's J/Y are only accurate to about 1e-6 absolute (its Cephes constants are cut short),
    # hence atol64 here; `test_bessel_jy_accuracy` checks 1e-15 absolute against mpmath.
    *(
        Case(f"bessel_{f}", getattr(sp, f"bessel_{f}"), (rng,), atol64=2e-6, atol32=atol32)
        for f in ("j0", "j1", "y0", "y1")
        # float32 ATen rounds x - pi/4 in float32: its phase is off by ulp(x) for large x
        for rng, atol32 in (((-30.0, 30.0), 2e-6), ((0.001, 8.0), 2e-6), ((8.0, 1e4), 3e-5))
    ),
    # ATen's incomplete gamma is accurate to about 2e-9 (asymptotic forms for a > 20);
    # `test_incomplete_gamma_accuracy` checks 1e-12 against mpmath.
    *(
        Case(op, ref, rng, rtol64=5e-9, rtol32=2e-4, atol32=1e-37, edges=False, n=240)
        for op, ref in (
            ("igamma", torch.igamma),
            ("igammac", torch.igammac),
            ("gammainc", sp.gammainc),
            ("gammaincc", sp.gammaincc),
        )
        for rng in (((0.001, 100.0), (0.001, 200.0)), ((0.001, 3.0), (0.001, 5.0)))
    ),
    # ATen's Ai is off by up to 3e-6 (float64) / 1.5e-4 (float32); `test_airy_accuracy` checks
    # 2e-13 against mpmath.
    Case("airy_ai", sp.airy_ai, ((-30.0, 30.0),), atol64=4e-6, atol32=2e-4),
    Case("zeta", torch.special.zeta, ((1.001, 40.0), (0.01, 60.0)), rtol32=2e-5, atol32=1e-36),
)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c.op}{c.ranges}" for c in CASES])
def test_special_matches_torch(case: Case, dtype: torch.dtype) -> None:
    args = _inputs(case, dtype, case.n)
    got = getattr(OPS, case.op)(*args)
    want = case.ref(*args)
    assert got.dtype == dtype
    f64 = dtype == torch.float64
    assert_matches(
        got,
        want,
        case.rtol64 if f64 else case.rtol32,
        case.atol64 if f64 else case.atol32,
        f"{case.op} {dtype}",
    )


def test_mixin_covers_every_special_function() -> None:
    """The mixin defines only ops of the protocol, and every special function listed in the docs."""
    defined = {n for n in vars(SpecialFunctionsMixin) if not n.startswith("_")}
    for base in SpecialFunctionsMixin.__mro__[1:-1]:
        defined |= {n for n in vars(base) if not n.startswith("_")}
    assert defined <= OP_NAMES
    assert {c.op for c in CASES} <= defined


POLYNOMIALS = sorted(c.op for c in CASES if "polynomial" in c.op)


@pytest.mark.parametrize("op", POLYNOMIALS)
def test_polynomial_edges(op: str) -> None:
    """x in {NaN, +-inf, +-1, 0} for degrees -1..20, against torch's scalar path (small tensors:
    torch's vectorised path answers NaN inputs differently)."""
    for value in (math.nan, math.inf, -math.inf, 1.0, -1.0, 0.0):
        n = torch.tensor([-1.0, 0, 1, 2, 3, 5, 10, 16, 20], dtype=torch.float64)
        if "chebyshev" not in op:  # no closed form above POLY_MAX_DEGREE: NaN there
            n = n[n <= POLY_MAX_DEGREE]
        x = torch.full_like(n, value)
        assert_matches(getattr(OPS, op)(x, n), getattr(sp, op)(x, n), 1e-12, 0.0, f"{op}({value})")


JY_POINTS = (
    0.01,
    0.3,
    1.0,
    2.404825557695773,
    3.5,
    5.0,
    7.99,
    8.0,
    8.01,
    13.7,
    60.0,
    1e3,
    3e5,
    5e6,
)


@pytest.mark.parametrize("fn", ["j0", "j1", "y0", "y1"])
def test_bessel_jy_accuracy(fn: str) -> None:
    """J/Y against mpmath (a dev-only tool, skipped without it), well below ATen's own error."""
    mpmath = pytest.importorskip("mpmath")
    order, kind = int(fn[1]), fn[0]
    exact = mpmath.besselj if kind == "j" else mpmath.bessely
    for dtype, rtol, atol in ((torch.float64, 1e-13, 3e-15), (torch.float32, 5e-5, 1e-6)):
        x = torch.tensor(JY_POINTS, dtype=dtype)
        want = torch.tensor([float(exact(order, v)) for v in x.double().tolist()], dtype=dtype)
        got = getattr(OPS, f"bessel_{fn}")(x)
        assert_matches(got.double(), want.double(), rtol, atol, f"bessel_{fn} {dtype}")


AIRY_POINTS = (
    -1000.0,
    -30.0,
    -8.01,
    -8.0,
    -7.99,
    -2.338107410459767,
    -1.0,
    0.0,
    1.0,
    2.0,
    2.01,
    25.0,
)


def test_airy_accuracy() -> None:
    """Ai against mpmath across its three branches and at its first zero."""
    mpmath = pytest.importorskip("mpmath")
    for dtype, rtol, atol in ((torch.float64, 1e-12, 2e-13), (torch.float32, 1e-5, 5e-5)):
        x = torch.tensor(AIRY_POINTS, dtype=dtype)
        want = torch.tensor([float(mpmath.airyai(v)) for v in x.double().tolist()], dtype=dtype)
        assert_matches(OPS.airy_ai(x).double(), want.double(), rtol, atol, f"airy_ai {dtype}")


IGAMMA_POINTS = (  # (a, x): near the switch x = a + 1, tiny a, far tails
    (100.0, 101.0),
    (100.0, 100.999),
    (60.0, 61.0),
    (30.0, 29.0),
    (3.0, 4.0),
    (0.5, 1.4),
    (1e-5, 0.5),
    (1e-5, 1e-3),
    (0.3, 1.0),
    (2.0, 150.0),
    (80.0, 20.0),
    (1.0, 200.0),
    (50.0, 0.1),
)


@pytest.mark.parametrize("op", ["igamma", "igammac"])
def test_incomplete_gamma_accuracy(op: str) -> None:
    """P and Q against mpmath at hard points of the domain a in (0, 100], x in [0, 200]."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    lower = op == "igamma"
    want = [
        float(mpmath.gammainc(a, 0, x, regularized=True))
        if lower
        else float(mpmath.gammainc(a, x, mpmath.inf, regularized=True))
        for a, x in IGAMMA_POINTS
    ]
    a, x = (torch.tensor(v, dtype=torch.float64) for v in zip(*IGAMMA_POINTS, strict=True))
    got = getattr(OPS, op)(a, x)
    assert_matches(got, torch.tensor(want, dtype=torch.float64), 1e-12, 0.0, op)


@pytest.mark.parametrize("op", ["igamma", "igammac", "gammainc", "gammaincc"])
def test_incomplete_gamma_edges(op: str) -> None:
    """Every pairing of the edge values (ATen's answer at tiny a = 1e-30 is itself off, so the
    small values here are 1e-3 and 1e-300 for x only)."""
    values = torch.tensor([v for v in EDGES if v != 1e-30] + [1e-3], dtype=torch.float64)
    a = values[:, None].expand(-1, values.numel() + 1).reshape(-1)
    x = torch.cat([values, torch.tensor([1e-300], dtype=torch.float64)])
    x = x[None, :].expand(values.numel(), -1).reshape(-1)
    ref = getattr(torch, op) if op.startswith("ig") else getattr(sp, op)
    assert_matches(getattr(OPS, op)(a, x), ref(a, x), 5e-9, 0.0, op)
