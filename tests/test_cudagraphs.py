"""CUDA graphs behind mode="reduce-overhead": plain on the CPU (said once), recorded on CUDA."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import torch
from torch import nn

from polyduct.cudagraphs import WARMUP, CudaGraphed, _copy_out, _plan, _Recorded, host_sync

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
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda *a: (_fn(*a),))(*args)  # AOT's form
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
    assert graphed.recorded == 3 and graphed.replays == 3 * 2  # each set: recorded, then replayed


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


def _recorded_like(inputs: list[Any], outputs: list[Any]) -> _Recorded:
    """A recording's bookkeeping around `outputs` (no graph: the copy-out alone, any device)."""
    return _Recorded(None, inputs, [], [], outputs, _plan(inputs, outputs))  # type: ignore[arg-type]


def test_outputs_are_copied_out_with_their_layout_aliasing_and_input_views() -> None:
    caller_x = torch.randn(10, 6)[1:]  # the caller's input: a view at storage offset 6
    static_x = torch.empty_strided(caller_x.size(), caller_x.stride()).copy_(caller_x)
    pool = torch.randn(40)  # memory the recording owns, shared by two outputs
    own = torch.randn(4, 5).t()  # dense, transposed
    outputs = [own, pool[2:12].view(2, 5), pool[20:30:2], static_x[2:5, 1:4], 7]
    got = _copy_out(_recorded_like([static_x], outputs), [caller_x])
    expected = [t.clone() if isinstance(t, torch.Tensor) else t for t in outputs]
    for o in outputs[:3]:
        o.fill_(float("nan"))  # the next replay writes the recording's memory
    torch.testing.assert_close(got[:3], expected[:3])
    assert got[0].stride() == own.stride()
    assert got[1].untyped_storage().data_ptr() == got[2].untyped_storage().data_ptr()
    assert (got[1].storage_offset(), got[2].stride()) == (2, (2,))
    assert got[3].untyped_storage().data_ptr() == caller_x.untyped_storage().data_ptr()
    torch.testing.assert_close(got[3], caller_x[2:5, 1:4])
    caller_x[3, 2] = 100.0
    assert got[3][1, 1] == 100.0  # a view of the caller's input, not a copy
    assert got[4] == 7


def _two_views(x: torch.Tensor) -> list[torch.Tensor]:
    y = x * 2
    return [y[0], y[1:], x.t(), x.cos()]


@cuda
def test_replayed_outputs_share_memory_and_view_inputs_as_the_plain_call_does() -> None:
    graphed = CudaGraphed(_two_views, "test graph")
    kept = []
    for _ in range(WARMUP + 3):
        x = torch.randn(5, 7, device="cuda")
        out = graphed(x)
        kept.append((x, out))
        assert out[2].data_ptr() == x.data_ptr() and out[2].stride() == (1, 7)
        assert out[0].untyped_storage().data_ptr() == out[1].untyped_storage().data_ptr()
    for x, out in kept:
        torch.testing.assert_close(out, _two_views(x))
    assert graphed.recorded == 1 and graphed.replays == 3


@cuda
@torch.no_grad()  # as AOTAutograd calls a compiled graph
def test_parameters_are_recorded_in_place_and_a_moved_one_records_again() -> None:
    w = nn.Parameter(torch.randn(7, device="cuda"))
    graphed = CudaGraphed(_mul, "test graph")
    x = torch.randn(3, 7, device="cuda")
    for _ in range(WARMUP + 2):
        torch.testing.assert_close(graphed(x, w)[0], x * w)
    w.add_(1.0)  # an optimizer step: same memory, the replay reads the new values
    torch.testing.assert_close(graphed(x, w)[0], x * w)
    assert graphed.recorded == 1
    w2 = nn.Parameter(torch.randn(7, device="cuda"))
    torch.testing.assert_close(graphed(x, w2)[0], x * w2)
    assert graphed.recorded == 2


