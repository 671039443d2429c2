"""The GPU job's cold-compile table: what each backend adds to the shared Dynamo floor."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not installed

from bench.gpu_cold import _cold_table


def test_cold_table_compares_compile_seconds_with_inductors() -> None:
    rows = [
        {"workload": "softmax", "dtype": "float32", "dynamo-aot": 0.25, "inductor": 1.25, "polyduct": 0.75,
         "polyduct-notune": 0.45, "inductor_compile": 1.0, "polyduct_compile": 0.5,
         "polyduct-notune_compile": 0.2},
        {"workload": "chain30", "dtype": "bfloat16", "inductor": 7.0, "inductor_compile": 6.0},  # polyduct failed
    ]
    head, rule, softmax, chain = _cold_table(rows).splitlines()
    assert head.count("|") == rule.count("|")
    cells = [c.strip() for c in softmax.split("|")[1:-1]]
    # first calls, compile seconds, compile ratios
    assert cells == ["softmax", "float32", "0.25", "1.25", "0.75", "0.45", "1.00", "0.50", "0.20",
                     "0.50", "0.20"]
    cells = [c.strip() for c in chain.split("|")[1:-1]]
    assert cells == ["chain30", "bfloat16", "-", "7.00", "-", "-", "6.00", "-", "-", "-", "-"]


def test_cold_compile_runs_round_robin_and_takes_medians(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import gpu_cold as gpu

    samples = iter([1.0, 5.0, 3.0, 2.0, 9.0, 4.0])
    calls: list[str] = []

    def run(name: str, dtype: str, variant: str, profile: Path | None) -> dict[str, Any]:
        calls.append(variant)
        if variant == "inductor":
            return {"error": "RuntimeError: no GPU"}
        seconds = next(samples)
        # the backend compiled for a tenth of its first call, the rest ran the graph
        phases = {"compile_graph": seconds / 10, "launch": 0.5, "rest": seconds * 0.9 - 0.5}
        phases = phases if variant == "polyduct" else {}  # dynamo-aot: no backend phases
        return {"seconds": seconds, "launchers": {"torch": 1}, "phases": phases, "dynamo": {}}

    monkeypatch.setattr(gpu, "_cold_run", run)
    monkeypatch.setattr(gpu, "WORKLOADS", {"softmax": gpu.WORKLOADS["softmax"]})
    (row,) = gpu.cold_compile(tmp_path, compilers=("dynamo-aot", "polyduct", "inductor"),
                              extra=(), repeats=3)
    assert calls == ["dynamo-aot", "polyduct", "inductor"] * 3
    assert row["dynamo-aot_runs"] == [1.0, 3.0, 9.0] and row["dynamo-aot"] == 3.0
    assert row["polyduct_runs"] == [5.0, 2.0, 4.0] and row["polyduct"] == 4.0
    assert row["polyduct_compile_runs"] == [0.5, 0.2, 0.4] and row["polyduct_compile"] == 0.4
    assert row["dynamo-aot_compile"] is None
    assert len(row["polyduct_phases"]) == 3
    assert row["inductor"] is None and row["inductor_error"] == "RuntimeError: no GPU"
    assert (tmp_path / "gpu_cold_compile.md").read_text() == _cold_table([row])


def test_cold_compile_keeps_finished_rows_when_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is written after every workload: a run stopped in its second workload (a
    device-time limit) leaves the first one's row on disk."""
    from bench import gpu_cold as gpu

    def run(name: str, dtype: str, variant: str, profile: Path | None) -> dict[str, Any]:
        if name == "rmsnorm":
            raise TimeoutError("device time is up")
        return {"seconds": 1.0, "launchers": {}, "phases": {"compile_graph": 0.1}, "dynamo": {}}

    monkeypatch.setattr(gpu, "_cold_run", run)
    monkeypatch.setattr(gpu, "WORKLOADS", {n: gpu.WORKLOADS[n] for n in ("softmax", "rmsnorm")})
    with pytest.raises(TimeoutError):
        gpu.cold_compile(tmp_path, compilers=("polyduct",), extra=())
    (row,) = json.loads((tmp_path / "gpu_cold_compile.json").read_text())
    assert row["workload"] == "softmax" and row["polyduct_compile"] == 0.1


def test_launch_counts_read_only_polyduct_triton_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from bench import gpu

    module = types.ModuleType("polyduct_triton_k_fake")
    ahead, here = types.SimpleNamespace(via="torch", ahead=True), types.SimpleNamespace(
        via="triton (scratch memory)", ahead=False)
    runtime = types.SimpleNamespace(
        facts=types.SimpleNamespace(kind="pointwise"), configs=lambda xp, rp: [(1024, 1, 4)],
        best={("cuda", 8, 1, False): (1024, 1, 4)}, compiled={"a": ahead, "b": here})
    module.__dict__.update(NAME="k", RUNTIME=runtime)
    for name in [n for n in sys.modules if n.startswith("polyduct_triton_k_")]:
        monkeypatch.delitem(sys.modules, name)  # kernels other tests in this process loaded
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # torch's op namespaces (in sys.modules too) answer getattr for any name: not counted
    assert gpu._launch_paths() == {"torch": 1, "compiled by workers": 1,
                                   "triton (scratch memory)": 1}
    assert gpu._tuned_configs() == [{"kernel": "k", "kind": "pointwise", "xnumel_pow2": 8,
                                     "rnumel_pow2": 1, "candidates": [(1024, 1, 4)],
                                     "chosen": (1024, 1, 4)}]


