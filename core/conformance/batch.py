"""Run probes through a backend: many probes per kernel, few kernels per load, bisect on failure.

Probes of one dtype that share an iteration space become the stages of ONE `KernelSpec`; the specs
of a batch go through one Wrapper IR program (kernel definitions + calls), so a compiled backend
builds one module per batch. When a batch raises, its ops (all variants of an op together) are
split in halves within a budget of extra modules per dtype; past it, each op of a failing half runs
as its own module. Either way every failing op x dtype is named.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import sympy
import torch

from polyduct.conformance.probe import Probe
from polyduct.conformance.tolerance import compare
from polyduct.kernel import (
    KernelBackend,
    KernelBuffer,
    KernelFn,
    KernelSource,
    KernelSpec,
    Role,
    Stage,
)
from polyduct.wrapper import WrapperBackend
from polyduct.wrapper.ir import (
    Allocate,
    GraphInputs,
    GraphOutputs,
    KernelCall,
    KernelDefinition,
    Line,
    WrapperProgram,
)

Status = Literal["passed", "failed", "skipped"]
MAX_STAGES = 96
# Extra modules a failing dtype batch may spend on halving before each op runs alone (#3).
SPLIT_BUDGET = 12


@dataclass
class ProbeResult:
    """The outcome of one probe; `source` is the generated kernel when it failed."""

    probe: Probe
    status: Status
    message: str = ""
    source: str = ""


@dataclass
class Session:
    """One backend under test, and counters of what it compiled."""

    backend: KernelBackend
    wrapper: WrapperBackend | None
    device: str = "cpu"  # inputs are made on the CPU, then moved here; outputs come back
    kernels: int = 0  # kernel sources handed to backend.load
    modules: int = 0  # backend.load calls (one module / compile unit each)
    seconds: dict[str, float] = field(default_factory=dict)

    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        self.modules += 1
        self.kernels += len(sources)
        return self.backend.load(sources)


def _numel(t: torch.Tensor | Any) -> int:
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    return max(int(span), 1)


def _buffers(probe: Probe, prefix: str) -> list[KernelBuffer]:
    bufs = []
    for name, t in probe.inputs.items():
        role: Role = "inout" if name in probe.inouts else "in"
        bufs.append(KernelBuffer(prefix + name, t.dtype, role, sympy.Integer(_numel(t))))
    for name, o in probe.outputs.items():
        bufs.append(KernelBuffer(prefix + name, o.dtype, "out", sympy.Integer(_numel(o))))
    for name, dtype in probe.locals.items():
        size = 1
        for r in probe.ranges:
            size *= r
        bufs.append(KernelBuffer(prefix + name, dtype, "local", sympy.Integer(size)))
    return bufs


def _group_key(probe: Probe) -> tuple[Any, ...]:
    kinds = tuple(sorted({kind for kind, _ in probe.stages} - {"outer", "inner"}))
    return (probe.ranges, probe.reduction_ranges, kinds)


def build_specs(probes: Sequence[Probe], tag: str, device: str = "cpu") -> list[KernelSpec]:
    """Merge probes sharing an iteration space into kernels of at most `MAX_STAGES` stages."""
    groups: dict[tuple[Any, ...], list[tuple[int, Probe]]] = {}
    for i, probe in enumerate(probes):
        groups.setdefault(_group_key(probe), []).append((i, probe))
    specs: list[KernelSpec] = []
    for members in groups.values():
        for start in range(0, len(members), MAX_STAGES):
            chunk = members[start : start + MAX_STAGES]
            stages: list[Stage] = []
            buffers: list[KernelBuffer] = []
            for i, probe in chunk:
                stages += [Stage(kind, body) for kind, body in probe.with_prefix(f"p{i}_")]
                buffers += _buffers(probe, f"p{i}_")
            first = chunk[0][1]
            specs.append(
                KernelSpec(
                    name=f"conformance_{tag}_{len(specs)}",
                    ranges=tuple(sympy.Integer(r) for r in first.ranges),
                    reduction_ranges=tuple(sympy.Integer(r) for r in first.reduction_ranges),
                    stages=tuple(stages),
                    buffers=tuple(buffers),
                    device=device,
                )
            )
    return specs


Layouts = dict[str, tuple[tuple[sympy.Expr, ...], tuple[sympy.Expr, ...]]]


def _program(
    specs: Sequence[KernelSpec],
    sources: Sequence[KernelSource],
    layouts: Layouts,
    device: str = "cpu",
) -> WrapperProgram:
    inputs = [b.name for s in specs for b in s.args if b.role in ("in", "inout")]
    outputs = [b.name for s in specs for b in s.args if b.role in ("out", "inout")]
    lines: list[Line] = [GraphInputs(tuple(inputs))]
    for spec in specs:
        for b in spec.args:
            if b.role == "out":
                lines.append(Allocate(b.name, *layouts[b.name], b.dtype, device))
    for src in sources:
        lines.append(KernelDefinition(src.name, src.backend, src.source))
    for spec in specs:
        lines.append(KernelCall(spec.name, tuple(b.name for b in spec.args)))
    lines.append(GraphOutputs(tuple(outputs)))
    return WrapperProgram(tuple(lines))


def execute(session: Session, probes: Sequence[Probe], tag: str) -> list[dict[str, torch.Tensor]]:
    """Run `probes` as few kernels as one program; each probe's outputs (and inouts) by name."""
    specs = build_specs(probes, tag, session.device)
    sources = [session.backend.codegen(spec) for spec in specs]
    args: dict[str, torch.Tensor] = {}
    layouts: Layouts = {}
    for i, probe in enumerate(probes):
        for name, t in probe.inputs.items():
            moved = _to_device(t, session.device)
            args[f"p{i}_{name}"] = moved.clone() if moved is t and name in probe.inouts else moved
        for name, o in probe.outputs.items():
            layouts[f"p{i}_{name}"] = (
                tuple(sympy.Integer(s) for s in o.shape),
                tuple(sympy.Integer(s) for s in o.strides),
            )
    if session.wrapper is not None:
        program = _program(specs, sources, layouts, session.device)
        fn = session.wrapper.build(program, _loader(session))
        inputs = program.lines[0]
        assert isinstance(inputs, GraphInputs)
        outs = fn(*(args[n] for n in inputs.names))
        last = program.lines[-1]
        assert isinstance(last, GraphOutputs)
        produced = dict(zip(last.names, outs, strict=True))
    else:
        produced = _run_direct(session, specs, sources, args, layouts)
    return [
        {name: _cpu(produced[f"p{i}_{name}"]) for name in (*probe.outputs, *probe.inouts)}
        for i, probe in enumerate(probes)
    ]


