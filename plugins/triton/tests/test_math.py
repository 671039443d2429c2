"""Accuracy of the Triton backend's math decompositions against exact references."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import torch
from kernels import backend, buf, cuda_source, run, spec

from polyduct.conformance.tolerance import ulp_distance
from polyduct_triton.codegen import generate
from polyduct_triton.ops import TritonOps

INF = float("inf")


def _binary(tmp: Path, op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)

    def body(ops: Any, x: Any, r: Any) -> None:
        value = getattr(ops, op)(ops.load("a", x[0]), ops.load("b", x[0]))
        ops.store("out", x[0], value)

    bufs = [buf("a", a, "in"), buf("b", b, "in"), buf("out", out, "out")]
    run(tmp, spec(op, [a.numel()], [], [("outer", body)], bufs), a, b, out)
    return out


def _ulps(got: float, want: float) -> float:
    return abs(got - want) / math.ulp(want) if want != 0 else abs(got)


def test_pow_float64_within_two_ulp_for_large_exponents(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(7)
    x = torch.exp(torch.empty(4096, dtype=torch.float64).uniform_(-700, 700, generator=g))
    y = torch.empty(4096, dtype=torch.float64).uniform_(-1, 1, generator=g)
    y = y * 700 / torch.log(x).abs().clamp(min=1)  # |y * log x| up to ~700: results stay finite
    x[:8] = torch.tensor([2.5, 2.5, 1.7976931348623157e308, 1e-310, 3.0, 0.5, 10.0, 7.0])
    y[:8] = torch.tensor([100.0, -100.0, 0.5, 0.25, 0.5, 1e-3, -300.0, 1.0 / 3.0])
    got = _binary(tmp_path, "pow", x, y)
    worst = max(_ulps(g_, x_**y_) for g_, x_, y_ in zip(got.tolist(), x.tolist(), y.tolist(), strict=True))
    assert worst <= 2.0, worst


def test_fmod_and_remainder_are_exact(tmp_path: Path) -> None:
    a = torch.tensor([2.5, -2.5, 3.4e38, 3.4e38, 1e30, -7.25, 5.0, -0.0])
    b = torch.tensor([2.9e-39, 2.9e-39, 0.5, 1.17e-38, 3.3, 2.0, -3.0, 1.0])
    got = _binary(tmp_path, "fmod", a, b)
    want = [math.fmod(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert got.tolist() == [float(torch.tensor(w, dtype=torch.float32)) for w in want]
    rem = _binary(tmp_path, "remainder", a, b)
    exact = [Fraction(x) - Fraction(y) * math.floor(Fraction(x) / Fraction(y))
             for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert rem[:-1].tolist() == [float(torch.tensor(float(e))) for e in exact[:-1]]


def _unary(tmp: Path, op: str, a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("out", x[0], getattr(ops, op)(ops.load("a", x[0])))

    bufs = [buf("a", a, "in"), buf("out", out, "out")]
    run(tmp, spec(op, [a.numel()], [], [("outer", body)], bufs), a, out)
    return out


def test_pow_float32_small_integer_exponents_leaving_the_normal_range(tmp_path: Path) -> None:
    # Repeated squaring would give 0 (29.75**29 overflows before the reciprocal) or lose bits
    # in subnormal intermediates; these must come out as the correctly rounded float32 power.
    a = torch.tensor([29.75, 2e-13, 5e12, 1e-3, 19.75, 3.0, 0.0, -0.0])
    b = torch.tensor([-29.0, 3.0, -3.0, 13.0, -29.0, -2.0, -3.0, 3.0])
    got = _binary(tmp_path, "pow", a, b)
    want = torch.pow(a.double(), b.double()).float()
    assert got.tolist() == want.tolist()


def test_zeta_float32_sums_subnormal_terms(tmp_path: Path) -> None:
    x = torch.tensor([29.0, 29.0])
    q = torch.tensor([19.75, 20.75])
    got = _binary(tmp_path, "zeta", x, q)
    want = torch.special.zeta(x.double(), q.double())
    assert torch.allclose(got.double(), want, rtol=1e-6, atol=0.0), (got, want)


def test_digamma_float16_near_a_negative_zero_is_correctly_rounded(tmp_path: Path) -> None:
    # psi(-16.734375) = -3.2747e-4 sits next to a zero of digamma: float32 keeps ~11 bits there.
    a = torch.tensor([-16.734375, -0.5, 2.5, 1e-4, -2.6103515625], dtype=torch.float16)
    got = _unary(tmp_path, "digamma", a)
    want = torch.special.digamma(a.double()).half()
    assert got.tolist() == want.tolist()


def test_nextafter_float16_and_bfloat16_step_in_their_own_format(tmp_path: Path) -> None:
    a = [0.0, -0.0, 1.0, 1.0, -1.0, float("inf"), 65504.0, float("nan"), 6e-8, -3.0]
    b = [1.0, -1.0, 2.0, 0.0, -2.0, 0.0, float("inf"), 1.0, 0.0, -3.0]
    for dtype in (torch.float16, torch.bfloat16):
        x, y = torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)
        got = _binary(tmp_path, "nextafter", x, y)
        assert torch.equal(got.view(torch.int16), torch.nextafter(x, y).view(torch.int16)), dtype


def test_erfc_float32_keeps_relative_accuracy(tmp_path: Path) -> None:
    a = torch.cat([torch.linspace(-3.0, 1.25, 512), torch.linspace(1.25, 10.0, 1024)])
    a = torch.cat([a, torch.tensor([INF, -INF, 30.0, 100.0])])
    got = _unary(tmp_path, "erfc", a)
    want = torch.special.erfc(a.double()).float()
    assert torch.equal(got[:512], want[:512])  # 1 - erf in float64: correctly rounded
    assert ulp_distance(got[512:], want[512:]).max() <= 4  # exp(-x^2) scaled, down to 1e-44


def test_float16_bessel_y0_near_its_first_zero(tmp_path: Path) -> None:
    # Y0 vanishes at 0.893577: float16 results there are subnormal and float32 terms cancel.
    a = torch.tensor([0.8935546875, 0.89306640625, 0.89404296875], dtype=torch.float16)
    got = _unary(tmp_path, "bessel_y0", a)
    want = torch.special.bessel_y0(a.double()).half()
    assert torch.equal(got, want), (got, want)


def test_exp_float32_matches_torch_without_libdevice(tmp_path: Path) -> None:
    """float32 exp is the prelude's `_exp_f32` on every target (libdevice's linking costs a third
    of a small kernel's compile): within 2 ulp of torch, with its edges (NaN, +-inf, +-0, the
    overflow and underflow thresholds, subnormal results) exact."""
    g = torch.Generator().manual_seed(11)
    edges = [float("nan"), INF, -INF, 0.0, -0.0, 88.72283, 88.72284, 89.0, -87.33655, -100.0,
             -103.97208, -103.97209, -104.0, -110.0, -1e4, 1e4, 1e-30, -1e-30, 0.34657359]
    a = torch.cat([torch.empty(20000).uniform_(-110, 90, generator=g),
                   torch.randn(4000, generator=g), torch.tensor(edges)])
    got, want = _unary(tmp_path, "exp", a), torch.exp(a)
    assert torch.equal(got.isnan(), want.isnan())
    limits = ~torch.isfinite(want) | (want == 0)  # inf and 0 exactly where torch has them
    torch.testing.assert_close(got[limits], want[limits], rtol=0, atol=0, equal_nan=True)
    number = ~want.isnan()
    assert ulp_distance(got[number], want[number]).max() <= 2  # subnormal results included

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("out", x[0], ops.exp(ops.load("a", x[0])))

    s = spec("exp_src", [8], [], [("outer", body)], [buf("a", torch.float32, "in", 8),
                                                      buf("out", torch.float32, "out", 8)])
    source = backend(tmp_path).codegen(dataclasses.replace(s, device="cuda")).source
    assert "_exp_f32(" in source and "libdevice.exp" not in source


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_exp_of_16_bit_floats_is_tritons_own_when_compiled(tmp_path: Path, dtype: torch.dtype) -> None:
    """A 16-bit float's exp is Triton's `tl.exp` in compiled kernels (ex2.approx: its error is
    far inside a 16-bit half-ulp, and it is cheaper than `_exp_f32`); the interpreter keeps the
    prelude's helper, whose results the interpreter tests check."""

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("out", x[0], ops.exp(ops.load("a", x[0])))

    s = spec("exp16_src", [8], [], [("outer", body)], [buf("a", dtype, "in", 8),
                                                        buf("out", dtype, "out", 8)])
    compiled = generate(dataclasses.replace(s, device="cuda"), TritonOps, interpret=False)
    assert "tl.exp(" in compiled and "_exp_f32" not in compiled and "libdevice." not in compiled
    assert "_exp_f32(" in backend(tmp_path).codegen(s).source