def test_phases_are_exclusive_of_traced_callees() -> None:
    import time

    from bench.phases import Tracer, compile_seconds

    tracer = Tracer()
    inner = tracer.wrap("inner", lambda: time.sleep(0.02))

    def outer() -> None:
        time.sleep(0.01)
        inner()
        inner()

    tracer.wrap("outer", outer)()
    assert tracer.calls == {"inner": 2, "outer": 1}
    assert 0.04 <= tracer.seconds["inner"] < 0.2
    assert 0.01 <= tracer.seconds["outer"] < 0.04  # its callees' 0.04 s are theirs
    assert tracer.wrap("inner", inner) is inner  # traced once
    result = {"phases": {"compile_graph": 0.25, "wait for compile worker": 0.5, "launch": 1.0,
                         "rest": 2.0}}
    assert compile_seconds(result) == 0.75
    inductor = {"phases": {}, "dynamo": {"compile_fx_inner": 0.5, "build_guards": 0.1,
                                         "CachingAutotuner.benchmark_all_configs": 0.25}}
    assert compile_seconds(inductor) == 0.75
    assert compile_seconds({"phases": {}, "dynamo": {"build_guards": 0.1}}) is None


def test_phases_trace_a_first_call_through_the_triton_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`install` traces polyduct's compile and each kernel module's first-launch steps (here
    under Triton's interpreter, which launches through `_run` only); `report` adds up to the
    first call."""
    import os
    import time

    import torch

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the Triton interpreter runs CPU tensors (scripts/test.sh sets it)")
    from bench import phases
    from polyduct.pipeline import Compilation
    from polyduct_triton.backend import TritonBackend

    # restored after the test: install() wraps these for the rest of a process
    monkeypatch.setattr(Compilation, "compile_graph", Compilation.compile_graph)
    monkeypatch.setattr(TritonBackend, "codegen", TritonBackend.codegen)
    monkeypatch.setattr(TritonBackend, "load", TritonBackend.load)
    monkeypatch.setattr(phases, "TRACER", phases.Tracer())
    fn = torch.compile(lambda x: (x * 2).sin().sum(1), backend="polyduct",
                       options={"kernels": "triton"}, dynamic=False)
    phases.install()
    start = time.perf_counter()
    fn(torch.randn(16, 8))
    total = time.perf_counter() - start
    result = phases.report(total)
    assert result["calls"]["compile_graph"] == 1 and result["calls"]["triton load"] == 1
    assert result["calls"]["launch"] == result["calls"]["triton codegen"] >= 1
    assert sum(result["phases"].values()) == pytest.approx(total, abs=1e-3)
    assert "OutputGraph.call_user_compiler" in result["dynamo"]
    seconds = phases.compile_seconds(result)
    assert seconds is not None and 0 < seconds < total


def test_config_sweep_grid_spans_the_launchers_choices() -> None:
    """bench/triton_configs.py measures, per kernel kind, configs around the launcher's: every
    pointwise block that fits the problem, persistent rows at 2-16 elements per thread, and
    looped blocks only where the row is longer than them."""
    from bench.triton_configs import POINTWISE, grid

    assert grid("pointwise", 1 << 26, 1) == POINTWISE
    assert all(xb <= 256 for xb, _, _ in grid("pointwise", 200, 1))
    rows = grid("reduction", 16384, 4096)
    persistent = [c for c in rows if c[1] == 4096]
    assert (1, 4096, 16) in persistent and (1, 4096, 8) in persistent
    assert all(2 <= x * r // (32 * w) <= 16 for x, r, w in persistent)
    assert {r for _, r, _ in rows} == {4096, 1024, 2048}
    assert all(r == 1024 for _, r, _ in grid("reduction", 16384, 1000))


def test_timing_keeps_every_rounds_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """The speed table's medians come from per-round samples, whose spread it also reports."""
    from bench import timing

    times = iter([0.5, 0.1, 0.2, 0.9, 0.4, 0.3, 0.6, 0.7])  # a, b alternate round by round
    monkeypatch.setattr(timing, "inner_count", lambda fn, device: 1)
    monkeypatch.setattr(timing, "time_call", lambda fn, device, inner: next(times))
    samples = timing.interleaved_samples({"a": lambda: None, "b": lambda: None}, "cpu", 4, 60.0)
    assert samples == {"a": [0.5, 0.2, 0.4, 0.6], "b": [0.1, 0.9, 0.3, 0.7]}


def test_runtime_calls_never_fail_the_benchmark() -> None:
    """A call that raises inside the profiler gives an empty diagnostic, not an error."""
    from bench import timing

    def broken() -> None:
        raise RuntimeError("no device")

    assert timing.runtime_calls(broken) == {}
