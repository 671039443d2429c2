"""Channels-last layout for CPU convolutions: which values of a graph are stored channels-last.

oneDNN, which runs torch's CPU convolutions, computes in channels-last (NHWC) order: given NCHW
activations and weights it reorders both on every call (MobileViT's convolutions in eager: 3.1 ms
per forward from NCHW, 2.1 ms channels-last, 2 threads). So a CPU convolution whose input a
kernel of ours computes anyway gets that input computed channels-last, its weight copied
channels-last (a kernel per call; 1x1 and depthwise weights already are), and returns a
channels-last result; the pointwise values computed from such a result (a norm, an activation, a
residual sum) are stored channels-last too, so the next convolution's input costs no
transposition. A graph applies the plan only where the weights to copy are few next to the
activations (`WEIGHT_COPY_SHARE`); the `conv_layout` option can ask for the layout wherever it
is allowed (`channels_last`) or nowhere (`eager`).

A value the graph returns keeps eager's strides (a backward graph asserts those of the
activations it saved), so a convolution whose input or result is returned is left as it is: in a
training graph most are, and the plan then changes little.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch
import torch.fx

from polyduct.ir import IRGraph, Layout, Lazy, StorageView
from polyduct.lowering.externs import extern_call
from polyduct.lowering.fx_nodes import reads_through
from polyduct.lowering.sizes import hint, meta_layout, sym_expr

CONVOLUTION = torch.ops.aten.convolution.default
_DTYPES = (torch.float32, torch.bfloat16)


def channels_last_plan(gm: torch.fx.GraphModule, mode: str = "auto") -> frozenset[torch.fx.Node]:
    """The FX nodes whose values are stored channels-last: the convolutions that run so (see
    the module docstring), the values their input is computed from, and the pointwise values
    computed from a channels-last value of their own shape; never a returned value. `mode` is
    the `conv_layout` option: `auto` applies the cost rule, `channels_last` does not, `eager`
    plans nothing."""
    if mode == "eager" or not torch.backends.mkldnn.is_available():
        return frozenset()
    returned = _returned(gm)
    convolutions = {
        n
        for n in gm.graph.nodes
        if n.target is CONVOLUTION and n not in returned and _channels_last_convolution(n, returned)
    }
    if not convolutions or (mode == "auto" and not _pays(convolutions)):
        return frozenset()
    plan: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or node in returned:
            continue
        if node in convolutions:
            plan.add(node)
            source = node.args[0]
            if isinstance(source, torch.fx.Node) and source.op == "call_function":
                plan.add(source)
        elif _pointwise(node) and _follows(node, plan):
            plan.add(node)
    return frozenset(plan)


WEIGHT_COPY_SHARE = 0.5
"""Most weight elements copied channels-last per call, as a share of the elements the
convolutions read and write, for the plan to apply. Measured per forward, 2 threads, each graph
against itself without the plan in one process: MobileViT copies 0.15 weight elements per
activation element (its 1x1 and depthwise weights need no copy) and its convolutions take 2.35
instead of 3.17 ms; MobileNetV2, EfficientNet, RegNet and SegFormer (0.001 to 0.07) save 14-30%
of the forward. ResNet's 3x3 weights are 3.3 per activation element: copying them took 480 us,
its convolutions saved 50."""


def _pays(convolutions: set[torch.fx.Node]) -> bool:
    """Whether the weights to copy are few next to the activations (`WEIGHT_COPY_SHARE`)."""
    copied = activations = 0
    for node in convolutions:
        source, weight, out = (_val(a) for a in (node.args[0], node.args[1], node))
        activations += _numel(source) + _numel(out)
        if not is_channels_last(meta_layout(weight)):  # 1x1 and depthwise weights are
            copied += _numel(weight)
    return copied <= WEIGHT_COPY_SHARE * activations


def _channels_last_convolution(node: torch.fx.Node, returned: set[torch.fx.Node]) -> bool:
    source, weight = node.args[0], node.args[1]
    if not (isinstance(source, torch.fx.Node) and isinstance(weight, torch.fx.Node)):
        return False
    val, out = source.meta.get("val"), node.meta.get("val")
    transposed = len(node.args) > 6 and bool(node.args[6])
    return (
        isinstance(val, torch.Tensor)
        and isinstance(out, torch.Tensor)
        and val.device.type == "cpu"
        and val.dtype in _DTYPES
        and val.dim() == 4
        and not transposed
        and hint(val.shape[1]) != 1
        and hint(out.shape[1]) != 1
        and source not in returned
        # a graph input is copied channels-last only for a convolution that reads each element
        # more than once: a 4x4 patch embedding (stride 4) of 32x32 took 88 us as it is, 96
        # with the copies; the small CNN's 3x3 first convolution (stride 1) makes its forward
        # 8% faster copied (0.404 to 0.373 ms, 2 threads, one process)
        and (source.op != "placeholder" or _input_copy_pays(node))
    )


def _input_copy_pays(node: torch.fx.Node) -> bool:
    """Whether a convolution reads each input element more than once (its window is larger
    than its stride), so that a channels-last copy of its graph input pays."""
    weight: Any = node.args[1]
    stride: Any = node.args[3] if len(node.args) > 3 else (1, 1)
    window = [hint(s) for s in _val(weight).shape[2:]]
    return any(w is None or w > s for w, s in zip(window, stride, strict=False))


def _pointwise(node: torch.fx.Node) -> bool:
    """An elementwise op (torch's `pointwise` tag), other than `clone`: `x.contiguous()` asks
    for row-major memory."""
    tags = getattr(node.target, "tags", ())
    return torch.Tag.pointwise in tags and node.target is not torch.ops.aten.clone.default


def _follows(node: torch.fx.Node, plan: set[torch.fx.Node]) -> bool:
    """Whether a pointwise `node` reads a channels-last value of its own (4-d, CPU) shape."""
    val = node.meta.get("val")
    if not (isinstance(val, torch.Tensor) and val.dim() == 4 and val.device.type == "cpu"):
        return False
    for arg in node.all_input_nodes:
        meta = arg.meta.get("val")
        if arg in plan and isinstance(meta, torch.Tensor) and meta.shape == val.shape:
            return True
    return False


def _returned(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The graph's outputs and every node they view (their strides are eager's)."""
    found: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op != "output":
            continue
        stack = list(node.all_input_nodes)
        while stack:
            item = stack.pop()
            if item in found:
                continue
            found.add(item)
            if reads_through(item) and isinstance(item.args[0], torch.fx.Node):
                stack.append(item.args[0])
    return found


def _val(node: Any) -> torch.Tensor:
    val = node.meta["val"]
    assert isinstance(val, torch.Tensor)
    return val


def _numel(val: torch.Tensor) -> int:
    total = 1
    for n in val.shape:
        total *= hint(n) or 1
    return total


def channels_last(size: Sequence[sympy.Expr], dtype: torch.dtype, device: str) -> Layout:
    """A fresh channels-last layout of a 4-d size (N, C, H, W): strides (HWC, 1, WC, C)."""
    n, c, h, w = (sympy.sympify(s) for s in size)
    stride = (h * w * c, sympy.Integer(1), w * c, c)
    return Layout((n, c, h, w), stride, sympy.Integer(0), dtype, device)


def is_channels_last(layout: Layout) -> bool:
    """Whether a 4-d layout is channels-last dense (any size-1 dim's stride aside)."""
    if len(layout.size) != 4:
        return False
    want = channels_last(layout.size, layout.dtype, layout.device).stride
    pairs = zip(layout.size, layout.stride, want, strict=True)
    return layout.offset == 0 and all(n == 1 or a == b for n, a, b in pairs)


def realize_planned(
    graph: IRGraph, value: Lazy, node: Any, plan: frozenset[torch.fx.Node]
) -> StorageView:
    """`value` (of FX `node`) computed into memory: channels-last where the plan stores `node`
    so (a pooled norm and activation after a channels-last convolution), else row-major."""
    if node in plan and len(value.size) == 4:
        return graph.realize(value, channels_last(value.size, value.dtype, value.device))
    return graph.realize(value)


def channels_last_convolution(
    graph: IRGraph, node: torch.fx.Node, args: Sequence[Any], kwargs: dict[str, Any]
) -> StorageView:
    """A convolution of the plan as a library call on a channels-last input (computed so, where
    a kernel computes it) and weight (copied so, unless it is already), with a channels-last
    result."""
    source, weight, *rest = args
    if isinstance(source, Lazy):
        source = graph.realize(source, channels_last(source.size, source.dtype, source.device))
    elif not is_channels_last(source.layout):  # a graph input (`_channels_last_convolution`)
        source = graph.realize_as(
            source.reread(), channels_last(source.size, source.dtype, source.device)
        )
    lay = channels_last(weight.size, weight.dtype, weight.device)
    if isinstance(weight, Lazy):
        weight = graph.realize(weight, lay)
    elif not is_channels_last(weight.layout):
        weight = graph.realize_as(weight.reread(), lay)
    out = node.meta["val"]
    result = channels_last(tuple(sym_expr(s) for s in out.shape), out.dtype, source.device)
    value = extern_call(
        graph, node, str(node.target), (source, weight, *rest), kwargs, layout=result
    )
    assert isinstance(value, StorageView)
    return value
