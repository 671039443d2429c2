"""The GPU job's cold-compile table: what each backend adds to the shared Dynamo floor."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

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


def test_cold_compile_runs_round_robin_and_takes_medians(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import gpu

    samples = iter([1.0, 5.0, 3.0, 2.0, 9.0, 4.0])
    calls: list[str] = []

    def run(name: str, dtype: str, variant: str, profile: Path | None) -> dict[str, Any]:
        calls.append(variant)
        if variant == "inductor":
            return {"error": "RuntimeError: no GPU"}
        return {"seconds": next(samples), "launchers": {"torch": 1}}

    monkeypatch.setattr(gpu, "_cold_run", run)
    monkeypatch.setattr(gpu, "WORKLOADS", {"softmax": gpu.WORKLOADS["softmax"]})
    (row,) = gpu.cold_compile(tmp_path, compilers=("dynamo-aot", "polyduct", "inductor"),
                              extra=(), repeats=3)
    assert calls == ["dynamo-aot", "polyduct", "inductor"] * 3
    assert row["dynamo-aot_runs"] == [1.0, 3.0, 9.0] and row["dynamo-aot"] == 3.0
    assert row["polyduct_runs"] == [5.0, 2.0, 4.0] and row["polyduct"] == 4.0
    assert row["inductor"] is None and row["inductor_error"] == "RuntimeError: no GPU"
    assert (tmp_path / "gpu_cold_compile.md").read_text() == _cold_table([row])


def test_launch_counts_read_only_polyduct_triton_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from bench import gpu

    module = types.ModuleType("polyduct_triton_k_fake")
    ahead, here = types.SimpleNamespace(via="torch", ahead=True), types.SimpleNamespace(
        via="triton (scratch memory)", ahead=False)
    module.__dict__.update(NAME="k", KIND="pointwise", _configs=lambda xp, rp: [(1024, 1, 4)],
                           _BEST={("cuda", 8, 1, False): (1024, 1, 4)},
                           _COMPILED={"a": ahead, "b": here})
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # torch's op namespaces (in sys.modules too) answer getattr for any name: not counted
    assert gpu._launch_paths() == {"torch": 1, "compiled by workers": 1,
                                   "triton (scratch memory)": 1}
    assert gpu._tuned_configs() == [{"kernel": "k", "kind": "pointwise", "xnumel_pow2": 8,
                                     "rnumel_pow2": 1, "candidates": [(1024, 1, 4)],
                                     "chosen": (1024, 1, 4)}]
