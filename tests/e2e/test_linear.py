"""Linear layers: `addmm` stays one library call unless a pointwise op can take its bias add."""

from __future__ import annotations

import torch

from .helpers import check, kernels_of, on


def _externs(graphs: list) -> list[str]:
    return [op for g in graphs for op, _ in g.report.entries]


def test_linear_chain_is_library_calls_only(backends: tuple[str, str], device: str) -> None:
    torch.manual_seed(0)
    layers = torch.nn.Sequential(*(torch.nn.Linear(12, 12) for _ in range(3))).to(device)
    (x,) = on(device, torch.randn(5, 12, generator=torch.Generator().manual_seed(1)))
    with torch.no_grad():
        graphs = check(layers, backends, x)
    assert kernels_of(graphs) == 0  # the bias is added by addmm itself
    assert _externs(graphs).count("aten.addmm.default") == 3


def test_bias_add_fuses_into_activation(backends: tuple[str, str], device: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(9, 7), torch.nn.GELU(), torch.nn.Linear(7, 7), torch.nn.Flatten(0)
    ).to(device)
    (x,) = on(device, torch.randn(3, 4, 9, generator=torch.Generator().manual_seed(2)))
    x[0, 0, 0] = float("nan")
    x[1, 2, 3] = float("inf")
    with torch.no_grad():
        graphs = check(model, backends, x)
    externs = _externs(graphs)
    # the first layer feeds GELU (through a view): mm, with bias + GELU in one kernel;
    # the second feeds only a view and the output: addmm
    assert externs.count("aten.mm.default") == 1
    assert externs.count("aten.addmm.default") == 1
    assert kernels_of(graphs) == 1


def test_linear_training_step(backends: tuple[str, str], device: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 10), torch.nn.ReLU(), torch.nn.Linear(10, 3)
    ).to(device)
    (x,) = on(device, torch.randn(8, 6, generator=torch.Generator().manual_seed(3)))

    def step(inp: torch.Tensor) -> tuple[torch.Tensor, ...]:
        loss = model(inp).square().mean()
        loss.backward()
        grads = tuple(p.grad.clone() for p in model.parameters())
        model.zero_grad()
        return (loss, *grads)

    check(step, backends, x)
