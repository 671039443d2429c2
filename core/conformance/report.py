"""Suite results as text (terminal), JSON and JUnit XML. The HTML matrix is in `html.py`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polyduct.conformance.batch import ProbeResult
from polyduct.conformance.runner import BackendReport

SOURCE_LINES = 40


def totals(reports: Sequence[BackendReport]) -> dict[str, int]:
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for report in reports:
        for key, value in report.counts().items():
            out[key] += value
    return out


def summary_line(reports: Sequence[BackendReport]) -> str:
    """`N passed, M failed, K skipped` over all backends (cells of the op x dtype matrix)."""
    t = totals(reports)
    return f"{t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped"


def failure_text(result: ProbeResult, with_source: bool = True) -> str:
    """One failed probe: op, dtype, variant, inputs' shapes/strides, mismatches, kernel source."""
    probe = result.probe
    lines = [f"FAILED {probe.id}  ({probe.category})", f"  buffers: {probe.describe_inputs()}"]
    lines += ["  " + line for line in result.message.rstrip().splitlines()]
    if with_source and result.source:
        src = result.source.splitlines()
        lines.append(f"  kernel source ({len(src)} lines):")
        lines += ["    | " + line for line in src[:SOURCE_LINES]]
        if len(src) > SOURCE_LINES:
            lines.append(f"    | ... {len(src) - SOURCE_LINES} more lines (see --json/--html)")
    return "\n".join(lines)


def backend_text(report: BackendReport, verbose: bool = False) -> list[str]:
    """Static findings, failures and skips of one backend."""
    wrapper = report.wrapper or "direct load"
    lines = [f"== {report.backend} (wrapper: {wrapper}, device: {report.device})"]
    if report.error:
        lines.append(f"  ERROR: {report.error}")
    if report.static is not None:
        lines += report.static.lines(verbose)
    for cell in sorted(report.cells.values(), key=lambda c: (c.op, c.dtype)):
        for result in cell.results:
            if result.status == "failed":
                lines.append(failure_text(result))
            elif result.status == "skipped" and verbose:
                lines.append(f"SKIPPED {result.probe.id}: {result.message}")
    skipped = {(c.op, c.reason) for c in report.cells.values() if c.status == "skipped"}
    if verbose:
        lines += [f"  skipped {op}: {reason}" for op, reason in sorted(skipped)]
    elif skipped:
        lines += _skip_summary(report)
    return lines


def _skip_summary(report: BackendReport) -> list[str]:
    """Skipped cells counted by kind of reason (the text before its first colon)."""
    kinds: dict[str, int] = {}
    for cell in report.cells.values():
        if cell.status == "skipped":
            kind = cell.reason.split(":")[0]
            for what in ("dtype", "device"):  # one count for all dtypes (devices) not in caps
                if kind.startswith(f"{what} ") and kind.endswith(f"caps.{what}s"):
                    kind = f"{what} not in caps.{what}s"
            kinds[kind] = kinds.get(kind, 0) + 1
    total = sum(kinds.values())
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return [f"  skipped {total} cells ({parts}); -v lists each with its reason"]


def table_text(reports: Sequence[BackendReport]) -> list[str]:
    """backend x passed / failed / skipped / time / modules / kernels."""
    head = f"{'backend':<16}{'passed':>8}{'failed':>8}{'skipped':>9}{'time':>9}"
    head += f"{'modules':>9}{'kernels':>9}"
    lines = [head]
    for r in reports:
        c = r.counts()
        lines.append(
            f"{r.backend:<16}{c['passed']:>8}{c['failed']:>8}{c['skipped']:>9}"
            f"{r.seconds:>8.1f}s{r.modules:>9}{r.kernels:>9}"
        )
    return lines


def _result_json(result: ProbeResult) -> dict[str, Any]:
    out: dict[str, Any] = {"variant": result.probe.variant, "status": result.status}
    if result.status != "passed":
        out["message"] = result.message
        out["buffers"] = result.probe.describe_inputs()
    if result.source:
        out["source"] = result.source
    return out


def to_json(reports: Sequence[BackendReport]) -> dict[str, Any]:
    """A JSON-able document: per backend its static report, timing, compiles and matrix cells."""
    backends = []
    for r in reports:
        static = r.static
        backends.append(
            {
                "backend": r.backend,
                "wrapper": r.wrapper,
                "device": r.device,
                "seconds": round(r.seconds, 3),
                "modules": r.modules,
                "kernels": r.kernels,
                "error": r.error,
                "counts": r.counts(),
                "static": None
                if static is None
                else {
                    "missing": static.missing,
                    "unsupported": static.unsupported,
                    "extra": static.extra,
                    "wrapper_missing": static.wrapper_missing,
                },
                "cells": [
                    {
                        "op": c.op,
                        "dtype": c.dtype,
                        "category": c.category,
                        "status": c.status,
                        "probes": [_result_json(x) for x in c.results],
                    }
                    for c in sorted(r.cells.values(), key=lambda c: (c.op, c.dtype))
                ],
            }
        )
    return {"summary": totals(reports), "backends": backends}


def write_json(reports: Sequence[BackendReport], path: Path) -> None:
    path.write_text(json.dumps(to_json(reports), indent=1) + "\n")


def write_junit(reports: Sequence[BackendReport], path: Path) -> None:
    """JUnit XML: one testsuite per backend, one testcase per op x dtype cell (+ static)."""
    root = ET.Element("testsuites")
    for r in reports:
        cells = [c.status for c in r.cells.values()]
        static_failed = r.static is not None and r.static.failures > 0
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"polyduct.conformance.{r.backend}",
            tests=str(len(cells) + 1 + bool(r.error)),  # the cells, `static`, and `load`
            failures=str(cells.count("failed") + static_failed),
            errors=str(int(bool(r.error))),
            skipped=str(cells.count("skipped")),
            time=f"{r.seconds:.3f}",
        )
        if r.error:
            load = ET.SubElement(suite, "testcase", classname=f"{r.backend}.load", name="load")
            ET.SubElement(load, "error", message=r.error.splitlines()[0][:200]).text = r.error
        static = ET.SubElement(suite, "testcase", classname=f"{r.backend}.static", name="static")
        if static_failed:
            ET.SubElement(static, "failure", message="static completeness").text = "\n".join(
                r.static.lines()  # type: ignore[union-attr]
            )
        for cell in sorted(r.cells.values(), key=lambda c: (c.op, c.dtype)):
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{r.backend}.{cell.category}",
                name=f"{cell.op}[{cell.dtype}]",
            )
            if cell.status == "failed":
                text = "\n\n".join(failure_text(x) for x in cell.results if x.status == "failed")
                ET.SubElement(
                    case, "failure", message=cell.reason.splitlines()[0][:200]
                ).text = text
            elif cell.status == "skipped":
                ET.SubElement(case, "skipped", message=cell.reason)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
