"""A fixed handful of PyTorch's OpInfo samples on every installed CPU kernel backend.

The full sweep (every lowered OpInfo, float32 and int64, two samples each) is
`python -m bench.opinfo --backend NAME`; see polyduct.conformance.opinfo.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from polyduct.conformance.opinfo import opinfo_cases, run_case
from polyduct.plugins import load

# Reductions reach 0-d samples; int64 isnan, fmod and rounding once failed on some backend.
SUBSET = (
    "sum-float32-0",
    "sum-int64-1",
    "amax-int64-0",
    "argmin-float32-1",
    "mean-float32-0",
    "isnan-int64-0",
    "fmod-int64-0",
    "floor-int64-0",
    "signbit-int64-0",
    "topk-float32-0",
)


def _cpu_backends() -> list[str]:
    plugins = load()
    return [n for n, s in plugins.kernel_backends.items() if "cpu" in s.backend_cls.caps.devices]


@pytest.fixture(scope="module")
def cases() -> dict[str, object]:
    return {case.id: case for case in opinfo_cases(samples=2)}


@pytest.mark.parametrize("case_id", SUBSET)
@pytest.mark.parametrize("kernels", _cpu_backends())
def test_opinfo_sample_matches_eager(
    kernels: str, case_id: str, cases: dict[str, object], isolated_cache: Path
) -> None:
    assert case_id in cases, f"{case_id} is no longer an OpInfo case of the sweep"
    result = run_case(cases[case_id], kernels)  # type: ignore[arg-type]
    assert result.status == "pass", f"{kernels} {case_id}: {result.detail}"


@pytest.mark.parametrize("kernels", _cpu_backends())
def test_effectful_linalg_runs_its_error_check(kernels: str, isolated_cache: Path) -> None:
    # linalg.inv's graph threads an effect token through `aten._linalg_check_errors`
    # (`with_effects`): it once failed to lower on every backend.
    def inverse(a: torch.Tensor) -> torch.Tensor:
        return torch.linalg.inv(a) * 2

    compiled = torch.compile(inverse, backend="polyduct", options={"kernels": kernels})
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)) + 4 * torch.eye(4)
    torch.testing.assert_close(compiled(a), inverse(a))
    with pytest.raises(torch.linalg.LinAlgError, match="linalg.inv"):
        compiled(torch.zeros(4, 4))
