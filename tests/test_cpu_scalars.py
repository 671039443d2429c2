"""CPU scalar tensors in an accelerator graph (a float module attribute arrives as a 0-d CPU
float64 tensor under dynamic shapes; DeBERTa divides by `torch.tensor(d).sqrt()`): eager reads
them as scalars in accelerator ops, so no accelerator kernel may load CPU memory.

The graphs are traced with fake CUDA tensors, so this runs on a machine without a GPU; the
kernels are planned, not compiled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from polyduct.ir import ExternNode, IRGraph
from polyduct.lowering.graph import GraphLowering
from polyduct.lowering.table import core_lowerings
from polyduct.pipeline import schedule_segments
from polyduct.scheduling.plan import KernelPlan, plan
from polyduct.wrapper.runtime import resolve_op


def _planned(fn: Callable[..., Any], *make: Callable[[], torch.Tensor]) -> tuple[IRGraph, Any]:
    with FakeTensorMode():
        inputs = [m() for m in make]
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    lowering = GraphLowering(core_lowerings())
    graph = lowering.run(gm)
    return graph, plan(graph, schedule_segments(graph, lowering.barriers))


def _kernel_reads_devices(graph: IRGraph, planned: Any) -> list[tuple[str, set[str]]]:
    out = []
    for item in planned.items:
        if isinstance(item, KernelPlan):
            devices = {graph.buffers[a.name].layout.device for a in item.spec.args}
            out.append((item.spec.device, devices))
    return out


def _scale_by_cpu_scalar(x: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, ...]:
    scale = eps.to(torch.float32).sqrt() + 1
    return (x * scale).sum(1), eps * 2


def test_no_accelerator_kernel_reads_a_cpu_scalar() -> None:
    graph, planned = _planned(
        _scale_by_cpu_scalar,
        lambda: torch.empty(4, 8, device="cuda"),
        lambda: torch.empty((), dtype=torch.float64),
    )
    kernels = _kernel_reads_devices(graph, planned)
    assert kernels, "expected generated kernels"
    for device, read in kernels:
        assert read == {device}, f"a {device} kernel reads buffers on {read}"
    externs = [i for i in planned.items if isinstance(i, ExternNode)]
    assert all(callable(resolve_op(e.op)) for e in externs)
    transfers = [e for e in externs if e.op == "aten._to_copy.default"]
    # the scalar goes to the GPU once; the CPU output `eps * 2` comes back as eager has it
    assert [dict(t.kwargs)["device"].type for t in transfers] == ["cuda", "cpu"]
    assert [o.layout.device for o in graph.outputs] == ["cuda", "cpu"]


def test_explicit_transfer_to_the_cpu_stays_a_library_call() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (x.sum().cpu() * 3,)

    graph, planned = _planned(fn, lambda: torch.empty(5, device="cuda"))
    assert graph.outputs[0].layout.device == "cpu"
    for device, read in _kernel_reads_devices(graph, planned):
        assert read == {device}

