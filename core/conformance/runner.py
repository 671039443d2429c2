"""The suite runner: select cases, run them per backend and per dtype, aggregate the matrix."""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from polyduct.conformance.batch import ProbeResult, Session, Status, run_probes
from polyduct.conformance.elementwise import elementwise_probes
from polyduct.conformance.graphs import (
    GRAPH_CASES,
    PREFIX,
    graph_probes,
    installed_as,
    run_graph_probe,
)
from polyduct.conformance.other_cases import OTHER
from polyduct.conformance.probe import ORACLE_DEVICE, Probe, dtype_name
from polyduct.conformance.randomness import RANDOM
from polyduct.conformance.reductions import REDUCTIONS
from polyduct.conformance.special import BASIC
from polyduct.conformance.static import StaticReport, check_static
from polyduct.conformance.table import CASES
from polyduct.handlers.count import OpCounter
from polyduct.indexing import index_vars
from polyduct.kernel import KernelBackend
from polyduct.wrapper import WrapperBackend

Progress = Callable[[str], None]
SPECIAL = BASIC + OTHER + REDUCTIONS + RANDOM


@dataclass(frozen=True)
class Selection:
    """Which cases to run: op regex, dtype names, categories, and whether to stop at a failure."""

    ops: str | None = None
    dtypes: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    fail_fast: bool = False

    def wants(self, op: str, category: str, dtype: torch.dtype) -> bool:
        if self.ops is not None and not re.search(self.ops, op):
            return False
        if self.dtypes and dtype_name(dtype) not in self.dtypes:
            return False
        return not self.categories or category in self.categories


@dataclass
class Cell:
    """One matrix cell: an op on a dtype, and the results of its probes."""

    op: str
    dtype: str
    category: str
    results: list[ProbeResult] = field(default_factory=list)

    @property
    def status(self) -> Status:
        states = {r.status for r in self.results}
        if "failed" in states:
            return "failed"
        return "passed" if "passed" in states else "skipped"

    @property
    def reason(self) -> str:
        return next((r.message for r in self.results if r.status != "passed"), "")


@dataclass
class BackendReport:
    """Everything the suite learned about one kernel backend."""

    backend: str
    wrapper: str | None
    static: StaticReport | None
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    seconds: float = 0.0
    kernels: int = 0
    modules: int = 0
    error: str = ""
    device: str = "cpu"

    def counts(self) -> dict[str, int]:
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        for cell in self.cells.values():
            counts[cell.status] += 1
        counts["failed"] += (self.static.failures if self.static else 0) + bool(self.error)
        return counts


def selected_cells(selection: Selection) -> list[tuple[str, torch.dtype]]:
    """The (op, dtype) rows the selection asks for, from the case tables (no input is built)."""
    rows = [(c.op, c.category, d) for c in CASES for d in c.domain]
    rows += [(s.op, s.category, d) for s in SPECIAL for d in s.domain]
    rows += [(PREFIX + g.name, "graph", g.dtype) for g in GRAPH_CASES]
    return [(op, dtype) for op, category, dtype in rows if selection.wants(op, category, dtype)]


def all_probes(selection: Selection) -> list[Probe]:
    """Every probe the selection asks for, elementwise rows then special builders."""
    probes: list[Probe] = []
    for case in CASES:
        for dtype in case.domain:
            if selection.wants(case.op, case.category, dtype):
                probes += elementwise_probes(case, dtype)
    for special in SPECIAL:
        for dtype in special.domain:
            if selection.wants(special.op, special.category, dtype):
                probes += special.build(dtype)
    probes += [p for p in graph_probes() if selection.wants(p.op, p.category, p.dtype)]
    return probes


def probe_ops(probe: Probe) -> set[str]:
    """The op-set ops a probe's kernel calls (its stage bodies traced with an `OpCounter`)."""
    counter = OpCounter()
    xs = index_vars("x", len(probe.ranges))
    rs = index_vars("r", len(probe.reduction_ranges))
    try:
        for _, body in probe.stages:
            body(counter, xs, rs)
    except Exception:  # noqa: BLE001 -- a body that needs real values: run it and see
        return set()
    return set(counter.counts)


