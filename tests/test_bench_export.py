"""The benchmark's torch.export variants: compiled once from the first call's inputs, checked
against eager by the harness, dynamic sizes kept dynamic, training workloads skipped by name."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not installed

from bench.runtime import Result, run_suite
from bench.variants import Variant, variants
from bench.workloads import by_name


def _run(workloads: list[str], chosen: list[Variant]) -> dict[tuple[str, str], Result]:
    results = run_suite(
        by_name(workloads), ["small"], chosen, "cpu", {"rounds": 2, "budget_s": 0.2}, lambda r: None
    )
    return {(r.workload, r.variant): r for r in results}


def test_export_variants_run_check_and_skip() -> None:
    chosen = [
        v
        for v in variants("cpu", ["reference"], export=True)
        if v.name in ("eager", "polyduct-reference-export", "inductor-export")
    ]
    assert [v.name for v in chosen] == ["eager", "inductor-export", "polyduct-reference-export"]
    # the skip logic of inductor-export without running Inductor
    static = Variant("static-export", chosen[1].wrap, forward_only=True, static_only=True)
    chosen = [v for v in chosen if v.name != "inductor-export"] + [static]
    got = _run(["softmax", "dynamic_chain", "transformer_fwd_bwd"], chosen)
    for workload in ("softmax", "dynamic_chain"):  # the harness compared each with eager
        result = got[(workload, "polyduct-reference-export")]
        assert result.error is None and result.median_s is not None, result
    assert got[("dynamic_chain", "static-export")].skipped == "compiled for the example sizes only"
    trains = got[("transformer_fwd_bwd", "polyduct-reference-export")]
    assert trains.median_s is None and "trains" in (trains.skipped or "")