def _loader(session: Session) -> Callable[[Sequence[KernelDefinition]], dict[str, KernelFn]]:
    def load_kernels(defs: Sequence[KernelDefinition]) -> dict[str, KernelFn]:
        return session.load([KernelSource(d.name, d.backend, d.source) for d in defs])

    return load_kernels


def _run_direct(
    session: Session,
    specs: Sequence[KernelSpec],
    sources: Sequence[KernelSource],
    args: dict[str, torch.Tensor],
    layouts: Layouts,
) -> dict[str, torch.Tensor]:
    kernels = session.load(sources)
    for spec in specs:
        for b in spec.args:
            if b.role == "out":
                size, stride = layouts[b.name]
                args[b.name] = torch.empty_strided(
                    tuple(int(s) for s in size),
                    tuple(int(s) for s in stride),
                    dtype=b.dtype,
                    device=session.device,
                )
        kernels[spec.name](*(args[b.name] for b in spec.args))
    return args


def _to_device(t: torch.Tensor, device: str) -> torch.Tensor:
    """`t` on `device` with the same size, strides and element span (offset dropped)."""
    if torch.device(device) == t.device:
        return t
    flat = t.as_strided((_numel(t),), (1,), t.storage_offset()).to(device)
    return flat.as_strided(t.shape, t.stride(), 0)


def _cpu(t: torch.Tensor) -> torch.Tensor:
    """`t` on the CPU, strides kept (the oracle and the comparison run there)."""
    if t.device.type == "cpu":
        return t
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    out.copy_(t)
    return out


def _verdict(probe: Probe, got: dict[str, torch.Tensor]) -> list[str]:
    if probe.check is not None:
        return probe.check(probe, got)
    problems = []
    for name, want in probe.expected.items():
        bad = compare(name, got[name], want, probe.tol, probe.inputs)
        if bad is not None:
            problems.append(str(bad))
    return problems


def source_of(session: Session, probe: Probe) -> str:
    """The kernel source of `probe` alone (codegen only, no compile), for failure reports."""
    try:
        spec = build_specs([probe], "failing", session.device)[0]
        return session.backend.codegen(spec).source
    except Exception as exc:  # noqa: BLE001 -- the report shows why codegen failed instead
        return f"<codegen failed: {type(exc).__name__}: {exc}>"


