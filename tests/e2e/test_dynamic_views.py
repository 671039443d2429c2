"""Views under dynamic shapes: indices that are expressions of the sizes."""

from __future__ import annotations

import torch

from .helpers import assert_same, compile_fn


def _views(x: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Longformer's chunked attention slices `[-(w + 1):-1]` with `w` a size: under
    `dynamic=True` the start is `-(s0 + 1)`, negative though not a number, and counts from the
    end as a literal -5 does."""
    n = x.shape[0]
    window = x[:, -(n + 1) : -1] * 2
    picked = x.select(1, -n) + 1
    tail = x[:, -n:].sum(1)
    scattered = torch.slice_scatter(x, src, 1, -(n + 1), -1)
    return window, picked, tail, scattered


def test_symbolic_negative_indices_count_from_the_end(
    backends: tuple[str, str], device: str
) -> None:
    compiled, graphs = compile_fn(_views, backends, dynamic=True)
    for n, m in ((3, 10), (4, 9), (2, 17)):
        x = torch.randn(n, m, device=device)
        src = torch.randn(n, n, device=device)
        assert_same(compiled(x, src), _views(x, src))
    assert len(graphs) == 1, "one dynamic compile serves every size"


def _last(x: torch.Tensor, k: int) -> torch.Tensor:
    """transformers' `hidden[:, -logits_to_keep:]`: an int argument traced as a SymInt has no
    sign (0 keeps every row), unlike a size."""
    return x[:, -k:] * 2


def test_int_argument_as_slice_start_has_no_sign(backends: tuple[str, str], device: str) -> None:
    compiled, _ = compile_fn(_last, backends, dynamic=True)
    x = torch.randn(2, 7, 3, device=device)
    for k in (2, 3, 0, 5):
        assert_same(compiled(x, k), _last(x, k))
