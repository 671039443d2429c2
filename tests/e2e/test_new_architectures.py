"""Patterns of architectures outside the model suite (transformers' WavLM, Reformer, Deformable
DETR), found by trying each as a user would, that the suite's models and the e2e programs missed."""

from __future__ import annotations

import pytest
import torch

from .helpers import assert_same, check, compile_fn


def test_repeat_of_a_permuted_tensor_is_contiguous(backends: tuple[str, str], device: str) -> None:
    """WavLM's relative position bias: a permuted (T, T, heads) table repeated over the batch
    and viewed as (batch * heads, T, T). Eager's `repeat` is contiguous; torch's decomposition
    followed the input's layout, and the `view` failed while tracing. One kernel computes it."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.permute(2, 0, 1).unsqueeze(0).repeat(2, 1, 1, 1).view(8, 5, 5) * 2

    graphs = check(fn, backends, torch.randn(5, 5, 4, device=device), dynamic=False)
    assert graphs[0].kernel_count == 1


def test_a_checked_dynamic_size_is_asserted_when_the_program_runs(
    backends: tuple[str, str], device: str
) -> None:
    """Reformer and Deformable DETR under automatic dynamic shapes: `torch._check(n >= 0)` on a
    dynamic size leaves `aten._assert_scalar` of a size condition in the graph, which did not
    lower ('extern result SymBool is not supported'). The condition is a size expression, checked
    as the program runs."""

    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        torch._check(n >= 0)
        return x[:n] * 2

    compiled, graphs = compile_fn(fn, backends, dynamic=True)
    x = torch.randn(10, device=device)
    for n in (3, 5):
        assert_same(compiled(x, n), fn(x, n))
    with pytest.raises(RuntimeError, match="Runtime assertion failed for expression"):
        graphs[0].fn(-1, 10, x)  # (n, x's length, x): Dynamo itself refuses n = -1


def test_a_checked_size_equality_compiles_at_a_second_size(
    backends: tuple[str, str], device: str
) -> None:
    """Deformable DETR's multi-scale attention checks that the levels' sizes add up to the
    flattened length: at a second image size (automatic dynamic shapes) that equation is a
    runtime assert, printed as Python's `==`."""

    def fn(feats: list[torch.Tensor], shapes: list[tuple[int, int]]) -> torch.Tensor:
        flat = torch.cat([x.flatten(2) for x in feats], 2)
        torch._check(sum(h * w for h, w in shapes) == flat.shape[2])
        return flat.transpose(1, 2) * 2

    compiled, _ = compile_fn(fn, backends)
    for side in (8, 12):
        feats = [torch.randn(2, 4, side // s, side // s, device=device) for s in (1, 2, 4)]
        shapes = [(t.shape[2], t.shape[3]) for t in feats]
        assert_same(compiled(feats, shapes), fn(feats, shapes))