def _mul(x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
    return [x * w]


def _syncs(x: torch.Tensor) -> list[torch.Tensor]:
    return [x * float(x.abs().max())]  # a host synchronisation


def _item(x: torch.Tensor) -> list[Any]:
    """A graph handing a value to the host, as `_syncs` does (`.item()`)."""
    return [x.sin(), torch.ops.aten._local_scalar_dense.default(x.abs().max())]


def test_host_synchronisations_are_found_before_recording() -> None:
    """A graph that hands a value to the host (`.item()`, `nonzero`) is never recorded: a failed
    recording would leave torch's CUDA random generator in its capture state."""
    def traced(fn: Any) -> Any:
        return torch.fx.experimental.proxy_tensor.make_fx(fn, tracing_mode="symbolic")(x)

    x = torch.randn(4, 9)
    assert "_local_scalar_dense" in str(host_sync(traced(_item)))
    assert "nonzero" in str(host_sync(traced(lambda a: [a.nonzero()])))
    assert host_sync(traced(lambda a: [a.sin() * 2])) is None
    branch = traced(lambda a: [torch.cond(a.sum() > 0, torch.sin, torch.cos, (a,))])
    assert "cond synchronises" in str(host_sync(branch))


@cuda
def test_a_host_synchronisation_runs_plainly_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    traced = torch.fx.experimental.proxy_tensor.make_fx(_item, tracing_mode="symbolic")(
        torch.randn(4, 9, device="cuda")
    )
    graphed = CudaGraphed(_syncs, "test graph", unsafe=host_sync(traced))
    with caplog.at_level(logging.INFO, logger="polyduct.cudagraphs"):
        for _ in range(WARMUP + 3):
            x = torch.randn(4, 9, device="cuda")
            torch.testing.assert_close(graphed(x)[0], _syncs(x)[0])
    assert graphed.recorded == 0 and graphed.plain == WARMUP + 3
    assert any("synchronises with the host" in r.message for r in caplog.records)


@cuda
def test_background_work_is_settled_before_the_last_warm_up() -> None:
    calls: list[int] = []
    graphed = CudaGraphed(_mul, "test graph", prepare=lambda: calls.append(graphed.plain))
    x, w = torch.randn(3, 7, device="cuda"), torch.randn(7, device="cuda")
    for _ in range(WARMUP + 2):
        graphed(x, w)
    assert calls == [WARMUP - 1]  # once, after all warm-ups but the last, before any recording


class _Counter(nn.Module):
    """A buffer mutated in place and an embedding lookup (a kernel with an index check)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.register_buffer("total", torch.zeros(16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids).sum(0)
        self.total.add_(h)
        return torch.tanh(h) + self.total


@cuda
def test_mutated_buffers_and_index_checks_match_eager_under_cuda_graphs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, eager = _Counter().cuda(), _Counter().cuda()
    eager.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="polyduct", mode="reduce-overhead")
    with caplog.at_level(logging.INFO, logger="polyduct.cudagraphs"), torch.no_grad():
        for step in range(WARMUP + 4):
            ids = torch.randint(0, 50, (12,), device="cuda")
            torch.testing.assert_close(compiled(ids), eager(ids), msg=f"step {step}")
    torch.testing.assert_close(model.total, eager.total)
    said = [r.message for r in caplog.records if r.name == "polyduct.cudagraphs"]
    assert not said, said  # recorded: the index check is a device-side assert while recording


@cuda
def test_tuning_is_finished_before_a_graph_records() -> None:
    pytest.importorskip("polyduct_triton")
    torch._dynamo.reset()
    before = set(sys.modules)
    compiled = torch.compile(_fn, backend="polyduct", mode="reduce-overhead")
    x, y = (torch.randn(1024, 2048, device="cuda") for _ in range(2))  # large: Triton tunes
    for _ in range(WARMUP + 2):
        torch.testing.assert_close(compiled(x, y), _fn(x, y))
    kernels = [sys.modules[n] for n in set(sys.modules) - before if "polyduct_triton_k_" in n]
    assert kernels and not any(k.RUNTIME.pending for k in kernels), "a graph recorded untuned launches"
