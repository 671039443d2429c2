"""Extern calls: an aten op the core does not lower runs as a library call (`ExternNode`).

Arguments become Wrapper IR constants (`Ref` for tensors; argument views are materialised as
named views first); a tuple result is unpacked into one buffer per tensor element. A result whose
strides are not what its fake tensor promised is copied into the promised layout at run time.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree

from polyduct.errors import LoweringError
from polyduct.ir import ExternNode, IRGraph, Layout, Lazy, StorageView, TensorValue
from polyduct.lowering.sizes import meta_layout, realize_like_eager
from polyduct.wrapper.ir import OpRef, Ref
from polyduct.wrapper.library import RESTRIDE


@dataclass(frozen=True)
class ModuleArgument:
    """A submodule of the graph (a higher-order op's subgraph) as a library call's argument:
    bound as a trailing graph input at call time, as tensor constants are."""

    name: str


def is_higher_order(node: torch.fx.Node) -> bool:
    """Whether `node` calls a higher-order op (`torch.cond`, `flex_attention`, ...)."""
    return isinstance(node.target, torch._ops.HigherOrderOperator)


def higher_order_call(
    graph: IRGraph, node: torch.fx.Node, args: Sequence[Any], kwargs: Mapping[str, Any],
    report: Any,
) -> Any:
    """A higher-order op as a library call of the op itself: its subgraphs (`ModuleArgument`s)
    run in eager, unfused."""
    target: Any = node.target
    report.add(str(target), "higher-order op: library call, its subgraphs run in eager")
    return extern_call(graph, node, f"higher_order.{target.name()}", args, kwargs)


def extern_call(
    graph: IRGraph,
    node: torch.fx.Node,
    op: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    effect_only: bool = False,
    layout: Layout | None = None,
    returns: Any = None,
) -> Any:
    """Lower `node` as a library call of aten `op`; returns its result value(s) (none when
    `effect_only`: the call runs for its effect, whatever `node` returns). A tensor result is
    held to `layout` where given, else to its fake tensor's. `returns`: the fake result `op`
    returns, where it is not the node's (a flat tuple for a nested one)."""
    views: list[tuple[str, StorageView]] = []
    fx_args = node.args if len(node.args) == len(args) else (None,) * len(args)
    metas = [_meta(f) for f in fx_args]
    c_args = tuple(
        _constant(graph, a, views, op, node, m) for a, m in zip(args, metas, strict=True)
    )
    c_kwargs = tuple(
        (k, _constant(graph, v, views, op, node, _meta(node.kwargs.get(k))))
        for k, v in kwargs.items()
        if not isinstance(v, (torch.memory_format, torch.layout))  # defaults suit fresh results
    )
    val = None if effect_only else node.meta.get("val") if returns is None else returns
    follows = _laid_out_otherwise(graph, c_args, views) or _strided_otherwise(
        graph, c_args, metas, views
    )
    result = graph.new_name("extern")
    if isinstance(val, torch.Tensor):
        out = graph.add_buffer("extern", layout or meta_layout(val), result)
        graph.nodes.append(
            ExternNode(
                graph.new_name("node"), op, c_args, c_kwargs, result, (out,), False, tuple(views)
            )
        )
        return _restride(graph, StorageView(out, graph.buffers[out].layout), follows)
    if val is None:  # run for its effect only (`aten._assert_async`, say)
        graph.nodes.append(
            ExternNode(
                graph.new_name("node"), op, c_args, c_kwargs, result, (), False, tuple(views)
            )
        )
        return None
    if not isinstance(val, (tuple, list)):
        raise LoweringError(op, node.name, f"extern result {type(val).__name__} is not supported")
    outs: list[str] = []
    values: list[Any] = []
    for item in val:
        if isinstance(item, torch.Tensor):
            name = graph.add_buffer("multi", meta_layout(item))
            outs.append(name)
            values.append(name)
        else:
            outs.append("")
            values.append(None)
    graph.nodes.append(
        ExternNode(
            graph.new_name("node"), op, c_args, c_kwargs, result, tuple(outs), True, tuple(views)
        )
    )
    used = set(range(len(values))) if returns is not None else _used_elements(node, len(values))
    return tuple(
        None
        if v is None
        else StorageView(v, graph.buffers[v].layout)
        if i not in used  # nothing reads it: never copied into its promised layout
        else _restride(graph, StorageView(v, graph.buffers[v].layout), follows)
        for i, v in enumerate(values)
    )


def _used_elements(node: torch.fx.Node, count: int) -> set[int]:
    """Which elements of a tuple result the graph reads (all, unless only `getitem` reads it)."""
    indices = [user.args[1] for user in node.users if user.target is operator.getitem]
    if len(indices) == len(node.users) and all(isinstance(i, int) for i in indices):
        return {i for i in indices if isinstance(i, int)}
    return set(range(count))


def _restride(graph: IRGraph, value: StorageView, follows_arguments: bool) -> StorageView:
    """The extern result `value` held to the strides its fake tensor promised (a run-time check,
    `polyduct::restride`: a copy only where they differ).

    Library kernels do not always return the strides their meta functions report (the CPU
    flash-attention kernel; a convolution follows its input's memory format, which a kernel of
    ours may have laid out otherwise than eager): kernels index by the promised strides, so make
    them true. A contiguous promise is trusted unless an argument is channels-last.
    """
    if not (restrided(value.layout) or follows_arguments):
        return value
    layout = replace(value.layout, offset=sympy.Integer(0))  # a fresh tensor starts its storage
    fixed = graph.add_buffer("extern", layout, graph.new_name("extern"))
    args = (Ref(value.buffer), _sizes(layout.size), _sizes(layout.stride))
    graph.nodes.append(ExternNode(graph.new_name("node"), RESTRIDE, args, (), fixed, (fixed,), False))
    return StorageView(fixed, layout)


def _laid_out_otherwise(graph: IRGraph, args: Sequence[Any], views: Sequence[tuple[str, StorageView]]) -> bool:
    """Whether a tensor argument of an extern call is channels-last (4 or 5 dims, channels
    innermost): torch's convolutions, pools and norms then choose a channels-last result, whatever
    layout the meta function promised (a kernel of ours may lay a value out otherwise than eager)."""
    refs = [a for a in pytree.tree_leaves(list(args)) if isinstance(a, Ref)]
    found = [_argument_layout(graph, views, r) for r in refs]
    return any(lay is not None and _channels_last(lay) for lay in found)


def _argument_layout(
    graph: IRGraph, views: Sequence[tuple[str, StorageView]], arg: Ref
) -> Layout | None:
    """The layout a tensor argument reaches a library call with (a view's, or its buffer's)."""
    for name, view in views:
        if name == arg.name:
            return view.layout
    return getattr(graph.buffers.get(arg.name), "layout", None)


def _strided_otherwise(
    graph: IRGraph, args: Sequence[Any], metas: Sequence[Any], views: Sequence[tuple[str, StorageView]]
) -> bool:
    """Whether a tensor argument reaches the call with other strides than eager's argument had
    (a kernel of ours laid it out otherwise): a view op's result (`view.dtype`) then has other
    strides than its fake tensor promised. `topk` as a sort keeps the whole sorted row, its
    result a slice of it; viewed as another dtype, the rows were read as if packed (fuzz
    triton seed 9402, program 4258)."""
    for arg, meta in zip(args, metas, strict=True):
        if not (isinstance(arg, Ref) and isinstance(meta, torch.Tensor)):
            continue
        layout = _argument_layout(graph, views, arg)
        if layout is None:
            continue
        pairs = zip(layout.size, layout.stride, meta_layout(meta).stride, strict=True)
        if any(size != 1 and ours != theirs for size, ours, theirs in pairs):
            return True
    return False


def _channels_last(layout: Layout) -> bool:
    return (len(layout.size) in (4, 5) and layout.size[1] != 1 and layout.stride[1] == 1
            and not layout.is_contiguous())


def transfer(graph: IRGraph, view: StorageView, device: torch.device) -> StorageView:
    """`view` copied to `device` by a library call (`aten._to_copy`), as a fresh buffer."""
    lay = view.layout
    views: list[tuple[str, StorageView]] = []
    arg = Ref(_materialise(graph, view, views))
    out = graph.add_buffer(
        "extern", Layout(lay.size, lay.stride, sympy.Integer(0), lay.dtype, device.type)
    )
    graph.nodes.append(
        ExternNode(
            graph.new_name("node"), "aten._to_copy.default", (arg,), (("device", device),),
            out, (out,), False, tuple(views),
        )
    )
    return StorageView(out, graph.buffers[out].layout)


def restrided(layout: Layout) -> bool:
    """Whether an extern result of this (promised) layout is copied into it afterwards: the
    library's own result may have other strides, so only the copy is held to the layout.
    Symbolic layouts (`64*s0` strides under dynamic shapes) are held to it as static ones are."""
    return not layout.is_contiguous()


def _sizes(values: Sequence[sympy.Expr]) -> tuple[Any, ...]:
    return tuple(_size(v) for v in values)


def _size(value: sympy.Expr) -> Any:
    if value.is_Integer:
        return int(value)
    return Ref(str(value)) if value.is_Symbol else value


def _meta(arg: Any) -> Any:
    """The fake value of an FX argument (a list of them for a list argument)."""
    if isinstance(arg, torch.fx.Node):
        return arg.meta.get("val")
    if isinstance(arg, (list, tuple)):
        return [_meta(a) for a in arg]
    return None


def _constant(
    graph: IRGraph,
    value: Any,
    views: list[tuple[str, StorageView]],
    op: str,
    node: torch.fx.Node,
    meta: Any = None,
) -> Any:
    if isinstance(value, (StorageView, Lazy)):
        return Ref(_materialise(graph, value, views, meta))
    if isinstance(value, (list, tuple)):
        metas = meta if isinstance(meta, list) and len(meta) == len(value) else [None] * len(value)
        return tuple(
            _constant(graph, v, views, op, node, m) for v, m in zip(value, metas, strict=True)
        )
    if isinstance(value, sympy.Expr):
        if value.is_Integer:
            return int(value)
        return _size(value)
    if isinstance(value, sympy.logic.boolalg.Boolean):  # a condition on sizes (see size_value)
        return bool(value) if value in (sympy.true, sympy.false) else value
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return value
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _constant(graph, v, views, op, node) for k, v in value.items()}
    if isinstance(value, torch.device):
        return value
    if isinstance(value, torch._ops.OpOverload):
        return OpRef(str(value))
    if isinstance(value, ModuleArgument):
        return Ref(value.name)
    raise LoweringError(op, node.name, f"argument {value!r} cannot be passed to an extern call")


def _materialise(
    graph: IRGraph, value: TensorValue, views: list[tuple[str, StorageView]], meta: Any = None
) -> str:
    """A library call's tensor argument in memory: a lazy value is computed with the strides
    eager's argument has (the call may choose its result's layout from them)."""
    view = realize_like_eager(graph, value, meta)
    info = graph.buffers[view.buffer]
    if view.layout == info.layout and (info.kind == "computed" or 1 not in view.layout.size):
        return view.buffer
    # a tensor polyduct did not allocate (a graph input, a library call's result) may have
    # other strides along its size-1 dims than the IR's: input asserts ignore them, since they
    # address nothing, but a library call may choose its algorithm and its result's layout
    # from them (a convolution weight of strides (4, 1, 1) is taken for channels-last)
    name = graph.new_name("view")
    views.append((name, view))
    return name
