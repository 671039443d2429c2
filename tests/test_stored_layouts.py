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


def test_a_costly_value_expanded_for_a_library_call_keeps_eager_padded_strides() -> None:
    """The GPU's memory-efficient attention pads its bias rows to a multiple of 8 elements and
    expands the padded view over heads; it refuses a bias whose strides are not aligned. A costly
    mask (BART's, from sizes and a padding mask) is computed once before the expand: it is
    stored with eager's padded strides (408, 24, 1), not row-major (289, 17, 1)."""

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *masks: torch.Tensor) -> tuple:
        mask = sum(masks[1:], masks[0]).sin().cos().tanh()  # costly: computed once
        padded = torch.ops.aten.constant_pad_nd.default(mask, [0, 7])
        bias = torch.ops.aten.slice.Tensor(padded, -1, 0, 17).expand(2, 4, 17, 17)
        return (torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, False)[0],)

    with FakeTensorMode():
        qkv = [torch.empty(2, 4, 17, 16, device="cuda") for _ in range(3)]
        inputs = qkv + [torch.empty(2, 1, 17, 17, device="cuda") for _ in range(3)]
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    graph = GraphLowering(core_lowerings()).run(gm)
    (attention,) = [n for n in graph.nodes if "efficient_attention" in getattr(n, "op", "")]
    bias = dict(attention.views)[attention.args[3].name]
    assert tuple(int(s) for s in bias.layout.stride) == (408, 0, 24, 1)
