"""A value read by several consumers is computed once."""

from __future__ import annotations

import torch

from .helpers import check, kernels_of, on


def test_value_read_by_two_extern_calls_is_computed_once(
    backends: tuple[str, str], device: str
) -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = (a * 2).sin()  # cheap: stays lazy, then both matmuls need it in memory
        return y @ b, y @ c

    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(9, 9, generator=g) for _ in range(3))
    graphs = check(fn, backends, *on(device, a, b, c))
    assert kernels_of(graphs) == 1

