"""Pointwise kernels with a transposed access run in tiles (transposed stores through a tile
array), checked against eager on random and edge values, odd sizes, 3-D and low precision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

INF, NAN = float("inf"), float("nan")


def _compiled(fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[Any]]:
    torch._dynamo.reset()
    graphs: list[Any] = []
    opts = {"kernels": "cpp", "observer": graphs.append}
    return torch.compile(fn, backend="polyduct", options=opts), graphs


def _source(graphs: list[Any]) -> str:
    return "\n".join(s.source for g in graphs for s in g.sources.values())


def _edges(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    flat = x.view(-1)
    flat[::7] = NAN
    flat[3::11] = INF
    flat[5::13] = -INF
    flat[2::17] = -0.0
    return x


@pytest.mark.parametrize("shape", [(64, 32), (70, 45), (3, 1000)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_transposed_store_matches_eager(shape: tuple[int, int], dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    a, b = (_edges(torch.randn(*shape, generator=g)).to(dtype) for _ in range(2))

    def fn(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (p * torch.sigmoid(q)).t().contiguous()  # a GELU-backward-like transposed write

    compiled, graphs = _compiled(fn)
    got = compiled(a, b)
    assert got.stride() == (shape[0], 1)
    torch.testing.assert_close(got, fn(a, b), equal_nan=True)
    assert "pd_tile0" in _source(graphs)


def test_transposed_load_and_3d_and_two_outputs() -> None:
    g = torch.Generator().manual_seed(7)
    a = _edges(torch.randn(5, 37, 29, generator=g))
    b = _edges(torch.randn(5, 29, 37, generator=g))

    def fn(p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = p + q.transpose(1, 2)
        return s, s.transpose(1, 2).contiguous() * 2

    compiled, graphs = _compiled(fn)
    for got, want in zip(compiled(a, b), fn(a, b), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)
        assert got.stride() == want.stride()
    assert "pd_tiles" in _source(graphs)


def test_integer_transpose_exact() -> None:
    x = torch.randint(-(2**62), 2**62, (33, 65), generator=torch.Generator().manual_seed(8))
    x[0, 0] = torch.iinfo(torch.int64).min
    compiled, _ = _compiled(lambda t: (t ^ 5).t().contiguous())
    assert torch.equal(compiled(x), (x ^ 5).t().contiguous())
