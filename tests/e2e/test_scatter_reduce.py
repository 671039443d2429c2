"""scatter_reduce (every reduce mode, include_self either way) and index_reduce against eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from polyduct.errors import KernelIndexError
from polyduct.lowering import scatter_reduce

from .helpers import check, compile_fn, on, skip_on_cuda
from .test_native import native

MODES = ["sum", "prod", "mean", "amax", "amin"]
DTYPES = [torch.float32, torch.float16, torch.int64, torch.int32]


def _values(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Random values of `dtype`; floats carry NaN, +-inf and -0, ints their extremes."""
    if dtype.is_floating_point:
        x = torch.randn(*shape, generator=g).to(dtype)
        flat = x.view(-1)
        flat[1], flat[4], flat[7], flat[9] = float("nan"), float("inf"), -float("inf"), -0.0
        return x
    x = torch.randint(-9, 10, shape, generator=g, dtype=dtype)
    info = torch.iinfo(dtype)
    x.view(-1)[2], x.view(-1)[5] = info.max, info.min
    return x


def _tol(dtype: torch.dtype) -> dict[str, float]:
    if dtype == torch.float16:
        return {"atol": 1e-2, "rtol": 1e-2}
    return {"atol": 1e-5, "rtol": 1e-5}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
@pytest.mark.parametrize("mode", MODES)
def test_scatter_reduce_modes(
    backends: tuple[str, str], device: str, mode: str, include_self: bool, dtype: torch.dtype
) -> None:
    g = torch.Generator().manual_seed(MODES.index(mode))
    x = _values((5, 7), dtype, g)
    src = _values((5, 9), dtype, g)
    idx = torch.randint(0, 6, (5, 9), generator=g)  # duplicates; column 6 is never named
    x, src, idx = on(device, x, src, idx)

    def fn(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return x.scatter_reduce(1, idx, src, mode, include_self=include_self)

    native(check(fn, backends, x, idx, src, **_tol(dtype)))


@pytest.mark.parametrize("mode", MODES)
def test_scatter_reduce_dim0_3d_wider_source(
    backends: tuple[str, str], device: str, mode: str
) -> None:
    g = torch.Generator().manual_seed(1)
    x = _values((4, 3, 5), torch.float32, g)
    src = torch.randn(7, 3, 6, generator=g)  # larger than index outside `dim`
    idx = torch.randint(0, 4, (6, 3, 5), generator=g)
    x, src, idx = on(device, x, src, idx)

    def fn(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> Any:
        return (
            x.scatter_reduce(0, idx, src, mode) * 2,
            x.scatter_reduce(-3, idx, src, mode, include_self=False),
        )

    native(check(fn, backends, x, idx, src))


@pytest.mark.parametrize("mode", MODES)
def test_scatter_reduce_narrow_index(backends: tuple[str, str], device: str, mode: str) -> None:
    """An index narrower than self outside `dim`: atomic modes stay native, masked ones extern."""
    g = torch.Generator().manual_seed(2)
    x, src = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    idx = torch.randint(0, 5, (4, 3), generator=g)
    x, src, idx = on(device, x, src, idx)

    def fn(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> Any:
        return x.scatter_reduce(1, idx, src, mode, include_self=False) + 1

    graphs = check(fn, backends, x, idx, src)
    fallbacks = [op for gr in graphs for op in gr.report.ops()]
    if mode in ("sum", "mean"):
        assert not fallbacks
    else:
        assert fallbacks == ["aten.scatter_reduce.two"]


def test_scatter_reduce_over_budget_runs_extern(
    backends: tuple[str, str], device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scatter_reduce, "MASKED_BUDGET", 10)
    x, src = torch.randn(4, 6, device=device), torch.randn(4, 8, device=device)
    idx = torch.randint(0, 6, (4, 8), device=device)

    def fn(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> Any:
        return x.scatter_reduce(1, idx, src, "amax"), x.scatter_reduce(1, idx, src, "mean")

    graphs = check(fn, backends, x, idx, src)
    report = "\n".join(str(gr.report) for gr in graphs)
    assert "aten.scatter_reduce.two: masked scatter reduction (amax): 192 element visits" in report
    assert [op for gr in graphs for op in gr.report.ops()] == ["aten.scatter_reduce.two"]


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
@pytest.mark.parametrize("mode", ["prod", "mean", "amax", "amin"])
def test_index_reduce(
    backends: tuple[str, str], device: str, mode: str, include_self: bool, dtype: torch.dtype
) -> None:
    g = torch.Generator().manual_seed(3)
    x = _values((6, 4), dtype, g)
    src = _values((9, 4), dtype, g)
    idx = torch.tensor([0, 2, 2, 5, 0, 0, 3, 5, 2])  # duplicates; rows 1 and 4 untouched
    x, src, idx = on(device, x, src, idx)

    def fn(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> Any:
        return (
            x.index_reduce(0, idx, src, mode, include_self=include_self),
            x.t().index_reduce(1, idx[:4], src[:4].t(), mode, include_self=include_self),
        )

    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    native(check(fn, backends, x, idx, src, **tol))


@pytest.mark.parametrize("mode", ["sum", "amax"])
def test_scatter_reduce_out_of_range_raises(
    backends: tuple[str, str], device: str, mode: str
) -> None:
    skip_on_cuda(device, "a device-side bounds failure aborts the CUDA context")
    compiled, _ = compile_fn(lambda a, i, s: a.scatter_reduce(1, i, s, mode), backends)
    x, src = torch.zeros(3, 4, device=device), torch.ones(3, 2, device=device)
    for bad in ([[0, 4], [1, 1], [2, 3]], [[0, -1]] * 3):
        with pytest.raises(KernelIndexError, match="out of bounds"):
            compiled(x, torch.tensor(bad, device=device), src)
