"""Facts about aten FX nodes read from their op schemas: views, in-place writes, aliased outputs."""

from __future__ import annotations

import operator

import torch
import torch.fx


def mutates(node: torch.fx.Node) -> bool:
    """Whether `node` is an in-place aten op (it writes one of its arguments)."""
    schema = getattr(node.target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def is_view(node: torch.fx.Node) -> bool:
    """Whether `node` returns a view of its first argument (an aliasing, non-mutating aten op)."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    if node.target is operator.getitem:
        return is_view(node.args[0])
    schema = getattr(node.target, "_schema", None)
    if schema is None or schema.is_mutable or not schema.returns:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write


# ops whose schemas return new tensors that the lowering still makes views when it can
_RESHAPES = (torch.ops.aten.reshape.default, torch.ops.aten._unsafe_view.default)


def reads_through(node: torch.fx.Node) -> bool:
    """Whether `node` only re-indexes its first argument (a view, or a reshape the lowering makes
    one): no kernel, so whoever reads `node` reads its argument."""
    return node.target in _RESHAPES or is_view(node)


WRITTEN_BACK = "polyduct_written_back"
"""`GraphModule.meta` key: {output position: input position} of the outputs the caller copies
into graph inputs after the call (AOTAutograd's in-place writes of the program)."""


def written_back(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.Tensor]:
    """The node computing each output that is copied back into a graph input, mapped to that
    input's fake tensor. AOTAutograd rebuilds an output that views such an input (`x.expand(..)`
    after `x.fill_`) by laying the view's strides, read from the runtime output, over the input:
    the output must be stored with the input's strides for that to read the right elements."""
    pairs = gm.meta.get(WRITTEN_BACK) or {}
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    outs = [n for n in gm.graph.nodes if n.op == "output"]
    results = outs[0].args[0] if outs and isinstance(outs[0].args[0], (list, tuple)) else ()
    found: dict[torch.fx.Node, torch.Tensor] = {}
    for out, place in pairs.items():
        if out >= len(results) or place >= len(places):
            continue
        node, meta = results[out], places[place].meta.get("val")
        got = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if (
            isinstance(meta, torch.Tensor)
            and isinstance(got, torch.Tensor)
            and got.dtype == meta.dtype
            and list(map(str, got.shape)) == list(map(str, meta.shape))  # no guard on sizes
        ):
            found[node] = meta
    return found


def shared_alias_bases(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """Nodes that two or more graph outputs are (views of): eager returns aliases of one tensor."""
    outputs = [n for n in gm.graph.nodes if n.op == "output"]
    if not outputs or not isinstance(outputs[0].args[0], (list, tuple)):
        return set()
    count: dict[torch.fx.Node, int] = {}
    for out in outputs[0].args[0]:
        if not isinstance(out, torch.fx.Node):
            continue
        while is_view(out):
            out = out.args[0]
        count[out] = count.get(out, 0) + 1
    return {node for node, n in count.items() if n > 1}
