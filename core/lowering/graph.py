"""Lowering: an aten FX graph -> `polyduct.ir.IRGraph`, one lowering function per aten overload.

A lowering is a named function `fn(ctx, *args, **kwargs) -> value` where tensor arguments arrive as
`polyduct.ir` tensor values, sizes as sympy expressions and everything else as is. A lowering that
cannot handle its arguments raises `Fallback`; an op with no lowering (or one that falls back)
becomes an extern call of the aten op, recorded in the graph's `FallbackReport`. A scoped
override (`polyduct.overrides`) may replace an op's lowering, make it an extern call, keep it out of
fusion (`barriers`) or tag what it computes with its name (`ORIGINS`, for kernel backend choice).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from polyduct.errors import LoweringError
from polyduct.handlers.count import OpCounter
from polyduct.indexing import index_vars
from polyduct.ir import ComputeNode, IRGraph, Layout, Lazy, StorageView
from polyduct.lowering import externs, layouts
from polyduct.lowering.devices import accelerator, library_only_dtype, moved_scalars
from polyduct.lowering.externs import ModuleArgument, extern_call, transfer
from polyduct.lowering.fx_nodes import (
    is_view,
    mutates,
    reads_through,
    shared_alias_bases,
    written_back,
)
from polyduct.lowering.output_views import eager_strided, overlapping_view, stored_like_input
from polyduct.lowering.precision import round_result
from polyduct.lowering.sizes import meta_layout, realize_like_eager, size_value, sym_expr
from polyduct.overrides import OpOverride, Resolver
from polyduct.overrides import extern_op as scoped_extern

LoweringFn = Callable[..., Any]


class Fallback(Exception):
    """Raised by a lowering that does not handle these arguments; the op becomes an extern call."""


@dataclass
class FallbackReport:
    """Which aten ops ran as extern calls, and why (no lowering, or the lowering's reason)."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # kernels run on another kernel backend

    def add(self, op: str, reason: str) -> None:
        self.entries.append((op, reason))

    def add_kernel(self, kernel: str, backend: str, ops: list[str], fallback: str) -> None:
        """Kernel `kernel` runs on `fallback`: `backend` declares `ops` unsupported."""
        self.kernels.append(
            f"kernel {kernel}: {backend} declares {', '.join(ops)} unsupported; ran on {fallback}"
        )

    def ops(self) -> list[str]:
        """Distinct fallback op names, sorted."""
        return sorted({op for op, _ in self.entries})

    def __str__(self) -> str:
        lines = [f"{op}: {why}" for op, why in self.entries] + self.kernels
        return "\n".join(lines) or "no fallbacks"


def op_name(target: Any) -> str:
    """Qualified overload name such as `aten.add.Tensor`.

    Not cached by target: on the 1000-add graph most lookups missed (distinct target objects
    with one hash, apparently one per node), and the dict degraded to a linear scan.
    """
    return str(target)


@dataclass
class LoweringContext:
    """What a lowering may use: the graph being built and the FX node's output metadata."""

    graph: IRGraph
    node: torch.fx.Node
    seeds: list[str]
    report: FallbackReport = field(default_factory=FallbackReport)
    sort_limits: Mapping[str, int] = field(default_factory=dict)  # the kernel backend's caps
    # where this node's CPU scalar result is computed, when not on the CPU (see `devices.moved_scalars`)
    scalar_device: torch.device | None = None
    channels_last: frozenset[torch.fx.Node] = frozenset()  # the layout plan (lowering.layouts)

    @property
    def meta(self) -> Any:
        return self.node.meta.get("val")

    def out_size(self, i: int | None = None) -> tuple[sympy.Expr, ...]:
        val = self.meta if i is None else self.meta[i]
        return tuple(sym_expr(s) for s in val.shape)

    def out_dtype(self, i: int | None = None) -> torch.dtype:
        val = self.meta if i is None else self.meta[i]
        return val.dtype  # type: ignore[no-any-return]

    @property
    def device(self) -> str:
        val = self.meta
        while isinstance(val, (tuple, list)):
            val = val[0]
        if not isinstance(val, torch.Tensor):
            return "cpu"
        if val.dim() == 0 and val.device.type == "cpu" and self.scalar_device is not None:
            return self.scalar_device.type
        return val.device.type

    def extern(self, op: str, args: Any, why: str) -> Any:
        """A library call of aten `op` for part of this node (the node's result metadata),
        recorded in the fallback report."""
        self.report.add(op, why)
        return extern_call(self.graph, self.node, op, args, {})

    def seed_index(self) -> int:
        """A fresh per-graph RNG seed slot (the wrapper fills the seed buffer, see lowerings)."""
        self.seeds.append(self.node.name)
        return len(self.seeds) - 1


LIBRARY_OPERANDS = frozenset({"aten.addmm.default"})
"""Ops with a lowering that still hands their tensor operands to a library call (`addmm`'s
product is `mm`), so those operands are read from memory, like an extern call's."""

REALIZE_READS = 4
"""A value read by several users is computed once into memory when computing it reads more
buffers than this: a residual stream `h + attn(h) + mlp(...)` inlined into every later layer's
norm would re-read every earlier layer's outputs per element."""

INLINE_BUDGET = 64
"""Largest inlined expression (in ops) a lazy value may carry before it is computed into a buffer."""


class GraphLowering:
    """Walks an aten FX graph in order, lowering each node or falling back to an extern call."""

    def __init__(
        self,
        lowerings: Mapping[str, LoweringFn],
        realize_cost: int = 24,
        resolver: Resolver | None = None,
        sort_limits: Mapping[str, int] | None = None,
        conv_layout: str = "auto",
    ) -> None:
        self.lowerings = lowerings
        self.sort_limits = sort_limits or {}
        self.resolver = resolver if resolver is not None else Resolver(())
        self.barriers: list[tuple[int, int]] = []  # node index ranges no kernel fuses across
        self._barrier_label = ""
        self.realize_cost = realize_cost
        self.conv_layout = conv_layout  # see lowering.layouts
        self.int_inputs: dict[str, Any] = {}
        self.graph = IRGraph()
        self.report = FallbackReport()
        self.seeds: list[str] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.input_names: list[str] = []
        self.attrs: dict[str, torch.Tensor | torch.nn.Module] = {}  # constants: trailing inputs
        self.accelerator: torch.device | None = None
        self.moved: set[torch.fx.Node] = set()
        self.written_back: dict[torch.fx.Node, torch.Tensor] = {}
        self.channels_last: frozenset[torch.fx.Node] = frozenset()  # see lowering.layouts

    def run(self, gm: torch.fx.GraphModule) -> IRGraph:
        self.module = gm
        self.accelerator = accelerator(gm)
        self.moved = moved_scalars(gm, self.accelerator)
        shared = shared_alias_bases(gm)
        self.written_back = written_back(gm)
        self.channels_last = layouts.channels_last_plan(gm, self.conv_layout)
        for node in gm.graph.nodes:
            value = self._lower_node(node)
            if node in self.written_back:
                value = stored_like_input(self.graph, value, self.written_back[node])
            # several outputs view this value: compute it once so they alias one buffer, as in eager
            if node in shared and isinstance(value, Lazy):
                value = self._output(value, self._stored_meta(node))
            # a costly value read by several users is computed once instead of re-inlined; so is
            # one a library call reads anyway: its other users read that memory, not recompute
            if (
                isinstance(value, Lazy)
                and len(node.users) > 1
                and (
                    value.cost > self.realize_cost
                    or _reads(value) > REALIZE_READS
                    or self._read_from_memory(node, outputs=False)
                )
            ):
                value = self._stored(node, value)
            # a long chain is cut into pointwise nodes (which the scheduler fuses again): inlining
            # loaders nests one Python call per op, and deep nesting overflows the stack (issue 4)
            if isinstance(value, Lazy) and value.cost > INLINE_BUDGET:
                value = self._stored(node, value)
            self.env[node] = value
        self.graph.inputs.extend(self.attrs)
        return self.graph

    def _stored(self, node: torch.fx.Node, value: Lazy) -> StorageView:
        """`value` computed into memory: with eager's strides where memory is what a reader
        gets (a library call, the graph's output: backward asserts saved tensors' strides),
        else row-major, the order its pointwise readers index it in (T5's position bias, a
        permuted view read by every layer, was stored permuted and read through a transpose);
        channels-last where the layout plan says so (`polyduct.lowering.layouts`)."""
        if node in self.channels_last and len(value.size) == 4:
            return self.graph.realize(value, layouts.channels_last(value.size, value.dtype, value.device))
        if self._read_from_memory(node):
            return realize_like_eager(self.graph, value, self._stored_meta(node))
        return self.graph.realize(value)

    def _stored_meta(self, node: torch.fx.Node) -> Any:
        """The fake tensor whose strides `node`'s value gets in memory: its own, or those of the
        graph input it is copied back into (see fx_nodes.written_back)."""
        return self.written_back.get(node, node.meta.get("val"))

    def _output_meta(self, out: Any) -> Any:
        """The fake tensor whose strides the graph output `out` gets; None (the value as it is)
        for a view of a value copied back into an input: AOTAutograd lays that view's strides
        over the input, so they must stay those of a view of the same memory."""
        if not isinstance(out, torch.fx.Node):
            return None
        base: Any = out
        while is_view(base):
            base = base.args[0]
        if base is not out and base in self.written_back:
            return None
        return self._stored_meta(out)

    def _read_from_memory(self, node: torch.fx.Node, outputs: bool = True) -> bool:
        """Whether a user of `node`, seen through views, reads it from memory: an op with no
        lowering (an extern call: `h` of `x + h` read by `addmm(b, h.view(-1, d), w)`), or,
        with `outputs`, the graph's output."""
        stack, seen = list(node.users), set()
        while stack:
            user = stack.pop()
            if user.op == "output" and outputs:
                return True
            if user in seen or user.op != "call_function":
                continue
            seen.add(user)
            if user.target is operator.getitem or reads_through(user):
                stack.extend(user.users)
            elif (
                op_name(user.target) in LIBRARY_OPERANDS
                or op_name(user.target) not in self.lowerings
            ):
                return True
        return False

    def _get_attr(self, node: torch.fx.Node) -> Any:
        """A tensor constant or a submodule (a subgraph): a trailing input bound at call time."""
        value = self.module
        for part in str(node.target).split("."):
            value = getattr(value, part)
        if isinstance(value, torch.nn.Module):
            name = f"subgraph_{len(self.attrs)}"
            self.attrs[name] = value
            return ModuleArgument(name)
        if not isinstance(value, torch.Tensor):
            raise LoweringError("get_attr", node.name, f"constant {type(value).__name__}")
        device = None
        if value.dim() == 0 and value.device.type == "cpu":
            device = self.accelerator
        if device is not None:
            # a CPU scalar (`x[0] = 7.0` on a CUDA x) acts as a scalar in eager: the kernels
            # reading it run on the graph's device, so it is bound there once, at compile time
            # (outside the compile's fake mode: the bound value is a real tensor)
            with unset_fake_temporarily():
                value = value.to(device)
        name = f"const_{len(self.attrs)}"
        self.attrs[name] = value
        layout = Layout(
            tuple(sympy.Integer(s) for s in value.shape),
            tuple(sympy.Integer(s) for s in value.stride()),
            sympy.Integer(0),
            value.dtype,
            value.device.type,
        )
        self.graph.add_buffer("input", layout, name)
        return StorageView(name, layout)

    def _lower_node(self, node: torch.fx.Node) -> Any:
        if node.op == "placeholder":
            return self._placeholder(node)
        if node.op == "output":
            outs = node.args[0]
            if not isinstance(outs, (list, tuple)):
                raise LoweringError("output", node.name, f"graph output {outs!r} is not a sequence")
            values = [
                overlapping_view(self, a) or v for a, v in zip(outs, self._args(outs), strict=True)
            ]
            metas = [self._output_meta(a) for a in outs]
            self.graph.outputs = [self._output(v, m) for v, m in zip(values, metas, strict=True)]
            return None
        if node.op == "get_attr":
            return self._get_attr(node)
        if node.op != "call_function":
            raise LoweringError(str(node.target), node.name, f"unsupported FX node op {node.op}")
        if node.target is operator.getitem:
            seq, index = self._args(node.args)
            return seq[index]
        size = size_value(node)
        if size is not None:  # size arithmetic (sym_size, operator.sub, ...): known symbolically
            return size
        if mutates(node):
            self._realize_live(node)
        return self._call(node)

    def _realize_live(self, node: torch.fx.Node) -> None:
        """Compute pending lazy values before `node` writes a buffer they may read."""
        for prior, value in list(self.env.items()):
            if isinstance(value, Lazy) and any(u not in self.env for u in prior.users):
                self.env[prior] = self.graph.realize(value)

    def _placeholder(self, node: torch.fx.Node) -> Any:
        name = f"arg_{len(self.input_names)}"
        self.input_names.append(name)
        self.graph.inputs.append(name)
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            layout = meta_layout(val)
            layout = Layout(layout.size, layout.stride, sympy.Integer(0), val.dtype, layout.device)
            self.graph.add_buffer("input", layout, name)
            view = StorageView(name, layout)
            if node in self.moved and self.accelerator is not None:
                return transfer(self.graph, view, self.accelerator)  # see devices.moved_scalars
            return view
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            self.int_inputs[name] = sym_expr(val)
            return sym_expr(val)
        self.int_inputs[name] = val  # a value the program was specialised to (a bool, a float)
        return val

    def _output(self, value: Any, meta: Any) -> Any:
        """A graph output in memory with eager's strides (gaps and stride-0 dims included):
        backward graphs assert the strides their saved tensors were traced with."""
        if isinstance(value, Lazy):
            stored = realize_like_eager(self.graph, value, meta)
        else:
            stored = eager_strided(self.graph, value, meta)
        if (
            isinstance(stored, StorageView)
            and isinstance(meta, torch.Tensor)
            and meta.device.type != stored.layout.device
        ):
            return transfer(self.graph, stored, meta.device)  # see devices.moved_scalars
        return stored

    def _args(self, tree: Any) -> Any:
        return torch.fx.node.map_arg(tree, self.env.__getitem__)

    def _call(self, node: torch.fx.Node) -> Any:
        name = label = op_name(node.target)
        override = self.resolver.for_aten(name)
        if override is None and _origin(node) != name:
            label = _origin(node)
            override = self.resolver.for_aten(label)
        if override is not None:
            return self._override(node, name, label, override)
        args = _convert(self._args(node.args))
        kwargs = _convert(self._args(node.kwargs))
        if externs.is_higher_order(node) and name not in self.lowerings:
            return externs.higher_order_call(self.graph, node, args, kwargs, self.report)
        convolution = node.target is layouts.CONVOLUTION and name not in self.lowerings
        if convolution and node in self.channels_last:
            self.report.add(name, "no lowering (a library call on channels-last values)")
            return layouts.channels_last_convolution(self.graph, node, args, kwargs)
        return self._lower(node, name, args, kwargs, self.lowerings.get(name))

    def _lower(
        self,
        node: torch.fx.Node,
        name: str,
        args: Any,
        kwargs: Any,
        fn: LoweringFn | None,
    ) -> Any:
        if fn is None:
            self.report.add(name, "no lowering")
        elif (odd := library_only_dtype(node)) is not None:
            self.report.add(name, f"{odd} values: no kernel backend computes them; library call")
        else:
            moved = self.accelerator if node in self.moved else None
            ctx = LoweringContext(self.graph, node, self.seeds, self.report, self.sort_limits,
                                  moved, self.channels_last)
            try:
                return round_result(fn(ctx, *args, **kwargs), node, name)
            except Fallback as why:
                self.report.add(name, str(why) or "lowering declined")
        return extern_call(self.graph, node, name, args, kwargs)

    def _override(self, node: torch.fx.Node, name: str, label: str, override: OpOverride) -> Any:
        """Lower one op as a scoped override says (docs/overrides.md).

        `label` is the op the override matched: the node's own, or the op it was decomposed from
        (`original_aten`), whose pieces then count as one op for fusion and kernel choice.
        """
        if not override.fuse:  # realise what comes from outside this op
            for arg in node.all_input_nodes:
                if _origin(arg) != label:
                    self.env[arg] = self._realized(self.env[arg])
        args = _convert(self._args(node.args))
        kwargs = _convert(self._args(node.kwargs))
        start = len(self.graph.nodes)
        if override.extern is not False:
            op = name if override.extern is True else scoped_extern(name, override.extern)
            self.report.add(name, f"override: extern call of {op}")
            result = extern_call(self.graph, node, op, args, kwargs)
        else:
            fn = override.lowering or self.lowerings.get(name)
            result = self._lower(node, name, args, kwargs, fn)
        if not override.fuse:
            if any(_origin(user) != label for user in node.users):
                result = self._realized(result)
            self._barrier(label, start)
        if override.kernels is not None:
            result = self._tag(result, label, start)
        return result

    def _barrier(self, label: str, start: int) -> None:
        end = len(self.graph.nodes)
        if self.barriers and self._barrier_label == label and self.barriers[-1][1] == start:
            start = self.barriers.pop()[0]  # the next piece of the same decomposed op
        self.barriers.append((start, end))
        self._barrier_label = label

    def _realized(self, tree: Any) -> Any:
        if isinstance(tree, Lazy):
            return self.graph.realize(tree)
        if isinstance(tree, (list, tuple)):
            return type(tree)(self._realized(v) for v in tree)
        if isinstance(tree, dict):
            return {k: self._realized(v) for k, v in tree.items()}
        return tree

    def _tag(self, result: Any, op: str, start: int) -> Any:
        """Mark what `op` produced, so kernels computing it know their origin (`ORIGINS`)."""
        for item in self.graph.nodes[start:]:
            if isinstance(item, ComputeNode):
                item.body = _tagged(item.body, op)
        return _tag_lazy(result, op)


ORIGINS: ContextVar[set[str] | None] = ContextVar("polyduct_origins", default=None)
"""While set, bodies and lazy values of overridden ops add their aten op name to it."""


def _origin(node: torch.fx.Node) -> str:
    """The aten op a node came from: the op it was decomposed from, else its own."""
    original = node.meta.get("original_aten")
    return op_name(original if original is not None else node.target)


def _tagged(fn: Callable[..., Any], op: str) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        seen = ORIGINS.get()
        if seen is not None:
            seen.add(op)
        return fn(*args)

    return run


def _tag_lazy(value: Any, op: str) -> Any:
    if isinstance(value, Lazy):
        return replace(value, fn=_tagged(value.fn, op))
    if isinstance(value, (list, tuple)):
        return type(value)(_tag_lazy(v, op) for v in value)
    return value


def _convert(tree: Any) -> Any:
    if isinstance(tree, (list, tuple)):
        return type(tree)([_convert(v) for v in tree])
    if isinstance(tree, dict):
        return {k: _convert(v) for k, v in tree.items()}
    if isinstance(tree, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return sym_expr(tree) if isinstance(tree, torch.SymInt) else tree
    return tree


def _reads(value: Lazy) -> int:
    """How many buffer loads computing one element of `value` makes."""
    counter = OpCounter()
    value.fn(counter, index_vars("x", len(value.size)))
    return counter.counts["load"]
