"""KernelSpec -> Python source of a module that builds the kernel's Halide pipeline.

The module defines `build(target, schedule=SCHEDULE)` returning the scheduled `hl.Pipeline` and its
arguments (another schedule serves as the fallback of an autoscheduled kernel), plus
the data the launcher needs (`ARGS`, `SIZES`, `OUTPUTS`, `CHECKS`). Each stage body becomes nested functions of the index
variables; outputs are written by scatter updates over an RDom of the stage's iteration space.
"""

from __future__ import annotations

import sympy

from polyduct.codegen import IndentedBuffer, string_literal
from polyduct.indexing import index_vars
from polyduct.kernel import KernelSpec
from polyduct_halide.ops import HalideOps
from polyduct_halide.trace import KernelTrace, StageTrace
from polyduct_halide.values import compute_type, dtype_name, storage_type


def trace_kernel(spec: KernelSpec) -> KernelTrace:
    """Run every stage body of `spec` on a fresh `HalideOps`."""
    trace = KernelTrace(spec)
    ops = HalideOps(trace)
    xs = index_vars("x", len(spec.ranges))
    rs = index_vars("r", len(spec.reduction_ranges))
    for stage in spec.stages:
        trace.begin(stage.kind)
        stage.body(ops, xs, () if stage.kind == "outer" else rs)
    return trace


def generate(
    spec: KernelSpec, schedule: str, strict_float: bool = True, device: str = "cpu"
) -> str:
    """The pipeline module's source for `spec` under `schedule` (deterministic).

    `strict_float` says whether the target will have StrictFloat (`mul_rn` relies on it);
    `device` (cpu or cuda) is recorded as `DEVICE`, which picks the target.
    """
    trace = trace_kernel(spec)
    out = IndentedBuffer()
    _header(out, spec, trace, schedule, strict_float)
    out.line(f"DEVICE = {string_literal(device)}")
    out.lines(["", ""])
    out.line("def build(target, schedule=SCHEDULE):")
    with out.indent():
        _params(out, spec, trace)
        for number, stage in enumerate(trace.stages):
            _stage(out, spec, stage, number)
        outputs = ", ".join(f"{a}_out" for a in _outputs(spec, trace))
        params = ", ".join(_input_args(spec) + [trace.names[s.name] for s in spec.size_args])
        estimate = _estimate(spec)
        out.line(
            f"return _rt.finish(KERNEL, schedule, target, [{params}], [{outputs}], SCHED, xv, XR, "
            f"{estimate}, RR{', heavy=True' if trace.heavy else ''})"
        )
    return out.getvalue()


def _estimate(spec: KernelSpec) -> int:
    """Elements a buffer is assumed to span, for autoscheduler estimates (symbols as 1024)."""
    sizes = {s: 1024 for s in spec.size_args}
    total = 1
    for extent in (*spec.ranges, *spec.reduction_ranges):
        total *= int(sympy.sympify(extent).subs(sizes)) if sizes else int(extent)
    biggest = max((int(sympy.sympify(b.numel).subs(sizes)) for b in spec.args), default=1)
    return max(total, biggest, 1)


def _outputs(spec: KernelSpec, trace: KernelTrace) -> list[str]:
    """Written buffers: new ones first, then those holding data before the kernel (`inout`: a
    scatter's target), each group in the order the kernel first stores them. Halide realises a
    pipeline's outputs one after another, each over its whole range (with the reductions and
    scans it reads), so every read of an `inout` buffer's old data must come first: its readers
    are earlier members (a backward's second scatter read the first's result: halide seed 9103,
    program 1989) or reductions an output of a later stage reads (program 3484). Outputs never
    take an input's storage here (`Capabilities.inplace`)."""
    first: dict[str, None] = {}
    for st in trace.stages:
        first.update((f.removesuffix("_out"), None) for f in st.stores)
        first.update((arg, None) for arg, *_ in st.reduction_stores)
    updated = {trace.names[b.name] for b in spec.args if b.role == "inout"}
    return sorted(first, key=lambda name: name in updated)


def _input_args(spec: KernelSpec) -> list[str]:
    names = spec.arg_names()
    return [names[b.name] for b in spec.args if b.role in ("in", "inout")]


def _header(
    out: IndentedBuffer, spec: KernelSpec, trace: KernelTrace, schedule: str, strict_float: bool
) -> None:
    names = trace.names
    out.line(f'"""Halide pipeline of kernel {string_literal(spec.name)} (polyduct-halide)."""')
    out.lines(
        [
            "import halide as hl",
            "",
            "from polyduct_halide import hlmath as _m",
            "from polyduct_halide import runtime as _rt",
            "",
        ]
    )
    out.line(f"KERNEL = {string_literal(spec.name)}")
    out.line(f"SCHEDULE = {string_literal(schedule)}")
    out.line(f"STRICT_FLOAT = {strict_float}")
    args = ", ".join(
        f"({string_literal(names[b.name])}, {string_literal(b.name)}, "
        f"{string_literal(b.role)}, {string_literal(dtype_name(b.dtype))})"
        for b in spec.args
    )
    out.line(f"ARGS = ({args}{',' if spec.args else ''})")
    sizes = ", ".join(string_literal(names[s.name]) for s in spec.size_args)
    out.line(f"SIZES = ({sizes}{',' if spec.size_args else ''})")
    outputs = ", ".join(string_literal(a) for a in _outputs(spec, trace))
    out.line(f"OUTPUTS = ({outputs}{',' if outputs else ''})")
    checks = ", ".join(
        f"({string_literal(c.buffer)}, {string_literal(c.message)})" for c in trace.checks
    )
    out.line(f"CHECKS = ({checks}{',' if trace.checks else ''})")


