"""The instruction-count checker on a tiny fixture: a deliberately slowed lowering is a REGRESSION.

Counts here are Python line events (deterministic, no valgrind), standing in for callgrind's Ir
counts; the checker logic is the same one `python -m bench instructions` uses.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not installed

from bench.checker import check, failed, report, updated
from bench.instructions import parse_totals

OPS = [("add", "x", "y"), ("mul", "t0", "z"), ("relu", "t1", None)] * 20


def lower(ops: list[tuple[str, str, str | None]]) -> list[str]:
    """A toy lowering: each op to one line of code."""
    return [f"t{i} = {op}({a}{', ' + b if b else ''})" for i, (op, a, b) in enumerate(ops)]


def lower_slowed(ops: list[tuple[str, str, str | None]]) -> list[str]:
    """The same lowering with a deliberate quadratic re-scan per op."""
    out = []
    for i, (op, a, b) in enumerate(ops):
        _ = [seen for seen in ops[:i] if seen[0] == op]  # the regression under test
        out.append(f"t{i} = {op}({a}{', ' + b if b else ''})")
    return out


def count_lines(fn: Callable[[], Any]) -> int:
    """Line events executed by `fn` (deterministic across runs)."""
    events = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal events
        if event == "line":
            events += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return events


def baseline() -> dict[str, dict[str, Any]]:
    return {"lower/toy": {"count": count_lines(lambda: lower(OPS)), "tolerance": 0.02}}


def test_unchanged_lowering_passes() -> None:
    (v,) = check({"lower/toy": count_lines(lambda: lower(OPS))}, baseline())
    assert v.status == "PASS" and v.change == 0.0
    assert not failed([v])


def test_slowed_lowering_is_a_regression() -> None:
    (v,) = check({"lower/toy": count_lines(lambda: lower_slowed(OPS))}, baseline())
    assert v.status == "REGRESSION" and v.change is not None and v.change > 0.02
    text = report([v])
    assert "REGRESSION" in text and f"{v.actual:,}" in text and "%" in text
    assert "update all expected results" in text and "lower/toy" in text
    assert failed([v])


def test_faster_lowering_is_a_win_and_asks_for_an_update() -> None:
    expected = {"lower/toy": {"count": count_lines(lambda: lower_slowed(OPS)), "tolerance": 0.02}}
    (v,) = check({"lower/toy": count_lines(lambda: lower(OPS))}, expected)
    assert v.status == "WIN" and not failed([v])
    assert "update all expected results" in report([v])


def test_new_and_missing_benchmarks() -> None:
    verdicts = check({"a": 10, "b": None}, {"b": {"count": 5, "tolerance": 0.1}})
    assert [(v.name, v.status) for v in verdicts] == [("a", "NEW"), ("b", "MISSING")]
    assert failed(verdicts)


def test_update_replaces_every_measured_count_and_keeps_tolerances() -> None:
    doc = updated({"a": 12, "b": None}, {"a": {"count": 10, "tolerance": 0.05}, "b": {"count": 3}})
    assert doc == {"benchmarks": {"a": {"count": 12, "tolerance": 0.05}, "b": {"count": 3}}}


def test_parse_callgrind_totals() -> None:
    text = "version: 1\ncreator: callgrind\nevents: Ir\nfl=(1) x.c\nfn=(1) f\n3 5\ntotals: 12345\n"
    assert parse_totals(text) == 12345
    assert parse_totals("events: Ir\nsummary: 0\nfn=(1) f\n3 5\ntotals: 586\n") == 586
    assert parse_totals("events: Ir\nsummary: 77\n") == 77


def test_instruction_table_ratio_and_missing() -> None:
    from bench.report import instruction_table

    text = instruction_table(
        {"g/polyduct": 100, "g/inductor": 2500, "h/polyduct": None, "h/inductor": 7}
    )
    assert "| g | 100 | 2,500 | 1/25.0 |" in text
    assert "| h | MISSING | 7 | - |" in text


def test_ratio_table_marks_errors() -> None:
    from bench.report import ratio_table

    def row(variant: str, vs_ind: float | None, error: str | None = None) -> dict[str, Any]:
        return {
            "workload": "w",
            "size": "small",
            "variant": variant,
            "median_s": 0.002,
            "vs_eager": 1.0,
            "vs_inductor": vs_ind,
            "error": error,
        }

    doc = {
        "results": [
            row("eager", 0.5),
            row("inductor", 1.0),
            row("polyduct-cpp", 2.0),
            row("polyduct-halide", None, "boom"),
            {**row("polyduct-triton", None), "skipped": "not run above size small on cpu"},
        ]
    }
    text = ratio_table(doc)
    assert "| w | small | 2.000 | 2.00 | err | skip |" in text
