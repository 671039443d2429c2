"""The HTML report: per backend, an op x dtype matrix readable at a glance, then failure details."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from polyduct.conformance.inputs import ALL
from polyduct.conformance.probe import dtype_name
from polyduct.conformance.report import failure_text, summary_line
from polyduct.conformance.runner import BackendReport, Cell

DTYPES = [dtype_name(d) for d in ALL]
SHORT = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "bool",
}
STYLE = """
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table.m { border-collapse: collapse; }
table.m td, table.m th { border: 1px solid #ddd; padding: 1px 5px; text-align: center; }
table.m th.op, table.m td.op { text-align: left; font-family: monospace; }
td.passed { background: #3fb950; color: white; } td.failed { background: #e5534b; color: white; }
td.skipped { background: #bbb; color: #333; } td.na { background: #f6f6f6; }
tr.cat th { background: #eef; text-align: left; }
.summary { font-size: 15px; font-weight: bold; } .grid { display: flex; gap: 24px; flex-wrap: wrap; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 11px; }
"""
MARK = {"passed": "✓", "failed": "✗", "skipped": "–"}


def _cell(backend: str, cell: Cell | None) -> str:
    if cell is None:
        return '<td class="na"></td>'
    title = escape(cell.reason.splitlines()[0] if cell.reason else f"{len(cell.results)} probes")
    mark = MARK[cell.status]
    if cell.status == "failed":
        mark = (
            f'<a style="color:white" href="#{escape(backend)}-{escape(cell.op)}-{cell.dtype}">✗</a>'
        )
    return f'<td class="{cell.status}" title="{title}">{mark}</td>'


def _matrix(report: BackendReport, ops: list[tuple[str, str]]) -> str:
    head = "".join(f"<th>{SHORT[d]}</th>" for d in DTYPES)
    rows = [f'<table class="m"><tr><th class="op">op</th>{head}</tr>']
    current = ""
    for category, op in ops:
        if category != current:
            current = category
            rows.append(
                f'<tr class="cat"><th colspan="{len(DTYPES) + 1}">{escape(category)}</th></tr>'
            )
        cells = "".join(_cell(report.backend, report.cells.get((op, d))) for d in DTYPES)
        rows.append(f'<tr><td class="op">{escape(op)}</td>{cells}</tr>')
    rows.append("</table>")
    return "\n".join(rows)


def _split(ops: list[tuple[str, str]], parts: int) -> list[list[tuple[str, str]]]:
    size = -(-len(ops) // parts)
    return [ops[i : i + size] for i in range(0, len(ops), size)]


def _backend_section(report: BackendReport) -> str:
    c = report.counts()
    ops = sorted({(cell.category, cell.op) for cell in report.cells.values()})
    parts = [
        f'<h2 id="{escape(report.backend)}">{escape(report.backend)}</h2>',
        (
            f"<p>wrapper: {escape(report.wrapper or 'direct load')} · {c['passed']} passed, "
            f"{c['failed']} failed, {c['skipped']} skipped · {report.seconds:.1f}s · "
            f"{report.modules} modules / {report.kernels} kernels compiled</p>"
        ),
    ]
    if report.static is not None:
        parts.append("<pre>" + escape("\n".join(report.static.lines())) + "</pre>")
    parts.append('<div class="grid">')
    parts += [_matrix(report, chunk) for chunk in _split(ops, 4) if chunk]
    parts.append("</div>")
    for cell in sorted(report.cells.values(), key=lambda c: (c.op, c.dtype)):
        if cell.status == "failed":
            anchor = f"{escape(report.backend)}-{escape(cell.op)}-{cell.dtype}"
            text = "\n\n".join(failure_text(r) for r in cell.results if r.status == "failed")
            parts.append(f'<h3 id="{anchor}">{escape(cell.op)} [{cell.dtype}]</h3>')
            parts.append(f"<pre>{escape(text)}</pre>")
    return "\n".join(parts)


def render_html(reports: Sequence[BackendReport]) -> str:
    """A self-contained HTML page (no scripts, no external assets)."""
    body = "\n".join(_backend_section(r) for r in reports)
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>polyduct conformance</title>'
        f"<style>{STYLE}</style></head><body><h1>polyduct conformance</h1>"
        f'<p class="summary">{escape(summary_line(reports))}</p>{body}</body></html>\n'
    )


def write_html(reports: Sequence[BackendReport], path: Path) -> None:
    path.write_text(render_html(reports), encoding="utf-8")