def _params(out: IndentedBuffer, spec: KernelSpec, trace: KernelTrace) -> None:
    names = trace.names
    for buf in spec.args:
        arg = names[buf.name]
        if buf.role in ("in", "inout"):
            out.line(f"{arg} = hl.ImageParam({storage_type(buf.dtype)}, 1, {string_literal(arg)})")
        if buf.role in ("out", "inout"):
            out.line(
                f"{arg}_out = _rt.output({string_literal(arg + '_out')}, {storage_type(buf.dtype)})"
            )
    for sym in spec.size_args:
        out.line(f"{names[sym.name]} = hl.Param(hl.Int(32), {string_literal(names[sym.name])})")
    outputs = ", ".join(f"{a}_out" for a in _outputs(spec, trace))
    out.line(f"NOFUSE = _rt.nofuse(target, [{outputs}])")
    out.line(f"ZERO = _rt.opaque_zero([{outputs}])")
    out.line(f"XR = [{', '.join(trace.expr(r) for r in spec.ranges)}]")
    out.line(f"RR = [{', '.join(trace.expr(r) for r in spec.reduction_ranges)}]")
    xvars = ", ".join(f'hl.Var("x{i}")' for i in range(len(spec.ranges)))
    out.line(f"xv = [{xvars}]")
    out.line('pv = hl.Var("p")')
    out.line("SCHED = []")


def _signature(spec: KernelSpec, with_r: bool) -> str:
    xs = [f"x{i}" for i in range(len(spec.ranges))]
    rs = [f"r{i}" for i in range(len(spec.reduction_ranges))] if with_r else []
    return ", ".join(xs + rs)


def _function(out: IndentedBuffer, name: str, sig: str, lines: list[str], ret: str) -> None:
    out.line(f"def {name}({sig}):")
    with out.indent():
        out.lines(lines or [])
        out.line(f"return {ret}")


def _stage(out: IndentedBuffer, spec: KernelSpec, stage: StageTrace, number: int) -> None:
    out.line(f"# stage {number}: {stage.kind}")
    with_r = stage.kind != "outer"
    sig = _signature(spec, True)
    for red in stage.reductions:
        _function(out, f"_{red.name}", sig, red.lines, f"({', '.join(red.values)},)")
        out.line(f"{red.name}_dom, {red.name}_r = _rt.rdom({string_literal(red.name)}, RR)")
        out.line(
            f"{red.name} = _rt.reduction({string_literal(red.name)}, xv, _{red.name}, "
            f"{red.name}_r, RR, {string_literal(red.rtype)}, {compute_type(red.dtype)}, "
            "STRICT_FLOAT, ZERO, target)"
        )
        vector = string_literal(red.vector)
        out.line(f"SCHED.extend(('func', f, {vector}) for f in {red.name})")
    empty = any(r == 0 for r in spec.reduction_ranges)  # sizes 0 and 1 are never symbolic
    for col in stage.collectives:
        _function(out, f"_{col.name}", sig, col.lines, f"({', '.join(col.values)},)")
        at = f"_{col.name}(*xv, *_rt.unflatten(pv, RR))"
        if empty:
            out.line(f"{col.name} = _rt.unread({string_literal(col.name)}, xv, pv, {at})")
        elif col.kind == "scan":
            _function(
                out,
                f"_{col.name}_combine",
                "a, b",
                col.combine[:-1],
                col.combine[-1].removeprefix("return "),
            )
            call = f"_rt.scan({string_literal(col.name)}, xv, pv, {at}, _{col.name}_combine, "
            out.line(f"{col.name} = {call}_rt.total(RR), SCHED)")
        else:
            call = f"_rt.sort({string_literal(col.name)}, xv, pv, {at}, _rt.total(RR), "
            out.line(f"{col.name} = {call}{col.descending}, SCHED)")
        out.line(f"SCHED.append(('func', {col.name}))")
    if stage.stores:
        _function(
            out,
            f"_s{number}",
            sig if with_r else _signature(spec, False),
            ["S = []", *stage.em.lines],
            "S",
        )
        space = "XR + RR" if with_r else "XR"
        _scatter(out, f"_s{number}", space, number)
    if stage.reduction_stores:
        _reduction_stores(out, spec, stage, number)


def _scatter(out: IndentedBuffer, fn: str, space: str, number: int) -> None:
    out.line(f"dom{number}, rv{number} = _rt.rdom('s{number}', {space})")
    out.line(f"for func, index, value, atomic in {fn}(*rv{number}):")
    with out.indent():
        out.line("_rt.scatter(func, index, value, atomic)")
        out.line(f"SCHED.append(('scatter', func, rv{number}, atomic))")


def _reduction_stores(
    out: IndentedBuffer, spec: KernelSpec, stage: StageTrace, number: int
) -> None:
    trace_lines = ["S = []"]
    for arg, index, ref, dtype in stage.reduction_stores:
        idx = (
            f"hl.unsafe_promise_clamped({_printer_expr(spec, index)}, 0, "
            f"{arg}_out.output_buffer().dim(0).extent() - 1)"
        )
        trace_lines.append(
            f"S.append(({arg}_out, {idx}, _m.encode({ref}, {string_literal(dtype_name(dtype))}), False))"
        )
    _function(out, f"_rs{number}", _signature(spec, False), trace_lines, "S")
    _scatter(out, f"_rs{number}", "XR", 1000 + number)


def _printer_expr(spec: KernelSpec, index: object) -> str:
    return KernelTrace(spec).expr(index)  # type: ignore[arg-type]