@pytest.mark.parametrize("fn", ["tanh", "expm1", "log1p"])
def test_compiled_kernels_call_libdevice_where_the_interpreter_decomposes(
    tmp_path: Path, fn: str
) -> None:
    """On a GPU tanh, expm1 and log1p are libdevice's (one routine, as Inductor's); the
    interpreter, which has no libdevice, keeps the decomposition (checked by the cases above)."""

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], getattr(ops, fn)(ops.load("a", x[0])))

    s = spec(f"lib_{fn}", [64], [], [("outer", body)],
             [buf("a", torch.float32, "in", 64), buf("o", torch.float32, "out", 64)])
    assert f"libdevice.{fn}(" in cuda_source(tmp_path, s)
    assert f"libdevice.{fn}(" not in backend(tmp_path).codegen(s).source


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_sigmoid_divides_as_inductor_does(tmp_path: Path, dtype: torch.dtype) -> None:
    """On a GPU sigmoid's reciprocal is Triton's float32 `/` (div.full, 2 ulp, Inductor's); the
    interpreter keeps the exactly rounded division."""

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.sigmoid(ops.load("a", x[0])))

    def source(dt: torch.dtype, compiled: bool) -> str:
        s = spec("sig", [64], [], [("outer", body)], [buf("a", dt, "in", 64), buf("o", dt, "out", 64)])
        return cuda_source(tmp_path, s) if compiled else backend(tmp_path).codegen(s).source

    assert "div_rn" not in source(dtype, True)
    assert "div_rn" in source(dtype, False)


def test_relu_of_negative_zero_follows_the_device_eager_runs_on(tmp_path: Path) -> None:
    """Eager's relu of -0.0 is -0.0 on the CPU (x < 0 ? 0 : x) and +0.0 on CUDA (max(x, 0)):
    `1 / relu(x)` tells them apart. The interpreter (CPU tensors) keeps -0, compiled kernels
    give +0; NaN stays NaN on both."""

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("out", x[0], ops.relu(ops.load("a", x[0])))

    s = spec("relu_src", [8], [], [("outer", body)], [buf("a", torch.float32, "in", 8),
                                                       buf("out", torch.float32, "out", 8)])
    compiled = generate(dataclasses.replace(s, device="cuda"), TritonOps, interpret=False)
    assert "> 0) | (" in compiled
    a = torch.tensor([-0.0, 0.0, -1.0, 2.0, math.nan, -math.inf, math.inf, -2.5])
    out = torch.empty_like(a)
    run(tmp_path, s, a, out)
    want = torch.relu(a)
    assert torch.equal(out.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(1 / out), torch.nan_to_num(1 / want))
