"""Where a graph's values live: its accelerator, and what to do with CPU scalar tensors in it.

Eager reads a CPU scalar (0-d) tensor as a scalar in accelerator ops; a kernel cannot load CPU
memory, so the lowering computes such values on the accelerator (`moved_scalars`). Dtypes no
kernel backend computes (complex) run as library calls (`library_only_dtype`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx


def library_only_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """A dtype the op reads or makes that no kernel backend computes (complex), if any."""
    vals = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    for val in torch.utils._pytree.tree_leaves(vals):
        if isinstance(val, torch.Tensor) and val.dtype.is_complex:
            return val.dtype
    return None


def accelerator(gm: torch.fx.GraphModule) -> torch.device | None:
    """The non-CPU device of the graph's tensor inputs, if any."""
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type != "cpu":
            return val.device
    return None


def moved_scalars(gm: torch.fx.GraphModule, accelerator: torch.device | None) -> set[Any]:
    """Nodes of an accelerator graph whose CPU scalar (0-d) results are computed on the
    accelerator: eager reads a CPU scalar tensor as a scalar in accelerator ops (a float module
    attribute arrives as one under dynamic shapes), where a kernel cannot load CPU memory. Scalar
    inputs are copied over once per call; what is computed from them and other moved scalars
    only stays there; an explicit transfer (`.cpu()`) and what reads it stay on the CPU. A moved
    value that is a graph output is copied back."""
    moved: set[Any] = set()
    if accelerator is None:
        return moved
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if not (isinstance(val, torch.Tensor) and val.dim() == 0 and val.device.type == "cpu"):
            continue
        inputs = [n for n in node.all_input_nodes if on_cpu(n)]
        explicit = node.kwargs.get("device") is not None and node.all_input_nodes
        if node.op in ("placeholder", "get_attr") or (
            not explicit and all(n in moved for n in inputs)
        ):
            moved.add(node)
    return moved


def on_cpu(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.device.type == "cpu"
