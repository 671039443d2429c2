"""Wrapper IR -> `torch.fx.GraphModule`, one exhaustive `match` over `polyduct.wrapper.ir.Line`.

What each line becomes (docs/fx.md has the table with examples):
graph inputs -> placeholders; input asserts -> `check_input` calls; size symbols -> `sym_size` /
`sym_stride` nodes or int placeholders, and size expressions -> FX arithmetic; allocations ->
`torch.empty_strided`; reuse and views -> `aten.as_strided` (or an alias when the layout is equal);
kernel calls -> calls of the `KernelOp` wrapping the compiled kernel; extern calls -> aten overload
calls; multi-output unpack -> `operator.getitem`; frees drop the name, so FX's code releases the
value after its last use; comments -> node metadata; graph outputs -> the output node (a list).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy
import torch
import torch.fx
from typing_extensions import assert_never

from polyduct.codegen import identifier
from polyduct.errors import WrapperError
from polyduct.kernel import KernelFn
from polyduct.wrapper import KernelLoader
from polyduct.wrapper.ir import (
    Allocate,
    Comment,
    Constant,
    ExternCall,
    Free,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    Line,
    MultiOutput,
    OpRef,
    Ref,
    ReinterpretView,
    Reuse,
    SizeDef,
    WrapperProgram,
)
from polyduct_fx.runtime import WRAPPER, KernelOp, check_input, resolve_op
from polyduct_fx.symbolic import SymEmitter, SymValue

_SIZE_FNS: Mapping[str, Callable[..., Any]] = {
    "size": torch.ops.aten.sym_size.int,
    "stride": torch.ops.aten.sym_stride.int,
}
Layout = tuple[tuple[sympy.Expr, ...], tuple[sympy.Expr, ...]]


class FxConverter:
    """Single-use converter of one `WrapperProgram`, given its loaded kernels by name."""

    def __init__(self, program: WrapperProgram, kernels: Mapping[str, KernelFn]) -> None:
        self.program, self.kernels = program, kernels
        self.graph = torch.fx.Graph()
        self.env: dict[str, SymValue] = {}
        self.ops: dict[str, KernelOp] = {}
        self.layouts: dict[str, Layout] = {}
        self.freed: set[str] = set()
        self.pending_sizes = {ln.symbol: ln for ln in program.lines if isinstance(ln, SizeDef)}
        self.comments: list[str] = []
        self.sym = SymEmitter(self.graph, self.value)
        self.line: Line | None = None

    def convert(self) -> torch.fx.GraphModule:
        """The GraphModule running the program; its graph lints clean."""
        for line in self.program.lines:
            self.line = line
            self.emit(line)
        gm = torch.fx.GraphModule(torch.nn.Module(), self.graph, class_name="PolyductFxGraph")
        gm.graph.lint()
        return gm

    def emit(self, line: Line) -> None:
        """Add the FX nodes for one line."""
        args: tuple[Any, ...]
        match line:
            case GraphInputs(names=names):
                for name in names:
                    self.bind(name, self.graph.placeholder(identifier(name)))
            case InputAssert(name=name, size=size, stride=stride, dtype=dtype, producer=producer):
                args = (self.node(name), name, self.sizes(size), self.sizes(stride), dtype, producer)
                self.create(check_input, args, {}, f"assert_{name}")
            case SizeDef(symbol=symbol):
                self.value(symbol)
            case Allocate(name=name, size=size, stride=stride, dtype=dtype, device=device):
                kwargs = {"dtype": dtype, "device": device}
                args = (self.sizes(size), self.sizes(stride))
                self.bind(name, self.create(torch.empty_strided, args, kwargs, name))
                self.layouts[name] = (size, stride)
            case Free(name=name):
                self.node(name)
                del self.env[name]
                self.freed.add(name)
            case Reuse(name=name, old=old, size=size, stride=stride):
                self.reuse(name, old, (size, stride))
            case ReinterpretView():
                self.reinterpret(line)
            case KernelDefinition(name=name, backend=backend):
                if name not in self.kernels:
                    raise self.error(f"load_kernels returned no kernel {name!r}")
                self.ops[name] = KernelOp(name, backend, self.kernels[name])
            case KernelCall(kernel=kernel, args=buffers, sizes=sizes):
                if kernel not in self.ops:
                    raise self.error(f"kernel {kernel!r} is called before its KernelDefinition")
                args = (*(self.node(b) for b in buffers), *self.sizes(sizes))
                self.create(self.ops[kernel], args, {}, f"call_{kernel}")
            case ExternCall():
                self.extern(line)
            case MultiOutput(name=name, source=source, index=index):
                args = (self.node(source), index)
                self.bind(name, self.create(operator.getitem, args, {}, name))
            case Comment(text=text):
                self.comments.append(text)
            case GraphOutputs(names=names):
                self.graph.output(
                    [self.value(n) if isinstance(n, str) else self.sym.emit(n) for n in names]
                )
            case _:
                assert_never(line)

    def reuse(self, name: str, old: str, layout: Layout) -> None:
        """`name` takes over `old`'s storage: an alias if the layout is equal, else a view."""
        base = self.node(old)
        if self.layouts.get(old) == layout:
            self.bind(name, base)
        else:
            args = (base, self.sizes(layout[0]), self.sizes(layout[1]))
            self.bind(name, self.create(torch.ops.aten.as_strided.default, args, {}, name))
        self.layouts[name] = layout
        del self.env[old]
        self.freed.add(old)

    def reinterpret(self, line: ReinterpretView) -> None:
        """A view of `base`'s storage; `offset` counts from the base's own storage offset."""
        base = self.node(line.base)
        args: tuple[Any, ...] = (base, self.sizes(line.size), self.sizes(line.stride))
        if sympy.sympify(line.offset) != 0:
            start = self.create(torch.ops.aten.sym_storage_offset.default, (base,), {}, "offset")
            args = (*args, self.sym.add(start, self.sym.emit(line.offset)))
        self.bind(line.name, self.create(torch.ops.aten.as_strided.default, args, {}, line.name))

    def extern(self, line: ExternCall) -> None:
        """An aten overload call; with `out` the op writes into that buffer."""
        target = resolve_op(line.op)
        args = tuple(self.constant(a) for a in line.args)
        kwargs = {key: self.constant(v) for key, v in line.kwargs}
        if line.out is not None:
            kwargs["out"] = self.node(line.out)
        node = self.create(target, args, kwargs, line.result or f"{line.out}_out")
        if line.out is None or line.result not in ("", line.out):
            self.bind(line.result, node)

    def constant(self, value: Constant) -> Any:
        """An extern-call argument as an FX argument (references become nodes)."""
        if isinstance(value, Ref):
            return self.value(value.name)
        if isinstance(value, OpRef):
            return resolve_op(value.name)
        if isinstance(value, sympy.Basic):
            return self.sym.emit(value)
        if isinstance(value, tuple):  # a tuple: higher-order ops concatenate them
            return tuple(self.constant(v) for v in value)
        if isinstance(value, dict):
            return {key: self.constant(v) for key, v in value.items()}
        return value

    def sizes(self, exprs: Sequence[sympy.Expr]) -> list[SymValue]:
        """FX values of size expressions."""
        return [self.sym.emit(e) for e in exprs]

    def value(self, name: str) -> SymValue:
        """A buffer's node or a size symbol's value; a size symbol is defined on first use."""
        if name in self.env:
            return self.env[name]
        if name in self.pending_sizes:
            self.define_size(self.pending_sizes.pop(name))
            return self.env[name]
        if name in self.freed:
            raise self.error(f"{name!r} is used after it was freed")
        raise self.error(f"{name!r} is not defined")

    def node(self, name: str) -> torch.fx.Node:
        """The node of buffer `name`."""
        value = self.value(name)
        if not isinstance(value, torch.fx.Node):
            raise self.error(f"{name!r} is a constant size, not a buffer")
        return value

    def define_size(self, line: SizeDef) -> None:
        source = self.node(line.source)
        if line.attr == "value":
            self.bind(line.symbol, self.create(int, (source,), {}, line.symbol))
        elif line.attr in _SIZE_FNS:
            args = (source, line.dim)
            self.bind(line.symbol, self.create(_SIZE_FNS[line.attr], args, {}, line.symbol))
        else:
            raise self.error(f"SizeDef attr {line.attr!r} is not size, stride or value")

    def create(
        self, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], name: str
    ) -> torch.fx.Node:
        """A call_function node named after `name`; pending comments become its metadata."""
        node = self.graph.create_node("call_function", target, args, kwargs, identifier(name))
        if self.comments:
            node.meta["polyduct_comments"] = tuple(self.comments)
            self.comments.clear()
        return node

    def bind(self, name: str, value: SymValue) -> None:
        if name in self.env:
            raise self.error(f"{name!r} is defined twice")
        self.env[name] = value
        self.freed.discard(name)

    def error(self, detail: str) -> WrapperError:
        return WrapperError(WRAPPER, self.line, detail)


def to_graph(program: WrapperProgram, load_kernels: KernelLoader) -> torch.fx.GraphModule:
    """Load `program`'s kernels through `load_kernels`, then convert it to a GraphModule."""
    return FxConverter(program, load_kernels(program.kernels())).convert()
