"""Eager's refusal of in-place writes that partly overlap what they read, kept under torch.compile.

Eager raises when an in-place op (`a[1:].add_(a[:-1])`, `a.copy_(a.t())`) writes a tensor that
shares some, but not all, of its memory with one it reads: the result would depend on the order in
which elements are written. Functionalization turns such a write into an out-of-place op and a
copy, which computes *something*, only not what any eager run could. `check_overlapping_writes`
looks at the Dynamo graph's example values (fake tensors that keep views' storage, offset and
strides) and raises eager's error instead. The rule is ATen's `get_overlap_status`: the same
storage with the same offset, sizes and strides is a full overlap (allowed, `a.add_(a)`); otherwise
intersecting byte ranges are a partial overlap (refused).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from polyduct.errors import OverlappingWrite

_AUGMENTED = frozenset(
    {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
     operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
     operator.ilshift, operator.irshift}
)  # fmt: skip


def check_overlapping_writes(gm: torch.fx.GraphModule) -> None:
    """Raise `OverlappingWrite` for the first in-place op of `gm` eager would refuse."""
    for node in gm.graph.nodes:
        op = _in_place_name(node)
        if op is None or not node.args:
            continue
        written = _value(node.args[0])
        if written is None:
            continue
        reads = [*node.args[1:], *node.kwargs.values()]
        for arg in torch.fx.node.map_aggregate(reads, _value_or_none):
            if isinstance(arg, torch.Tensor) and _partial_overlap(written, arg):
                raise OverlappingWrite(op, node.name)


def _in_place_name(node: torch.fx.Node) -> str | None:
    if node.op == "call_method" and isinstance(node.target, str):
        name = node.target
    elif node.op == "call_function" and node.target in _AUGMENTED:
        return getattr(node.target, "__name__", "augmented assignment")
    elif node.op == "call_function" and node.target in (operator.and_, operator.or_):
        return None  # `a | b`, `a & b`: Python's operators, not torch's in-place or_ / and_
    elif node.op == "call_function":
        name = getattr(node.target, "__name__", "")
    else:
        return None
    return name if name.endswith("_") and not name.startswith("_") else None


def _value(arg: Any) -> torch.Tensor | None:
    val = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _value_or_none(arg: Any) -> Any:
    return _value(arg)


def _partial_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    layout_a, layout_b = _layout(a), _layout(b)
    if layout_a is None or layout_b is None:
        return False  # symbolic sizes: no static answer, eager's own check runs on its inputs
    if a.untyped_storage()._cdata != b.untyped_storage()._cdata or 0 in (a.numel(), b.numel()):
        return False
    if layout_a == layout_b:
        return False  # full overlap: every element reads and writes itself
    (start_a, end_a), (start_b, end_b) = _bytes(a, layout_a), _bytes(b, layout_b)
    return start_a < end_b and start_b < end_a


def _layout(t: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    values = (*t.shape, *t.stride(), t.storage_offset())
    if not all(isinstance(v, int) for v in values):
        return None
    return tuple(t.shape), tuple(t.stride()), int(t.storage_offset())


def _bytes(
    t: torch.Tensor, layout: tuple[tuple[int, ...], tuple[int, ...], int]
) -> tuple[int, int]:
    sizes, strides, offset = layout
    last = sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
    size = t.element_size()
    return offset * size, (offset + last + 1) * size
