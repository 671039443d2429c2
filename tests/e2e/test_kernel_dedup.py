"""Structurally identical kernels are generated once and called once per use."""

from __future__ import annotations

import torch

from polyduct.pipeline import CompiledGraph
from polyduct.wrapper.ir import KernelCall

from .helpers import check


def _calls(graph: CompiledGraph) -> list[str]:
    return [ln.kernel for ln in graph.program.lines if isinstance(ln, KernelCall)]


def test_repeated_linear_layers_share_one_kernel(backends: tuple[str, str], device: str) -> None:
    torch.manual_seed(0)
    # each bias add fuses with the activation after it: four identical kernels, one compiled
    parts = [m for _ in range(4) for m in (torch.nn.Linear(8, 8), torch.nn.Tanh())]
    layers = torch.nn.Sequential(*parts).to(device)
    x = torch.randn(3, 8, device=device)
    with torch.no_grad():
        (graph,) = check(layers, backends, x)
    assert _calls(graph) == ["kernel0"] * 4
    assert list(graph.sources) == ["kernel0"]


def test_kernels_differing_in_a_constant_stay_apart(backends: tuple[str, str], device: str) -> None:
    def fn(a: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b = (a + 1) @ w
        c = (b + 2) @ w
        return c + 1, b, c  # b and c stay alive: no kernel writes over them (test_reuse.py)

    a, w = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    (graph,) = check(fn, backends, a, w)
    assert _calls(graph) == ["kernel0", "kernel1", "kernel0"]
    assert sorted(graph.sources) == ["kernel0", "kernel1"]


def test_kernels_differing_in_shape_or_dtype_stay_apart(
    backends: tuple[str, str], device: str
) -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        m = a.sin() @ w  # an output, so m.sin() writes a fresh buffer as a.sin() does
        return (m.sin() @ w).double().sin(), b.sin(), m

    a, w = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    b = torch.randn(5, 4, device=device)
    (graph,) = check(fn, backends, a, b, w)
    calls = _calls(graph)
    assert calls.count("kernel0") == 2  # a.sin() and (a.sin() @ w).sin()
    assert len(calls) == 4 and len(set(calls)) == len(graph.sources) == 3
