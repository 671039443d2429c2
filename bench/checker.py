"""Compare measured instruction counts with bench/expected_instructions.json.

Each benchmark has an expected `count` and a relative `tolerance`. A measurement within the
tolerance is PASS, below it WIN, above it REGRESSION; a benchmark with no expectation is NEW, one
that was not measured is MISSING. Any WIN, REGRESSION or NEW asks to update *all* changed results
at once (`python -m bench check --update` takes the saved counts, `python -m bench instructions
--update` measures again), so the file never mixes old and new baselines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXPECTED = Path(__file__).with_name("expected_instructions.json")
DEFAULT_TOLERANCE = 0.02


@dataclass(frozen=True)
class Verdict:
    """The outcome for one benchmark; `change` is (actual - expected) / expected."""

    name: str
    status: str
    actual: int | None
    expected: int | None
    change: float | None

    def line(self) -> str:
        actual = "-" if self.actual is None else f"{self.actual:,}"
        change = "" if self.change is None else f" ({self.change:+.2%} vs {self.expected:,})"
        return f"{self.status:<10} {self.name:<32} {actual}{change}"


def verdict(name: str, actual: int | None, expected: Mapping[str, Any] | None) -> Verdict:
    """PASS / WIN / REGRESSION / NEW / MISSING for one benchmark."""
    if actual is None:
        count = None if expected is None else int(expected["count"])
        return Verdict(name, "MISSING", None, count, None)
    if expected is None:
        return Verdict(name, "NEW", actual, None, None)
    count = int(expected["count"])
    tolerance = float(expected.get("tolerance", DEFAULT_TOLERANCE))
    change = (actual - count) / count
    status = "PASS" if abs(change) <= tolerance else ("WIN" if change < 0 else "REGRESSION")
    return Verdict(name, status, actual, count, change)


def check(
    actual: Mapping[str, int | None], expected: Mapping[str, Mapping[str, Any]]
) -> list[Verdict]:
    """Verdicts for every benchmark measured or expected, sorted by name."""
    names = sorted(set(actual) | set(expected))
    return [verdict(n, actual.get(n), expected.get(n)) for n in names]


def report(verdicts: list[Verdict]) -> str:
    """One line per benchmark, then what to do about significant changes."""
    lines = [v.line() for v in verdicts]
    changed = [v for v in verdicts if v.status in ("WIN", "REGRESSION", "NEW")]
    if changed:
        names = ", ".join(v.name for v in changed)
        lines.append(
            f"{len(changed)} result(s) changed significantly or are new ({names}): if intended, "
            "update all expected results at once with `python -m bench check --update` (the saved "
            "counts) or `python -m bench instructions --update` (measured again)."
        )
    return "\n".join(lines)


def failed(verdicts: list[Verdict]) -> bool:
    """True when a regression (or a benchmark that could not be measured) needs attention."""
    return any(v.status in ("REGRESSION", "MISSING") for v in verdicts)


def load_expected(path: Path = EXPECTED) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    data: dict[str, dict[str, Any]] = json.loads(path.read_text())["benchmarks"]
    return data


def updated(
    actual: Mapping[str, int | None], expected: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The expected-results document with every measured count replaced by the actual one."""
    out: dict[str, dict[str, Any]] = {k: dict(v) for k, v in expected.items()}
    for name, count in actual.items():
        if count is not None:
            tolerance = out.get(name, {}).get("tolerance", DEFAULT_TOLERANCE)
            out[name] = {"count": count, "tolerance": tolerance}
    return {"benchmarks": dict(sorted(out.items()))}
