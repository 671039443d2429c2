"""CUDA graphs behind mode="reduce-overhead": plain on the CPU (said once), recorded on CUDA."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from torch import nn

from polyduct.cudagraphs import WARMUP, CudaGraphed

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")


def _fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * y + 1.0, dim=-1).tanh()


def test_reduce_overhead_on_the_cpu_runs_plainly_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(_fn, backend="polyduct", mode="reduce-overhead")
    with caplog.at_level(logging.INFO, logger="polyduct.cudagraphs"):
        for seed in range(WARMUP + 3):
            g = torch.Generator().manual_seed(seed)
            x, y = torch.randn(6, 33, generator=g), torch.randn(6, 33, generator=g)
            torch.testing.assert_close(compiled(x, y), _fn(x, y))
    said = [r.message for r in caplog.records if r.name == "polyduct.cudagraphs"]
    assert said == ["inference graph 0 runs without CUDA graphs: an input is not a CUDA tensor"]


def test_an_unknown_mode_is_refused() -> None:
    torch._dynamo.reset()
    compiled = torch.compile(_fn, backend="polyduct", mode="fastest")
    with pytest.raises(Exception, match="mode.*'fastest'.*reduce-overhead"):
        compiled(torch.randn(3), torch.randn(3))


def _graphed(device: str, *shapes: tuple[int, ...]) -> tuple[CudaGraphed, Any]:
    """A polyduct-compiled graph of `_fn` wrapped in CudaGraphed (the compiled graph, not Dynamo)."""
    from polyduct.pipeline import Compilation

    args = [torch.randn(s, device=device) for s in shapes]
    gm = torch.fx.experimental.proxy_tensor.make_fx(_fn)(*args)
    compiled = Compilation.create({}).compile_graph(gm)
    return CudaGraphed(compiled.fn, "test graph"), compiled


@cuda
def test_replays_are_correct_and_never_overwrite_returned_outputs() -> None:
    graphed, _ = _graphed("cuda", (8, 40), (8, 40))
    seen = []
    for seed in range(WARMUP + 4):
        g = torch.Generator().manual_seed(seed)
        x, y = (torch.randn(8, 40, generator=g).cuda() for _ in range(2))
        seen.append(((x, y), graphed(x, y)[0]))
    for (x, y), out in seen:  # earlier outputs are intact after later replays
        torch.testing.assert_close(out, _fn(x, y))
    assert graphed.recorded == 1 and graphed.replays == 4 and graphed.plain == WARMUP


def _scaled(x: torch.Tensor, k: int) -> list[torch.Tensor]:
    return [x.sin() * k]


@cuda
def test_each_input_size_set_gets_its_own_graph() -> None:
    graphed = CudaGraphed(_scaled, "test graph")
    for _ in range(WARMUP + 2):
        for rows, k in ((8, 2), (4, 2), (8, 3)):
            x = torch.randn(rows, 40, device="cuda")
            torch.testing.assert_close(graphed(x, k)[0], x.sin() * k)
    assert graphed.recorded == 3 and graphed.replays == 3


@cuda
def test_training_with_reduce_overhead_matches_eager() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8)).cuda()
    ref = [p.detach().clone() for p in model.parameters()]
    compiled = torch.compile(model, backend="polyduct", mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    eager = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8)).cuda()
    for p, r in zip(eager.parameters(), ref, strict=True):
        p.data.copy_(r)
    opt_ref = torch.optim.SGD(eager.parameters(), lr=0.1)
    for step in range(WARMUP + 3):
        x = torch.randn(16, 32, device="cuda", generator=None)
        for net, o in ((compiled, opt), (eager, opt_ref)):
            net(x).square().mean().backward()
            o.step()
            o.zero_grad()
        for p, q in zip(model.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p, q, msg=f"step {step}")