def _failure(session: Session, probe: Probe, message: str) -> ProbeResult:
    return ProbeResult(probe, "failed", message, source_of(session, probe))


def run_probes(
    session: Session, probes: Sequence[Probe], tag: str, budget: int = SPLIT_BUDGET
) -> list[ProbeResult]:
    """Run batchable probes together, isolating failures within `budget` extra modules."""
    batch = [p for p in probes if p.batchable and p.expect_error is None]
    single = [p for p in probes if not (p.batchable and p.expect_error is None)]
    results = _isolate(session, _units(batch), tag, [budget]) if batch else []
    for probe in single:
        results.append(_run_single(session, probe, tag))
    return results


def _units(probes: Sequence[Probe]) -> list[list[Probe]]:
    """Probes grouped by op (every variant of one op is one unit), ordered by category."""
    by_op: dict[tuple[str, str], list[Probe]] = {}
    for probe in probes:
        by_op.setdefault((probe.category, probe.op), []).append(probe)
    return [by_op[key] for key in sorted(by_op)]


def _isolate(
    session: Session, units: list[list[Probe]], tag: str, budget: list[int]
) -> list[ProbeResult]:
    """Run `units` as one batch; on an exception split them, spending `budget[0]` modules.

    Splitting halves the op units (ordered by category, so the first splits separate
    categories). Once the budget is spent, a failing group runs one module per op: a failing op
    costs one module, however many ops fail. An op that fails alone fails all its probes.
    """
    probes = [p for unit in units for p in unit]
    try:
        outs = execute(session, probes, tag)
    except Exception as exc:  # noqa: BLE001 -- any error of a backend under test is a result
        if len(units) == 1:
            return _unit_failed(session, units[0], exc, tag, budget)
        refused, rest = _codegen_failures(session, probes)
        if refused:  # codegen is cheap: drop probes it refuses before compiling again
            return refused + (_isolate(session, _units(rest), tag, budget) if rest else [])
        if budget[0] < 2:
            return [r for unit in units for r in _isolate(session, [unit], tag, budget)]
        budget[0] -= 2
        half = len(units) // 2
        return _isolate(session, units[:half], tag, budget) + _isolate(
            session, units[half:], tag, budget
        )
    return [_judged(session, probe, got) for probe, got in zip(probes, outs, strict=True)]


def _unit_failed(
    session: Session, unit: list[Probe], exc: BaseException, tag: str, budget: list[int]
) -> list[ProbeResult]:
    """One op's probes raised together: split its variants while budget lasts, else fail all."""
    if len(unit) > 1 and budget[0] >= 2:
        budget[0] -= 2
        half = len(unit) // 2
        return _isolate(session, [unit[:half]], tag, budget) + _isolate(
            session, [unit[half:]], tag, budget
        )
    message = _format_exc(exc)
    if len(unit) > 1:
        message = f"(raised by this op's {len(unit)} probes run as one module)\n{message}"
    return [_failure(session, probe, message) for probe in unit]


def _judged(session: Session, probe: Probe, got: dict[str, torch.Tensor]) -> ProbeResult:
    problems = _verdict(probe, got)
    if problems:
        return _failure(session, probe, "\n".join(problems))
    return ProbeResult(probe, "passed")


def _codegen_failures(
    session: Session, probes: Sequence[Probe]
) -> tuple[list[ProbeResult], list[Probe]]:
    """Probes whose codegen alone raises (as failures), and the others."""
    refused, rest = [], []
    for probe in probes:
        try:
            session.backend.codegen(build_specs([probe], "probe", session.device)[0])
        except Exception as exc:  # noqa: BLE001 -- any error of a backend under test is a result
            refused.append(ProbeResult(probe, "failed", _format_exc(exc), "<codegen failed>"))
        else:
            rest.append(probe)
    return refused, rest


def _run_single(session: Session, probe: Probe, tag: str) -> ProbeResult:
    try:
        outs = execute(session, [probe], tag)[0]
    except Exception as exc:  # noqa: BLE001 -- any error of a backend under test is a result
        if probe.expect_error is not None and isinstance(exc, probe.expect_error):
            return ProbeResult(probe, "passed")
        return _failure(session, probe, _format_exc(exc))
    if probe.expect_error is not None:
        name = probe.expect_error.__name__
        return _failure(session, probe, f"expected {name} to be raised, but the kernel returned")
    problems = _verdict(probe, outs)
    if problems:
        return _failure(session, probe, "\n".join(problems))
    return ProbeResult(probe, "passed")


def _format_exc(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return f"{type(exc).__name__}: {exc}\n" + "".join(tb[-4:])
