"""Wrapper IR from a planned schedule: inputs, size symbols, asserts, kernels, externs, frees."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.errors import LoweringError
from polyduct.indexing import symbol_text
from polyduct.ir import SEED_BUFFER, ExternNode, IRGraph, StorageView
from polyduct.kernel import KernelSource
from polyduct.scheduling.plan import Planned, extern_reads
from polyduct.wrapper.ir import (
    Allocate,
    Comment,
    ExternCall,
    Free,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    Line,
    MultiOutput,
    ReinterpretView,
    Reuse,
    SizeDef,
    WrapperProgram,
)
from polyduct.wrapper.library import RESTRIDE


def _size_defs(graph: IRGraph, int_inputs: dict[str, sympy.Expr]) -> list[Line]:
    """One SizeDef per size symbol, from the first input that carries it plainly."""
    defs: dict[str, SizeDef] = {}
    for name in graph.inputs:
        if name in int_inputs:
            expr = int_inputs[name]
            if expr.is_Symbol and symbol_text(expr) not in defs:
                defs[symbol_text(expr)] = SizeDef(symbol_text(expr), name, "value")
            continue
        if name not in graph.buffers:  # a scalar the program was specialised to
            continue
        layout = graph.buffers[name].layout
        for attr, values in (("size", layout.size), ("stride", layout.stride)):
            for dim, v in enumerate(values):
                if v.is_Symbol and symbol_text(v) not in defs:
                    defs[symbol_text(v)] = SizeDef(symbol_text(v), name, attr, dim)
    return list(defs.values())


def _input_asserts(graph: IRGraph, int_inputs: dict[str, sympy.Expr]) -> list[Line]:
    lines: list[Line] = []
    for name in graph.inputs:
        if name in int_inputs or name not in graph.buffers:
            continue
        layout = graph.buffers[name].layout
        lines.append(InputAssert(name, layout.size, layout.stride, layout.dtype))
    return lines


def _extern_lines(graph: IRGraph, node: ExternNode) -> list[Line]:
    lines: list[Line] = []
    for name, view in node.views:
        lay = view.layout
        lines.append(ReinterpretView(name, view.buffer, lay.size, lay.stride, lay.offset))
    lines.append(ExternCall(node.op, node.args, node.kwargs, node.result))
    if node.tuple_result:
        for i, out in enumerate(node.outputs):
            if out:
                lines.append(MultiOutput(out, node.result, i))
    return lines


def _seed_lines(seeds: Sequence[str], device: str) -> list[Line]:
    if not seeds:
        return []
    # One int64 seed per random op, drawn from torch's generator, so torch.manual_seed
    # makes compiled random ops reproducible (docs/frontend.md, "Random numbers").
    kwargs: tuple[tuple[str, Any], ...] = (
        ("dtype", torch.int64),
        ("device", torch.device(device)),
    )
    return [
        Comment(f"seeds for {', '.join(seeds)}"),
        ExternCall("aten.randint.low", (0, 2**62, (len(seeds),)), kwargs, SEED_BUFFER),
    ]


def build_program(
    graph: IRGraph,
    planned: Planned,
    sources: dict[str, KernelSource],
    int_inputs: dict[str, sympy.Expr],
    seeds: Sequence[str],
    debug_asserts: bool = False,
) -> WrapperProgram:
    """The Wrapper IR of one compiled graph."""
    lines: list[Line] = [GraphInputs(tuple(graph.inputs))]
    size_defs = _size_defs(graph, int_inputs)
    lines += size_defs
    lines += _input_asserts(graph, int_inputs)
    device = next((b.layout.device for b in graph.buffers.values()), "cpu")
    lines += _seed_lines(seeds, device)
    for src in sources.values():
        lines.append(KernelDefinition(src.name, src.backend, src.source))
    body: list[Line] = []
    checked = _restride_checked(graph)
    for item in planned.items:
        if isinstance(item, ExternNode):
            body += _extern_lines(graph, item)
            if debug_asserts:
                promised = [o for o in item.outputs if o and o not in checked]
                body += _debug_asserts(graph, promised, item.op)
            continue
        for out in item.outputs:
            lay = graph.buffers[out].layout
            body.append(Allocate(out, lay.size, lay.stride, lay.dtype, lay.device))
        for out, dying in item.reuses:  # written in place of an input that dies here
            lay = graph.buffers[out].layout
            body.append(Reuse(out, dying, lay.size, lay.stride))
        args = tuple(b.name for b in item.spec.args)
        body.append(KernelCall(item.spec.name, args, tuple(item.spec.size_args)))
        if debug_asserts:
            written = [b.name for b in item.spec.buffers if b.role in ("out", "inout")]
            body += _debug_asserts(graph, written, item.spec.name)
    outputs, out_lines = _outputs(graph)
    body += out_lines
    symbols = {line.symbol for line in size_defs if isinstance(line, SizeDef)}  # not buffers
    lines += _with_frees(body, set(outputs) | set(graph.inputs) | symbols)
    lines.append(GraphOutputs(tuple(outputs)))
    return WrapperProgram(tuple(lines))


def _restride_checked(graph: IRGraph) -> set[str]:
    """Extern results `polyduct::restride` checks next: not held to their promised layout (a
    library may return other strides; the check makes them true)."""
    return {n.args[0].name for n in graph.nodes if isinstance(n, ExternNode) and n.op == RESTRIDE}


def _debug_asserts(graph: IRGraph, names: Sequence[str], producer: str) -> list[Line]:
    """Size, stride and dtype asserts on the buffers `producer` (a kernel or extern op) wrote."""
    lines: list[Line] = []
    for name in names:
        if name:
            lay = graph.buffers[name].layout
            lines.append(InputAssert(name, lay.size, lay.stride, lay.dtype, producer))
    return lines


def _outputs(graph: IRGraph) -> tuple[list[str], list[Line]]:
    names: list[str] = []
    lines: list[Line] = []
    for i, out in enumerate(graph.outputs):
        if isinstance(out, StorageView):
            base = graph.buffers[out.buffer].layout
            if out.layout == base:
                names.append(out.buffer)
                continue
            name = f"out_view{i}"
            lay = out.layout
            lines.append(ReinterpretView(name, out.buffer, lay.size, lay.stride, lay.offset))
            names.append(name)
        elif isinstance(out, sympy.Expr) and out.is_Symbol:
            names.append(symbol_text(out))
        elif isinstance(out, sympy.Expr) and out.is_integer and out.free_symbols:
            names.append(out)
        else:
            raise LoweringError("output", str(i), f"graph output {out!r} is not supported")
    return names, lines


def _line_names(line: Line) -> set[str]:
    if isinstance(line, KernelCall):
        return set(line.args)
    if isinstance(line, ExternCall):
        node = ExternNode("", line.op, line.args, line.kwargs, line.result, (), False)
        return extern_reads(node) | {line.result}
    if isinstance(line, (ReinterpretView,)):
        return {line.base, line.name}
    if isinstance(line, MultiOutput):
        return {line.source, line.name}
    if isinstance(line, Reuse):
        return {line.name}  # `old` is dropped by the Reuse itself, never freed
    if isinstance(line, (Allocate, InputAssert)):
        return {line.name}
    return set()


def _with_frees(body: list[Line], keep: set[str]) -> list[Line]:
    """`body` with a `Free` after the last line using each buffer (not inputs or outputs)."""
    last: dict[str, int] = {}
    views: dict[str, str] = {}
    for i, line in enumerate(body):
        for name in _line_names(line):
            last[name] = i
        if isinstance(line, ReinterpretView):
            views[line.name] = line.base
        if isinstance(line, Reuse):
            keep = keep | {line.old}
    for view, base in views.items():
        if view in keep:
            keep = keep | {base}
    frees: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in keep and name != SEED_BUFFER:
            frees.setdefault(i, []).append(name)
    out: list[Line] = []
    for i, line in enumerate(body):
        out.append(line)
        out.extend(Free(n) for n in sorted(frees.get(i, [])))
    return out
