"""`polyduct conformance`: run the suite on one, several or every installed kernel backend."""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from polyduct.conformance.backends import resolve_backend
from polyduct.conformance.html import write_html
from polyduct.conformance.probe import dtype_name
from polyduct.conformance.report import (
    backend_text,
    summary_line,
    table_text,
    write_json,
    write_junit,
)
from polyduct.conformance.runner import BackendReport, Selection, run_backend, selected_cells
from polyduct.conformance.wrappers import check_installed_wrappers

CATEGORIES = (
    "math",
    "comparison",
    "bitwise",
    "dtype",
    "memory",
    "indexing",
    "reduction",
    "scan",
    "random",
    "other",
    "graph",
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the `conformance` subcommand on `subparsers` (from `polyduct.cli`)."""
    p = subparsers.add_parser("conformance", help="op-set conformance matrix of kernel backends")
    p.add_argument(
        "--backend",
        action="append",
        default=[],
        help="kernel backend to test: installed name or module:Class "
        "(repeatable; default: every installed one)",
    )
    p.add_argument(
        "--wrapper",
        default="python",
        help="wrapper backend running the kernels ('none': call backend.load directly)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="device the kernels and the eager oracle run on (cpu, cuda); inputs are made "
        "on the CPU with the CPU generator, then moved",
    )
    p.add_argument("--ops", help="regular expression selecting op names")
    p.add_argument("--dtypes", help="comma-separated dtype names (float32,int8,...)")
    p.add_argument(
        "--category",
        action="append",
        default=[],
        choices=CATEGORIES,
        help="op category to run (repeatable)",
    )
    p.add_argument("--fail-fast", action="store_true", help="stop a backend at its first failure")
    p.add_argument("--json", type=Path, help="write the results as JSON to this file")
    p.add_argument("--junit", type=Path, help="write JUnit XML to this file")
    p.add_argument("--html", type=Path, help="write the HTML matrix to this file")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every skipped cell and probe with its reason",
    )
    return p  # type: ignore[no-any-return]


def selection_from(args: argparse.Namespace) -> Selection:
    dtypes = tuple(d.strip() for d in (args.dtypes or "").split(",") if d.strip())
    return Selection(
        ops=args.ops, dtypes=dtypes, categories=tuple(args.category), fail_fast=args.fail_fast
    )


def selection_problem(selection: Selection) -> str:
    """Why `selection` is a mistake (a bad regex, an unknown dtype, no case at all), or ""."""
    if selection.ops is not None:
        try:
            re.compile(selection.ops)
        except re.error as exc:
            return f"--ops {selection.ops!r} is not a regular expression: {exc}"
    known = sorted({dtype_name(dtype) for _, dtype in selected_cells(Selection())})
    unknown = [d for d in selection.dtypes if d not in known]
    if unknown:
        return f"unknown dtype(s) {', '.join(unknown)}; the suite has: {', '.join(known)}"
    if not selected_cells(selection):
        return "the selection matches no case (check --ops, --dtypes and --category)"
    return ""


def _say(text: str) -> None:
    print(text, flush=True)


def run_named(
    name: str,
    wrapper_name: str,
    selection: Selection,
    device: str = "cpu",
    wrapper_missing: dict[str, dict[str, str]] | None = None,
) -> BackendReport:
    """Build backend `name` (installed, or `module:attr`) and the wrapper, and run the suite."""
    from polyduct.plugins import load

    plugins = load()
    try:
        name, backend = resolve_backend(name)
        wrapper = None if wrapper_name == "none" else plugins.wrapper_backend(wrapper_name)
    except Exception as exc:  # noqa: BLE001 -- any error of a backend under test is a result
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return BackendReport(name, wrapper_name, None, error=text, device=device)
    return run_backend(
        name, backend, wrapper, selection, _say, device=device, wrapper_missing=wrapper_missing
    )


def wrapper_findings() -> dict[str, dict[str, str]]:
    """Missing Wrapper IR line types of every installed wrapper (an error of the check itself too)."""
    try:
        return check_installed_wrappers()
    except Exception as exc:  # noqa: BLE001 -- reported in the static section, never fatal
        return {"<wrapper check>": {"<all>": f"{type(exc).__name__}: {exc}"}}


def run(args: argparse.Namespace) -> int:
    """Run the suite; exit status 1 on any failure (static, numeric or a backend that won't load)."""
    from polyduct.plugins import load

    names = args.backend or load().kernel_backends.names()
    selection = selection_from(args)
    if problem := selection_problem(selection):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    reports = []
    findings = wrapper_findings()
    for name in names:
        _say(f"running conformance on {name!r} ({args.device}) ...")
        reports.append(run_named(name, args.wrapper, selection, args.device, findings))
    for report in reports:
        _say("\n".join(backend_text(report, args.verbose)))
    for err in load().errors:
        _say(f"plugin load error: {err}")
    _say("")
    _say("\n".join(table_text(reports)))
    for path, writer in (
        (args.json, write_json),
        (args.junit, write_junit),
        (args.html, write_html),
    ):
        if path is not None:
            writer(reports, path)
            _say(f"wrote {path}")
    _say(summary_line(reports))
    failed = any(r.counts()["failed"] for r in reports)
    return 1 if failed or not reports else 0


def main(argv: list[str] | None = None) -> int:
    """`python -m polyduct.conformance.cli` without the main `polyduct` command."""
    parser = argparse.ArgumentParser(prog="polyduct")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
