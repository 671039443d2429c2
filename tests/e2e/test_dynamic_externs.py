"""Library calls under dynamic shapes: results held to the layout their fake tensor promised."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .helpers import assert_same, compile_fn


def _attention(x: torch.Tensor, mask: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """GPT-2's attention shape: the query a transposed view of a computed value, so polyduct
    materialises it contiguously, and the library then returns another layout than the traced
    (transposed) query gave its fake result."""
    b, n, _ = x.shape
    q = (x + 1).view(b, n, 4, 16).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    return o.transpose(1, 2).reshape(b * n, 64) @ w


def test_extern_result_restrided_with_symbolic_strides(
    backends: tuple[str, str], device: str
) -> None:
    compiled, graphs = compile_fn(_attention, backends, dynamic=True)
    w = torch.randn(64, 64, device=device)
    for n in (8, 13, 5):
        x = torch.randn(2, n, 64, device=device)
        mask = torch.randn(2, 1, n, n, device=device)
        assert_same(compiled(x, mask, w), _attention(x, mask, w), atol=1e-4, rtol=1e-4)
    assert len(graphs) == 1, "one dynamic compile serves every length"


def test_size_symbol_outlives_extern_argument(backends: tuple[str, str], device: str) -> None:
    """A size symbol passed to a library call is not a buffer: it is never freed after it."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_strided((x.shape[0], 3), (1, x.shape[0]), device=x.device).fill_(2.0)
        return (x + 1) * y.sum() + x.shape[0]

    compiled, _ = compile_fn(fn, backends, dynamic=True)
    for n in (4, 9):
        x = torch.randn(n, 3, device=device)
        assert_same(compiled(x), fn(x))


def test_size_expression_outputs_are_computed_per_call(
    backends: tuple[str, str], device: str
) -> None:
    """A graph returning a size expression (`s0*s1`, a size backward needs; BART's training
    graph under dynamic shapes) returns its value as an int, not the expression."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from polyduct.pipeline import Compilation

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        return x.sin(), x.shape[0] * x.shape[1] + 1, x.shape[0]

    gm = make_fx(fn, tracing_mode="symbolic")(torch.randn(3, 5, device=device))
    kernels, wrapper = backends
    run = Compilation.create({"kernels": kernels, "wrapper": wrapper}).compile_graph(gm)
    for shape in [(3, 5), (4, 7)]:
        x = torch.randn(*shape, device=device)
        out = run(x)
        assert out[1:] == [shape[0] * shape[1] + 1, shape[0]]
        assert all(type(o) is int for o in out[1:])
        assert_same(out[0], x.sin())