def _skip_reason(backend: KernelBackend, probe: Probe, device: str) -> str:
    caps = backend.caps
    if probe.op in caps.unsupported:
        return f"declared unsupported: {caps.unsupported[probe.op]}"
    needed = sorted(probe_ops(probe) & set(caps.unsupported)) if caps.unsupported else []
    if needed:
        return f"declared unsupported: the case also needs {', '.join(needed)}"
    if probe.dtype not in caps.dtypes:
        return f"dtype {dtype_name(probe.dtype)} not in caps.dtypes"
    if device not in caps.devices:
        return f"device {device!r} not in caps.devices"
    return ""


def _record(report: BackendReport, results: Iterable[ProbeResult]) -> None:
    for r in results:
        key = (r.probe.op, dtype_name(r.probe.dtype))
        cell = report.cells.setdefault(key, Cell(key[0], key[1], r.probe.category))
        cell.results.append(r)


def _partition(
    report: BackendReport, backend: KernelBackend, probes: Sequence[Probe], device: str
) -> list[Probe]:
    runnable = []
    missing = set(report.static.missing) if report.static else set()
    for probe in probes:
        reason = _skip_reason(backend, probe, device)
        if reason:
            _record(report, [ProbeResult(probe, "skipped", reason)])
        elif probe.op in missing:
            msg = f"op {probe.op!r} is not defined by {report.static.ops_cls}"  # type: ignore[union-attr]
            _record(report, [ProbeResult(probe, "failed", msg)])
        else:
            runnable.append(probe)
    return runnable


def run_backend(
    name: str,
    backend: KernelBackend,
    wrapper: WrapperBackend | None,
    selection: Selection,
    progress: Progress | None = None,
    device: str = "cpu",
    wrapper_missing: dict[str, dict[str, str]] | None = None,
) -> BackendReport:
    """Run the selected suite on one backend; `wrapper` None calls `backend.load` directly.

    Inputs are generated on the CPU and moved to `device`; table ops' eager oracle runs there too.
    `wrapper_missing` (from `wrappers.check_installed_wrappers`) goes into the static section.
    """
    start = time.perf_counter()
    static = check_static(backend.ops_cls, dict(backend.caps.unsupported))
    static.wrapper_missing = dict(wrapper_missing or {})
    report = BackendReport(name, wrapper.name if wrapper else None, static, device=device)
    token = ORACLE_DEVICE.set(device)
    try:
        probes = _partition(report, backend, all_probes(selection), device)
    finally:
        ORACLE_DEVICE.reset(token)
    session = Session(backend, wrapper, device)
    by_dtype: dict[torch.dtype, list[Probe]] = {}
    for probe in probes:
        if probe.category != "graph":
            by_dtype.setdefault(probe.dtype, []).append(probe)
    for dtype, group in by_dtype.items():
        t0 = time.perf_counter()
        results = _run_group(session, group, dtype_name(dtype))
        _record(report, results)
        failed = sum(r.status == "failed" for r in results)
        if progress is not None:
            progress(
                f"  {name} {dtype_name(dtype):<9} {len(results):4d} probes  {failed:3d} failed"
                f"  {time.perf_counter() - t0:6.2f}s  ({session.modules} modules so far)"
            )
        if selection.fail_fast and failed:
            break
    else:
        _run_graphs(report, backend, [p for p in probes if p.category == "graph"], progress)
    report.seconds = time.perf_counter() - start
    report.kernels, report.modules = session.kernels, session.modules
    return report


def _run_graphs(
    report: BackendReport,
    backend: KernelBackend,
    probes: Sequence[Probe],
    progress: Progress | None,
) -> None:
    """Graph cases compile through torch.compile, which finds the backend by its installed name."""
    name = installed_as(report.backend, backend)
    for probe in probes:
        if name is None:
            why = f"{report.backend!r} is not the installed backend of that name (torch.compile)"
            _record(report, [ProbeResult(probe, "skipped", why)])
            continue
        problems, seconds, fallbacks = run_graph_probe(probe, name, report.device)
        status: Status = "failed" if problems else "skipped" if fallbacks else "passed"
        why = "declared unsupported: " + "; ".join(fallbacks) if fallbacks else ""
        _record(report, [ProbeResult(probe, status, "\n".join(problems) or why)])
        if progress is not None:
            progress(f"  {report.backend} {probe.op:<28} {status:<7} {seconds:6.2f}s")


def _run_group(session: Session, probes: Sequence[Probe], tag: str) -> list[ProbeResult]:
    try:
        return run_probes(session, probes, tag)
    except Exception as exc:  # noqa: BLE001 -- a bug outside any one probe: report it on each
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return [ProbeResult(p, "failed", f"suite error: {text}") for p in probes]
