"""The model suite's dashboard: docs/models.md (from the guide's fixed text and one section per
results file bench/results/models-*.json) and a PNG per device, docs/img/models-<device>.png."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "models.md"
GUIDE = Path(__file__).with_name("models_guide.md")
CHECKS = ("forward", "train", "dynamic-auto", "dynamic-true", "export")
Rows = list[dict[str, Any]]


def geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def _fmt(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _find(rows: Rows, model: str, variant: str, check: str) -> dict[str, Any] | None:
    for row in rows:
        if (row["model"], row["variant"], row["check"]) == (model, variant, check):
            return row
    return None


def _models(rows: Rows) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in rows))


def pass_rate(rows: Rows, variant: str, check: str) -> tuple[int, int] | None:
    """(passed, counted) of one check of one variant over the models that ran it; a model whose
    worker crashed or timed out before the check counts as a failure, one whose run was stopped
    (a `stopped` row) does not count. None when no model ran the check for this variant."""
    models = _models(rows)
    died = {r["model"] for r in rows if r["check"] == "worker"}
    found = {m: _find(rows, m, variant, check) for m in models}
    if not any(found.values()):
        return None
    counted = [m for m in models if found[m] or m in died]
    return sum(1 for m in counted if (found[m] or {}).get("ok")), len(counted)


def speedups(rows: Rows, variant: str, base: str, check: str) -> dict[str, float]:
    """Per model: base's ms per call / variant's (both timed in one process)."""
    out = {}
    for model in _models(rows):
        mine, theirs = _find(rows, model, variant, check), _find(rows, model, base, check)
        if mine and theirs:
            out[model] = theirs["median_ms"] / mine["median_ms"]
    return out


def cold(rows: Rows, model: str, variant: str) -> float | None:
    row = _find(rows, model, variant, "cold")
    return row.get("seconds") if row else None


def peak_ratio(rows: Rows, model: str, variant: str, device: str) -> float | None:
    """Peak memory relative to eager: CUDA from the timing run's allocator peak; CPU from the
    peak RSS of the cold first-call process."""
    check, key = ("time-forward", "peak_bytes") if device != "cpu" else ("cold", "peak_rss_kb")
    mine, eager = _find(rows, model, variant, check), _find(rows, model, "eager", check)
    if not (mine and eager and mine.get(key) and eager.get(key)):
        return None
    return float(mine[key]) / float(eager[key])


def summary_table(doc: dict[str, Any]) -> str:
    rows, device = doc["rows"], doc["meta"]["device"]
    head = (
        "| variant | forward | training | dynamic (auto) | dynamic=True | export | "
        "speedup vs eager (fwd / train) | vs Inductor (fwd / train) | cold first call s | "
        "compile share s | peak memory vs eager |\n|---|" + "---|" * 10 + "\n"
    )
    lines = []
    for variant in doc["meta"]["variants"]:
        rates = []
        for check in CHECKS:
            rate = pass_rate(rows, variant, check)
            rates.append("-" if rate is None else f"{rate[0]}/{rate[1]}")
        speed = []
        for base in ("eager", "inductor"):
            fwd = geomean(list(speedups(rows, variant, base, "time-forward").values()))
            train = geomean(list(speedups(rows, variant, base, "time-train").values()))
            speed.append(f"{_fmt(fwd)}x / {_fmt(train)}x")
        models = _models(rows)
        colds = [c for m in models if (c := cold(rows, m, variant)) is not None]
        shares = [
            c - a
            for m in models
            if (c := cold(rows, m, variant)) is not None
            and (a := cold(rows, m, "aot_eager")) is not None
        ]
        peaks = [p for m in models if (p := peak_ratio(rows, m, variant, device)) is not None]
        mean_cold = statistics.fmean(colds) if colds else None
        mean_share = statistics.fmean(shares) if shares and variant != "eager" else None
        cells = [variant, *rates, *speed, _fmt(mean_cold, ".1f"), _fmt(mean_share, ".1f")]
        cells.append(_fmt(geomean(peaks), ".2f", "x"))
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def _mark(row: dict[str, Any] | None) -> str:
    return "·" if row is None else ("ok" if row["ok"] else "**F**")


def model_table(doc: dict[str, Any]) -> str:
    """Per model: checks of each compiled variant (forward/train/dyn-auto/dyn-true/export),
    forward ms of every variant, cold first call of every variant."""
    rows, variants = doc["rows"], doc["meta"]["variants"]
    compiled = [v for v in variants if v != "eager"]
    head = ["model"] + [f"{v} checks" for v in compiled]
    head += [f"{v} fwd ms" for v in variants] + [f"{v} train ms" for v in variants]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for model in _models(rows):
        cells = [model]
        for v in compiled:
            cells.append(" ".join(_mark(_find(rows, model, v, c)) for c in CHECKS))
        for check in ("time-forward", "time-train"):
            for v in variants:
                row = _find(rows, model, v, check)
                cells.append(_fmt(row["median_ms"] if row else None, ".2f"))
        lines.append("| " + " | ".join(cells) + " |")
    legend = (
        "Checks, in order: forward, training, dynamic (automatic), dynamic=True, export; "
        "ok passed, **F** failed (see below), · not run.\n\n"
    )
    return legend + "\n".join(lines) + "\n"


def cold_table(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    variants = list(dict.fromkeys(r["variant"] for r in rows if r["check"] == "cold"))
    if not variants:
        return "No cold first calls were measured in this run.\n"
    lines = ["| model | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for model in _models(rows):
        if _find(rows, model, variants[0], "cold") is None:
            continue
        cells = []
        for v in variants:
            row = _find(rows, model, v, "cold") or {}
            rss = row.get("peak_rss_kb")
            mem = f" ({rss / 1024:.0f} MB)" if rss else ""
            cells.append(f"{row['seconds']:.1f}{mem}" if "seconds" in row else "error")
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def failures(doc: dict[str, Any]) -> str:
    bad = [r for r in doc["rows"] if r.get("ok") is False or r.get("error")]
    if not bad:
        return "None.\n"
    lines = []
    for r in bad:
        error = str(r["error"]).replace("|", "\\|").replace("\n", " ")[:240]
        lines.append(f"- `{r['model']}` {r['variant']} {r['check']}: {error}")
    return "\n".join(lines) + "\n"


def noise(doc: dict[str, Any]) -> str:
    meta = doc["meta"]
    spreads = [r["spread"] for r in doc["rows"] if "spread" in r]
    load = [tuple(round(x, 1) for x in meta.get(k, ())) for k in ("loadavg_start", "loadavg_end")]
    median_spread = _fmt(statistics.median(spreads) * 100 if spreads else None, ".0f", "%")
    return (
        f"torch {meta['torch']}, transformers {meta['transformers']}, {meta['device']} "
        f"({meta['device_name']}), {meta['dtype']}, {meta['threads']} threads, "
        f"{meta['cpus']} CPUs; suite wall time {meta.get('wall_s', 0) / 60:.0f} min. "
        f"Machine noise: load average (1, 5, 15 min) {load[0]} at start, {load[1]} at end; "
        f"median spread of a variant's timing samples (max - min) / median: {median_spread}."
        + (f" {meta['note']}" if meta.get("note") else "")
        + "\n"
    )


def section(path: Path) -> str:
    doc = json.loads(path.read_text())
    title = path.stem.removeprefix("models-")
    return (
        f"## Results: {title}\n\n{noise(doc)}\n### Summary\n\n{summary_table(doc)}\n"
        f"### Per model\n\n{model_table(doc)}\n### Cold first calls (s, peak RSS)\n\n"
        f"{cold_table(doc)}\n### Failures\n\n{failures(doc)}"
    )


def write_report() -> None:
    from bench.models_plot import plot_models

    files = sorted(RESULTS.glob("models-*.json"))
    parts = [GUIDE.read_text()]
    for path in files:
        doc = json.loads(path.read_text())
        png = ROOT / "docs" / "img" / f"{path.stem}.png"
        plot_models(doc, png)
        parts.append(section(path) + f"\n![{path.stem}](img/{png.name})\n")
    DOC.write_text("\n".join(parts))
    print(f"wrote {DOC} from {[p.name for p in files]}")
