"""The GPU job's cold first calls: each workload's first call, per compiler, in a fresh process on
empty caches (`python -m bench.gpu --cold`), and the compile time inside it (`bench.phases`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench import phases
from bench.gpu import WORKLOADS, Block, _compiled, _inputs, _launch_paths, settle_workers


def _block_step(variant: str) -> Callable[[], None]:
    """A training step (forward and backward graphs: 30 polyduct kernels) of a transformer block of
    width 1024 on 8 x 512 tokens: what a first call costs for a real model's graphs."""
    torch.manual_seed(0)
    block = Block(1024, 16).cuda()
    x = torch.randn(8, 512, 1024, device="cuda")
    compiled = block if variant == "eager" else _compiled(block, variant)

    def step() -> None:
        compiled(x).square().mean().backward()

    return step


COLD_EXTRA = ("block_fwd_bwd",)  # cold-only workloads beside WORKLOADS


def _cold_worker(name: str, dtype: str, variant: str) -> None:
    """In a fresh process on empty caches: CUDA and the compiler's modules made ready on an
    unrelated tiny graph, then the first call of `name` timed; prints one JSON line."""
    import os

    if name in COLD_EXTRA:
        first_call = _block_step(variant)
    else:
        fn, _ = WORKLOADS[name]
        args = _inputs(name, 16384, 4096, getattr(torch, dtype))
        compiled = _compiled(fn, variant)
        first_call = lambda: compiled(*args)
    warm = _compiled(lambda t: t * 2 + 1, variant)  # imports, CUDA context, compile workers
    warm(torch.ones(8, device="cuda"))
    torch.cuda.synchronize()
    # Both compilers' pools of compile workers ready before the timed call (each compiles in its
    # own process while its pool starts): what a long-running program sees.
    if variant.startswith("polyduct"):
        from polyduct_triton import precompile

        # polyduct-serial runs with no workers (its compile_workers option is 0, from the env)
        precompile.start(timeout=120, workers=0 if variant == "polyduct-serial" else None)
    elif variant == "inductor":
        from torch._inductor.async_compile import AsyncCompile

        getattr(AsyncCompile, "wait_pool_ready", lambda timeout: None)(timeout=120)
    phases.install()
    profile = os.environ.get("POLYDUCT_COLD_PROFILE")
    if profile:  # where the first call's time goes: cumulative times of the top 45 functions
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    first_call()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if profile:
        profiler.disable()
        with open(f"{profile}/cold_{name}_{variant}.txt", "w") as stream:
            pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(45)
    report = phases.report(seconds)
    # After the first call: polyduct's tuning candidates still compiling in its workers (until
    # they have all ended: `background_s`), then the call that benchmarks them (`tuning_call_s`).
    background = settle_workers()
    start = time.perf_counter()
    first_call()
    torch.cuda.synchronize()
    print(json.dumps({"seconds": seconds, "pid": os.getpid(), "launchers": _launch_paths(),
                      "background_s": background, "tuning_call_s": time.perf_counter() - start,
                      **report}), flush=True)


# polyduct-serial: polyduct with no compile workers (every kernel compiled at its first launch)
COLD_VARIANTS = ("dynamo-aot", "inductor", "polyduct", "polyduct-notune", "polyduct-serial")


# Kept of each first call: its phases, and what came after it (see `_cold_worker`)
PHASE_KEYS = ("phases", "calls", "dynamo", "background_s", "tuning_call_s")


