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
