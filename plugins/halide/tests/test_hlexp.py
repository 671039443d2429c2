"""The vector float32 functions of `hlexp` and `hltrig` against torch's float64 results rounded
to float32."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import halide as hl
import pytest
import torch

from polyduct_halide import hlexp, hltrig

TARGET = hl.get_host_target().with_feature(hl.TargetFeature.StrictFloat)
F32_MAX = torch.finfo(torch.float32).max
SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), F32_MAX, -F32_MAX, 1e-45, -1e-45]
# exp overflows past 88.7228, is subnormal below -87.3365 and 0 below -103.9721
EDGES = [88.72283, 88.72284, -87.33654, -87.3366, -103.97, -103.98, 1e-10, -1e-10, 0.5, 8.0]
EDGES += [2.5, -2.5, 10.05, 10.06, -10.5, 0.49999997]  # erf's ranges, erfc's last subnormal
EDGES += [-1.0, -0.99999994, -1.0000001, 2.0**-30, -(2.0**-30), 1024.0, 1000.0]  # log1p, log2
# sin/cos: the float32s nearest pi/2, pi, 3pi/2 and 2pi, large arguments and 2^100
EDGES += [1.5707964, 3.1415927, 4.712389, 6.2831855, 105414350.0, 8388608.5, 16777216.0, 2.0**100]
FUNCTIONS: dict[str, tuple[Callable[[Any, hl.Target], Any], Callable[..., torch.Tensor]]] = {
    "exp": (hlexp.exp, torch.exp),
    "expm1": (hlexp.expm1, torch.expm1),
    "sigmoid": (hlexp.sigmoid, torch.sigmoid),
    "tanh": (hlexp.tanh, torch.tanh),
    "log": (hlexp.log, torch.log),
    "log2": (hlexp.log2, torch.log2),
    "log10": (hlexp.log10, torch.log10),
    "log1p": (hlexp.log1p, torch.log1p),
    "erf": (hlexp.erf, torch.erf),
    "erfc": (hlexp.erfc, torch.erfc),
    "sin": (hltrig.sin, torch.sin),
    "cos": (hltrig.cos, torch.cos),
}


def _arguments() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    bits = torch.randint(-(2**31), 2**31, (20000,), generator=generator, dtype=torch.int64)
    return torch.cat(
        [
            torch.tensor(SPECIAL + EDGES),
            bits.to(torch.int32).view(torch.float32),  # every exponent, NaNs included
            torch.linspace(-110.0, 100.0, 20001),
            torch.linspace(-1e-3, 1e-3, 2001),
        ]
    )


def _ordered(x: torch.Tensor) -> torch.Tensor:
    bits = x.view(torch.int32).to(torch.int64)
    return torch.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_within_one_ulp_of_the_rounded_float64_result(name: str) -> None:
    mine, reference = FUNCTIONS[name]
    x = _arguments()
    source, i = hl.ImageParam(hl.Float(32), 1, "x"), hl.Var("i")
    func = hl.Func(f"f_{name}")
    func[i] = mine(source[i], TARGET)
    func.vectorize(i, 8)
    got = torch.empty_like(x)
    func.compile_to_callable([source], TARGET)(hl.Buffer(x.numpy()), hl.Buffer(got.numpy()))
    want = reference(x.double()).float()
    assert torch.equal(got.isnan(), want.isnan())
    ulps = torch.where(got.isnan(), 0, (_ordered(got) - _ordered(want)).abs())
    assert int(ulps.max()) <= 1, f"{name}: {int(ulps.max())} ulp at x={x[ulps.argmax()].item()}"
    zeros = want == 0
    assert torch.equal(got[zeros].signbit(), want[zeros].signbit())  # -0 stays -0


def test_float64_and_gpu_targets_keep_libm() -> None:
    x = hl.Var("x")
    assert hlexp.fast(hl.cast(hl.Float(32), x), TARGET)
    assert not hlexp.fast(hl.cast(hl.Float(64), x), TARGET)
    assert not hlexp.fast(hl.cast(hl.Float(32), x), TARGET.with_feature(hl.TargetFeature.CUDA))


def test_trig_needs_strict_float_for_its_reduction() -> None:
    """Without StrictFloat Halide may reassociate the reduction's sums: libm runs instead."""
    x = hl.cast(hl.Float(32), hl.Var("x"))
    assert hltrig._vector(x, TARGET)
    assert not hltrig._vector(x, hl.get_host_target().without_feature(hl.TargetFeature.StrictFloat))
    assert not hltrig._vector(x, TARGET.with_feature(hl.TargetFeature.CUDA))
