"""Higher-order ops with subgraphs (torch.cond, while_loop, scan, map, nested compile regions,
flex_attention) run as library calls, their subgraphs in eager: compiled, they give eager's
results, in training too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from .helpers import assert_same, compile_fn


def _cond(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    return torch.cond(y.sum() > 0, lambda t: t.sin() * 3, lambda t: t.cos() + 1, (y,)) + x


def _while(x: torch.Tensor) -> Any:
    from torch._higher_order_ops.while_loop import while_loop

    return while_loop(lambda i, t: i < 5, lambda i, t: (i + 1, t * 1.5 + 1), (torch.tensor(0), x))


def _scan(x: torch.Tensor) -> Any:
    from torch._higher_order_ops.scan import scan

    return scan(lambda c, t: (c + t, c * t), torch.zeros(x.shape[1], device=x.device), x)


def _map(x: torch.Tensor) -> torch.Tensor:
    from functorch.experimental.control_flow import map as control_map

    return control_map(lambda t: t.sin() + 1, x.exp())


@torch.compiler.nested_compile_region
def _region(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 3 + x


def _nested(x: torch.Tensor) -> torch.Tensor:
    return _region(x) + _region(x * 2)


CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "cond": _cond, "while_loop": _while, "scan": _scan, "map": _map, "nested_region": _nested,
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_control_flow_ops_run_their_subgraphs(
    case: str, backends: tuple[str, str], device: str
) -> None:
    fn = CASES[case]
    compiled, _ = compile_fn(fn, backends)
    for sign in (1.0, -1.0):  # cond takes each branch
        x = sign * torch.rand(6, 5, device=device) + 0.1
        assert_same(compiled(x), fn(x), atol=1e-5)


def _relative_bias(score: Any, b: Any, h: Any, q: Any, k: Any) -> Any:
    return score + (q - k) * 0.1


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return flex_attention(q, k, v, score_mod=_relative_bias)


def test_flex_attention_forward_and_backward(backends: tuple[str, str], device: str) -> None:
    """flex_attention's score_mod is a subgraph; on CUDA its backward another (the model suites'
    attn_implementation="flex_attention"; torch has no CPU backward of it)."""
    torch.manual_seed(0)
    train = device == "cuda"
    q, k, v = (torch.randn(2, 2, 16, 8, device=device, requires_grad=train) for _ in range(3))
    compiled, graphs = compile_fn(_attention, backends)
    out = compiled(q, k, v)
    want = _attention(q, k, v)
    assert_same(out, want, atol=1e-5)
    if train:
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        assert_same(grads, torch.autograd.grad(want.square().sum(), (q, k, v)), atol=1e-4)
    assert len(graphs) == 1 + train