def cold_compile(
    out: Path, profile: bool = False, compilers: tuple[str, ...] = COLD_VARIANTS,
    extra: tuple[str, ...] = COLD_EXTRA, repeats: int = 1, dtypes: tuple[str, ...] = ("float32",),
) -> list[dict[str, Any]]:
    """First-call time of each workload and compiler, each in a fresh process whose Inductor,
    Triton and polyduct cache directories start empty (`compile_s` in the main table runs in
    one process, after the other variants and workloads warmed shared state). `dynamo-aot`
    (Dynamo and AOTAutograd, no code generation) is the part both compilers share. Each
    (workload, compiler) runs `repeats` times, round-robin over the compilers so that machine
    drift hits them alike; the table takes the median, `<variant>_runs` keeps every sample.
    Each first call also records where its time went (`bench.phases`: `<variant>_phases`) and
    the backend's compile seconds within it (`<variant>_compile`, median). With `profile`, each
    worker writes its first call's cProfile summary beside the table (its seconds then include
    the profiler's overhead: time without it)."""
    import statistics

    rows = []
    for dtype, name in ((d, n) for d in dtypes for n in (*WORKLOADS, *extra)):
        row: dict[str, Any] = {"workload": name, "dtype": dtype}
        runs: dict[str, list[float]] = {v: [] for v in compilers}
        compiles: dict[str, list[float]] = {v: [] for v in compilers}
        for _ in range(repeats):
            for variant in compilers:
                result = _cold_run(name, dtype, variant, out if profile else None)
                if "seconds" not in result:
                    row[f"{variant}_error"] = result["error"]
                    continue
                runs[variant].append(result["seconds"])
                if (seconds := phases.compile_seconds(result)) is not None:
                    compiles[variant].append(seconds)
                if variant.startswith("polyduct"):
                    row[f"{variant}_launchers"] = result["launchers"]
                row.setdefault(f"{variant}_phases", []).append(
                    {k: result.get(k) for k in PHASE_KEYS})
        for variant in compilers:
            row[variant] = statistics.median(runs[variant]) if runs[variant] else None
            row[f"{variant}_compile"] = (
                statistics.median(compiles[variant]) if compiles[variant] else None)
            if repeats > 1:
                row[f"{variant}_runs"] = runs[variant]
                row[f"{variant}_compile_runs"] = compiles[variant]
        rows.append(row)
        print(json.dumps(row), flush=True)
        # Written after every workload: a run cut short (a device-time limit) keeps its rows.
        (out / "gpu_cold_compile.json").write_text(json.dumps(rows, indent=1))
        (out / "gpu_cold_compile.md").write_text(_cold_table(rows))
    return rows


def _cold_run(name: str, dtype: str, variant: str, profile: Path | None) -> dict[str, Any]:
    """One first call in a fresh process on empty caches: its JSON line, or {"error": ...}."""
    import os
    import subprocess
    import sys
    import tempfile

    tmp = tempfile.mkdtemp(prefix="cold-")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
               TRITON_CACHE_DIR=f"{tmp}/triton", POLYDUCT_CACHE_DIR=f"{tmp}/polyduct")
    if variant == "polyduct-serial":
        env["POLYDUCT_TRITON_COMPILE_WORKERS"] = "0"
    if profile is not None:
        env["POLYDUCT_COLD_PROFILE"] = str(profile.resolve())
    cmd = [sys.executable, "-m", "bench.gpu", "--cold-worker", name, dtype, variant]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _cold_table(rows: list[dict[str, Any]]) -> str:
    """First-call seconds per compiler (`dynamo-aot`: the Dynamo + AOTAutograd floor they
    share), and each backend's compile seconds within its first call (`<variant>_compile`: see
    `phases.compile_seconds`), as ratios to Inductor's."""
    variants = [v for v in COLD_VARIANTS if any(v in row for row in rows)]
    compilers = [v for v in variants if v != "dynamo-aot"]
    ours = [v for v in compilers if v.startswith("polyduct")]

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    def ratio(mine: float | None, theirs: float | None) -> str:
        return f"{mine / theirs:.2f}" if mine is not None and theirs else "-"

    head = [f"first call s {v}" for v in variants]
    head += [f"compile s {v}" for v in compilers]
    head += [f"compile {v} / inductor" for v in ours]
    lines = ["| workload | dtype | " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(head)]
    for row in rows:
        compile_s = {v: row.get(f"{v}_compile") for v in compilers}
        cells = [cell(row.get(v)) for v in variants]
        cells += [cell(s) for s in compile_s.values()]
        cells += [ratio(compile_s[v], compile_s.get("inductor")) for v in ours]
        lines.append(f"| {row['workload']} | {row['dtype']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
