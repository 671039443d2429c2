"""The GPU job's cold-compile table: what each backend adds to the shared Dynamo floor."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not installed

from bench.gpu import _cold_table


def test_cold_table_subtracts_the_dynamo_floor() -> None:
    rows = [
        {"workload": "softmax", "dynamo-aot": 0.25, "inductor": 1.25, "polyduct": 0.75,
         "polyduct-notune": 0.45},
        {"workload": "chain30", "inductor": 7.0},  # a compiler that did not finish
    ]
    head, rule, softmax, chain = _cold_table(rows).splitlines()
    assert head.count("|") == rule.count("|")
    cells = [c.strip() for c in softmax.split("|")[1:-1]]
    # first calls, ratios of first calls, backend seconds, ratios of backend seconds
    assert cells == ["softmax", "0.25", "1.25", "0.75", "0.45", "0.60", "0.36",
                     "1.00", "0.50", "0.20", "0.50", "0.20"]
    assert chain.split("|")[3].strip() == "7.00" and "-" in chain.split("|")[4]
