"""Graph outputs in eager's layout where a backward graph would assert it.

A computed buffer (a sort's values, row-major) is copied into eager's dense strides when they
differ (a sort of a transposed input keeps its layout in eager); an expanded view of one (a mask
broadcast over heads, its base stored row-major) is copied into a base with eager's strides, once
along the expanded dims.

A training graph may save `v.unfold(0, 6, 2)` of a computed `v` for its backward: eager's saved
tensor is a view whose windows share memory, and the backward graph asserts its strides. Such a
layout cannot be written element by element, so the view's base is computed into memory (with
eager's strides) and the view is lowered again over it: the output is that view of the buffer.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.fx

from polyduct.ir import IRGraph, Layout, Lazy, StorageView
from polyduct.lowering.sizes import (
    broadcast_like_eager,
    broadcast_of_dense,
    eager_layout,
    hint,
    meta_layout,
    non_overlapping,
    realize_like_eager,
)


class _Lowering(Protocol):
    graph: IRGraph
    env: dict[torch.fx.Node, Any]

    def _call(self, node: torch.fx.Node) -> Any: ...


def overlapping_view(lowering: _Lowering, arg: Any) -> StorageView | None:
    """The output `arg` as a view of its realised base, when eager's result overlaps itself;
    None when it does not (or it is not a view of a node's value)."""
    if not isinstance(arg, torch.fx.Node) or not getattr(arg.target, "is_view", False):
        return None
    meta = arg.meta.get("val")
    if not isinstance(meta, torch.Tensor) or non_overlapping(meta) or broadcast_of_dense(meta):
        return None
    base = arg.args[0] if arg.args else None
    if not isinstance(base, torch.fx.Node) or not isinstance(lowering.env.get(arg), Lazy):
        return None
    value = lowering.env[base]
    if isinstance(value, Lazy):
        lowering.env[base] = realize_like_eager(lowering.graph, value, base.meta.get("val"))
    result = lowering._call(arg)
    return result if isinstance(result, StorageView) else None


def stored_like_input(graph: IRGraph, value: Any, meta: torch.Tensor) -> Any:
    """A computed `value` that the caller copies back into the graph input `meta`, stored as that
    input is laid out in its storage, strides and element offset (see fx_nodes.written_back);
    eager wrote the input element by element, so they do not overlap. A value already in a graph
    input's memory stays."""
    if isinstance(value, StorageView) and graph.buffers[value.buffer].kind != "computed":
        return value
    if not isinstance(value, (Lazy, StorageView)) or len(value.size) != meta.dim():
        return value
    if any(hint(st) in (0, None) and hint(n) != 1 for n, st in zip(meta.shape, meta.stride(), strict=True)):
        return value  # expanded, or unknown: not memory to write element by element
    like = meta_layout(meta)
    if isinstance(value, StorageView):
        if (value.layout.stride, value.layout.offset) == (like.stride, like.offset):
            return value
        value = value.reread()
    layout = Layout(tuple(value.size), like.stride, like.offset, value.dtype, value.device)
    view = graph.realize_within(value, layout)
    graph.remember(value, view)
    return view


def eager_strided(graph: IRGraph, value: Any, meta: Any) -> Any:
    """A computed output in eager's strides when they are dense, or dense but for stride-0
    dims, and differ from its own."""
    if not isinstance(value, StorageView) or graph.buffers[value.buffer].kind != "computed":
        return value
    if isinstance(meta, torch.Tensor) and meta_layout(meta).stride == value.layout.stride:
        return value
    copy = value.reread()
    layout = eager_layout(value, meta)
    if layout is None:  # an expanded view (a mask over heads) that a backward graph asserts
        return broadcast_like_eager(graph, copy, meta) or value
    return graph.realize(copy, layout)
