"""Markdown tables from the suites' JSON (`python -m bench.report`), for docs/performance.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def runtime_table(doc: dict[str, Any]) -> str:
    """workload | size | variant | median ms | vs eager | vs inductor | note."""
    rows = [
        "| workload | size | variant | median ms | x vs eager | x vs inductor | note |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in doc["results"]:
        note = (r["error"] or "").replace("|", "/")[:90]
        rows.append(
            f"| {r['workload']} | {r['size']} | {r['variant']} | {_ms(r['median_s'])} | "
            f"{_x(r['vs_eager'])} | {_x(r['vs_inductor'])} | {note} |"
        )
    return "\n".join(rows)


def compile_table(rows: list[dict[str, Any]]) -> str:
    """workload | variant | cold s | warm s."""

    def fmt(r: dict[str, Any]) -> str:
        return f"{r['seconds']:.2f}" if "seconds" in r else f"error: {r['error'][:60]}"

    out = ["| workload | compiler | cold s | warm s |", "|---|---|---:|---:|"]
    out += [
        f"| {r['workload']} | {r['variant']} | {fmt(r['cold'])} | {fmt(r['warm'])} |" for r in rows
    ]
    return "\n".join(out)


def main() -> None:
    if (path := RESULTS / "runtime.json").exists():
        print(runtime_table(json.loads(path.read_text())), end="\n\n")
    if (path := RESULTS / "compile_time.json").exists():
        print(compile_table(json.loads(path.read_text())), end="\n\n")
    if (path := RESULTS / "instructions.json").exists():
        counts = json.loads(path.read_text())
        print("| graph/compiler | instructions |\n|---|---:|")
        for name, count in sorted(counts.items()):
            print(f"| {name} | {'failed' if count is None else f'{count:,}'} |")


if __name__ == "__main__":
    sys.exit(main())
