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
        note = (r["error"] or r.get("skipped") or "").replace("|", "/")[:90]
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


def _ratio_cell(r: dict[str, Any]) -> str:
    if r.get("error"):
        return "err"
    if r.get("skipped"):
        return "skip"
    return _x(r.get("vs_inductor"))


def ratio_table(doc: dict[str, Any]) -> str:
    """One row per workload and size, one column per compiled variant: x vs Inductor."""
    res = doc["results"]
    variants = sorted({r["variant"] for r in res if r["variant"] not in ("eager", "inductor")})
    head = "| workload | size | inductor ms | " + " | ".join(variants) + " |"
    rows = [head, "|---|---|---:|" + "---:|" * len(variants)]
    keys = list(dict.fromkeys((r["workload"], r["size"]) for r in res))
    for work, size in keys:
        by = {r["variant"]: r for r in res if (r["workload"], r["size"]) == (work, size)}
        ind = by.get("inductor", {}).get("median_s")
        cells = [_ratio_cell(by.get(v, {})) for v in variants]
        rows.append(f"| {work} | {size} | {_ms(ind)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def compile_side_by_side(rows: list[dict[str, Any]]) -> str:
    """workload | per compiler: cold / warm seconds, Inductor first."""
    names = sorted({r["variant"] for r in rows}, key=lambda v: (v != "inductor", v))

    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return "-"
        parts = [f"{r[k]['seconds']:.1f}" if "seconds" in r[k] else "err" for k in ("cold", "warm")]
        return " / ".join(parts)

    out = ["| workload | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for work in dict.fromkeys(r["workload"] for r in rows):
        by = {r["variant"]: r for r in rows if r["workload"] == work}
        out.append(f"| {work} | " + " | ".join(cell(by.get(n)) for n in names) + " |")
    return "\n".join(out)


def instruction_table(counts: dict[str, int | None]) -> str:
    """graph | polyduct Ir | Inductor Ir | polyduct / Inductor (the compilers proper)."""
    out = ["| graph | polyduct Ir | Inductor Ir | polyduct / Inductor |", "|---|---:|---:|---:|"]
    for graph in dict.fromkeys(name.split("/")[0] for name in sorted(counts)):
        pd, ind = counts.get(f"{graph}/polyduct"), counts.get(f"{graph}/inductor")
        ratio = "-" if not pd or not ind else f"1/{ind / pd:.1f}"
        cells = ["MISSING" if c is None else f"{c:,}" for c in (pd, ind)]
        out.append(f"| {graph} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(out)


def main() -> None:
    if (path := RESULTS / "runtime.json").exists():
        doc = json.loads(path.read_text())
        print(ratio_table(doc), end="\n\n")
        print(runtime_table(doc), end="\n\n")
    if (path := RESULTS / "compile_time.json").exists():
        print(compile_side_by_side(json.loads(path.read_text())), end="\n\n")
    if (path := RESULTS / "instructions.json").exists():
        print(instruction_table(json.loads(path.read_text())))


if __name__ == "__main__":
    sys.exit(main())
