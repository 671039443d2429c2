"""Layouts of values the lowering computes into memory."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from polyduct.lowering.graph import GraphLowering
from polyduct.lowering.table import core_lowerings


def test_a_value_only_kernels_read_is_stored_in_their_order() -> None:
    """A costly permuted value read by several pointwise users (T5's position bias, read by
    every layer) is stored row-major in its own shape, the order its readers index it; eager's
    permuted strides are kept only for what a library call or the graph's output reads."""

    def fn(*xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bias = sum(xs[1:], xs[0]).permute(2, 0, 1)  # reads five buffers: computed once
        return bias + 1, bias * 2

    with FakeTensorMode():
        inputs = [torch.empty(8, 16, 4) for _ in range(5)]
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    graph = GraphLowering(core_lowerings()).run(gm)
    outputs = {o.buffer for o in graph.outputs}
    (shared,) = [b.layout for b in graph.buffers.values() if b.kind == "computed" and b.name not in outputs]
    assert tuple(int(s) for s in shared.size) == (4, 8, 16)
    assert tuple(int(s) for s in shared.stride) == (128, 16, 1)
