"""The GPU job: polyduct-triton on CUDA checked against eager, then benchmarked against Inductor.

Run on a CUDA machine: `python -m bench.gpu --out DIR`. It writes `gpu_check.json` (a training step
of a transformer block and other programs through polyduct-triton on CUDA, compared with eager) and `gpu_bench.json` / `gpu_bench.md` (eager,
Inductor and polyduct-triton side by side at 16384x4096, float32 and bfloat16: median times, ratios,
achieved bandwidth as a fraction of a measured device-to-device copy, and compile times).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench import phases
from bench.timing import copy_bandwidth, interleaved_samples, kernel_profile, runtime_calls
from bench.variants import fresh

Fn = Callable[..., torch.Tensor]


def pointwise3(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.relu(a * b + c) * torch.sigmoid(c) - a / (1 + b.abs())


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], w, b)


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def row_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


def chain30(x: torch.Tensor) -> torch.Tensor:
    y = x
    for i in range(10):
        y = torch.sin(y) * 1.01 + 0.1 * i
        y = torch.where(y > 0, y, y * 0.5)
        y = y - 0.01 * y * y
    return y


def _inputs(name: str, rows: int, cols: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)

    if name == "pointwise3":
        return rnd(rows, cols), rnd(rows, cols), rnd(rows, cols)
    if name == "layernorm":
        return rnd(rows, cols), rnd(cols), rnd(cols)
    if name == "rmsnorm":
        return rnd(rows, cols), rnd(cols)
    return (rnd(rows, cols),)


WORKLOADS: dict[str, tuple[Fn, int]] = {  # name -> (fn, tensors of rows x cols moved)
    "pointwise3": (pointwise3, 4),
    "softmax": (softmax, 2),
    "layernorm": (layernorm, 2),
    "rmsnorm": (rmsnorm, 2),
    "row_sum": (row_sum, 1),
    "chain30": (chain30, 2),
}


def _compiled(fn: Fn, variant: str) -> Fn:
    if variant == "eager":
        return fn
    if variant == "inductor":
        return torch.compile(fresh(fn))
    if variant == "dynamo-aot":  # Dynamo + AOTAutograd with no code generation: the floor
        return torch.compile(fresh(fn), backend="aot_eager")
    options: dict[str, Any] = {"kernels": "triton"}
    if variant == "polyduct-notune":  # heuristic configs only: one Triton compile per kernel
        options["kernel_options"] = {"autotune": False}
    return torch.compile(fresh(fn), backend="polyduct", options=options)


def bench(rows: int, cols: int, rounds: int,
          dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16)) -> list[dict[str, Any]]:
    copy_bw = copy_bandwidth("cuda")
    results = []
    for dtype in dtypes:
        for name, (fn, moved) in WORKLOADS.items():
            args = _inputs(name, rows, cols, dtype)
            # The answer computed in float32 from the same inputs, rounded once: a fused kernel
            # (ours or Inductor's) rounds once too, where eager rounds after every op.
            want = fn(*(a.float() for a in args)).to(dtype)
            tol = 2e-2 if dtype == torch.bfloat16 else 1e-3
            calls, compile_s, errors = {}, {}, {}
            for variant in ("eager", "inductor", "polyduct-triton"):
                try:
                    start = time.perf_counter()
                    compiled = _compiled(fn, variant)
                    got = compiled(*args)
                    torch.cuda.synchronize()
                    compile_s[variant] = time.perf_counter() - start
                except Exception as exc:  # noqa: BLE001 - a failing variant is reported, the rest run
                    errors[variant] = f"{type(exc).__name__}: {exc}"[:500]
                    continue
                calls[variant] = lambda c=compiled, a=args: c(*a)
                try:  # a wrong answer is reported beside its time, never hidden
                    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
                except AssertionError as exc:
                    errors[variant] = f"mismatch: {exc}"[:500]
            samples = interleaved_samples(calls, "cuda", rounds, 5.0)
            times = {k: statistics.median(v) for k, v in samples.items()}
            profiles = {k: kernel_profile(c) for k, c in calls.items()}
            nbytes = moved * rows * cols * args[0].element_size()
            row = {"workload": name, "dtype": str(dtype).removeprefix("torch."),
                   "shape": [rows, cols], "times_ms": {k: v * 1e3 for k, v in times.items()},
                   # the spread of the rounds' samples: a median far above the minimum is noise
                   "times_ms_range": {k: [min(v) * 1e3, max(v) * 1e3] for k, v in samples.items()},
                   "runtime_calls_per_call": {k: runtime_calls(c) for k, c in calls.items()},
                   "kernel_ms": {k: v[0] for k, v in profiles.items()},
                   "kernels_per_call": {k: v[1] for k, v in profiles.items()},
                   "compile_s": compile_s, "errors": errors,
                   "bandwidth_fraction_of_copy": {
                       k: nbytes / v / copy_bw for k, v in times.items()}}
            results.append(row)
            print(json.dumps(row), flush=True)
    return results


def _ratio(times: dict[str, float], base: str) -> str:
    ours = times.get("polyduct-triton")
    return f"{times[base] / ours:.2f}x" if ours and base in times else "n/a"


def _table(results: list[dict[str, Any]]) -> str:
    head = ("| workload | dtype | eager ms | inductor ms | polyduct ms | vs eager | vs inductor "
            "| polyduct BW/copy | inductor BW/copy | kernel ms inductor / polyduct "
            "| inductor compile s | polyduct compile s |")
    lines = [head, "|" + "---|" * 12]
    for r in results:
        t, c, bw = r["times_ms"], r["compile_s"], r["bandwidth_fraction_of_copy"]
        k = r.get("kernel_ms", {})
        ours = t.get("polyduct-triton")
        lines.append(
            f"| {r['workload']} | {r['dtype']} | {t.get('eager', float('nan')):.3f} | "
            f"{t.get('inductor', float('nan')):.3f} | "
            f"{ours if ours is not None else float('nan'):.3f} | {_ratio(t, 'eager')} | "
            f"{_ratio(t, 'inductor')} | {bw.get('polyduct-triton', float('nan')):.2f} | "
            f"{bw.get('inductor', float('nan')):.2f} | "
            f"{k.get('inductor', float('nan')):.3f} / {k.get('polyduct-triton', float('nan')):.3f} | "
            f"{c.get('inductor', float('nan')):.1f} | {c.get('polyduct-triton', float('nan')):.1f} |")
    return "\n".join(lines) + "\n"


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention (bmm externs, fused softmax) and a GELU MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (y.transpose(1, 2) for y in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def check() -> list[dict[str, Any]]:
    """Programs through polyduct-triton on CUDA against eager, training included."""
    results = []
    torch.manual_seed(0)
    block = Block(64, 4).cuda()
    x = torch.randn(4, 33, 64, device="cuda")

    def train_step(model: torch.nn.Module, inp: torch.Tensor) -> list[torch.Tensor]:
        model.zero_grad()
        model(inp).square().mean().backward()
        return [p.grad.clone() for p in model.parameters()]

    want = train_step(block, x)
    cases: dict[str, Callable[[], None]] = {}

    def transformer_train() -> None:
        compiled = torch.compile(block, backend="polyduct", options={"kernels": "triton"})
        for g, w in zip(train_step(compiled, x), want, strict=True):
            torch.testing.assert_close(g, w, rtol=2e-3, atol=2e-3)

    cases["transformer_block_fwd_bwd"] = transformer_train
    for name, (fn, _) in WORKLOADS.items():
        def one(fn: Fn = fn, name: str = name) -> None:
            for rows, cols in ((7, 33), (257, 1000)):
                args = _inputs(name, rows, cols, torch.float32)
                torch._dynamo.reset()
                got = torch.compile(fn, backend="polyduct", options={"kernels": "triton"})(*args)
                torch.testing.assert_close(got, fn(*args), rtol=1e-4, atol=1e-4)
        cases[name] = one
    for name, case in cases.items():
        try:
            case()
            results.append({"case": name, "ok": True})
        except Exception as exc:  # noqa: BLE001 - every case reports, pass or fail
            results.append({"case": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:800]})
        print(json.dumps(results[-1]), flush=True)
    return results


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
        first_call = lambda: _compiled(fn, variant)(*args)
    warm = _compiled(lambda t: t * 2 + 1, variant)  # imports, CUDA context, compile workers
    warm(torch.ones(8, device="cuda"))
    torch.cuda.synchronize()
    # Both compilers' pools of compile workers ready before the timed call (each compiles in its
    # own process while its pool starts): what a long-running program sees.
    if variant.startswith("polyduct"):
        from polyduct_triton import precompile

        precompile.start(timeout=120)
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
    print(json.dumps({"seconds": seconds, "pid": os.getpid(), "launchers": _launch_paths(),
                      **phases.report(seconds)}), flush=True)


# polyduct-serial: polyduct with no compile workers (every kernel compiled at its first launch)
COLD_VARIANTS = ("dynamo-aot", "inductor", "polyduct", "polyduct-notune", "polyduct-serial")


def cold_compile(
    out: Path, profile: bool = False, compilers: tuple[str, ...] = COLD_VARIANTS,
    extra: tuple[str, ...] = COLD_EXTRA, repeats: int = 1,
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
    dtype = "float32"
    for name in (*WORKLOADS, *extra):
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
                    {k: result.get(k) for k in ("phases", "calls", "dynamo")})
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


def _triton_modules() -> list[Any]:
    """The polyduct-triton kernel modules loaded in this process: those defining `_configs`,
    `_BEST` and `_COMPILED` (looked up in their namespace, not through `getattr`, which some
    modules answer for any name)."""
    import sys

    def ours(module: Any) -> bool:
        names = getattr(module, "__dict__", {})
        return "_configs" in names and all(
            isinstance(names.get(n), dict) for n in ("_BEST", "_COMPILED"))

    return [m for m in list(sys.modules.values()) if ours(m)]


def _tuned_configs() -> list[dict[str, Any]]:
    """The config each polyduct-triton kernel loaded in this process chose per shape class
    (the launcher's `_BEST`): which autotuning candidates win, to prune the candidate lists."""
    return [
        {"kernel": module.NAME, "kind": module.KIND, "xnumel_pow2": xp, "rnumel_pow2": rp,
         "candidates": module._configs(xp, rp), "chosen": cfg}
        for module in _triton_modules()
        for (_, xp, rp, _), cfg in module._BEST.items()
    ]


def _launch_paths() -> dict[str, int]:
    """How the polyduct-triton kernels loaded in this process launch, counted per launcher:
    "torch" (torch's static CUDA launcher) or "triton (why torch's does not)"; and how many of
    them compile workers built ahead of their first launch ("compiled by workers")."""
    from collections import Counter

    paths: Counter[str] = Counter()
    for module in _triton_modules():
        for launch in module._COMPILED.values():
            paths[getattr(launch, "via", "?")] += 1
            paths["compiled by workers"] += bool(getattr(launch, "ahead", False))
    return {k: v for k, v in paths.items() if v}


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
    lines = ["| workload | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for row in rows:
        compile_s = {v: row.get(f"{v}_compile") for v in compilers}
        cells = [cell(row.get(v)) for v in variants]
        cells += [cell(s) for s in compile_s.values()]
        cells += [ratio(compile_s[v], compile_s.get("inductor")) for v in ours]
        lines.append(f"| {row['workload']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold-worker", nargs=3, metavar=("WORKLOAD", "DTYPE", "VARIANT"))
    parser.add_argument("--cold", action="store_true", help="only the cold-compile table")
    parser.add_argument("--cold-variants", nargs="*", default=list(COLD_VARIANTS),
                        choices=COLD_VARIANTS, help="with --cold: these compilers only")
    parser.add_argument("--cold-repeats", type=int, default=1,
                        help="with --cold: fresh processes per workload and compiler (median)")
    parser.add_argument("--profile", action="store_true",
                        help="with --cold: a cProfile summary of each first call")
    parser.add_argument("--workloads", nargs="*", help="only these workloads (default: all)")
    parser.add_argument("--no-check", action="store_true", help="skip the correctness programs")
    parser.add_argument("--out", type=Path, default=Path("out"))
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if args.cold_worker:
        _cold_worker(*args.cold_worker)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    if args.workloads:
        for name in set(WORKLOADS) - set(args.workloads):
            del WORKLOADS[name]
    if args.cold:
        extra = tuple(n for n in COLD_EXTRA if not args.workloads or n in args.workloads)
        cold_compile(args.out, args.profile, tuple(args.cold_variants), extra,
                     args.cold_repeats)
        return
    if not args.no_check:
        (args.out / "gpu_check.json").write_text(json.dumps(check(), indent=1))
    try:
        results = bench(args.rows, args.cols, args.rounds)
    except Exception:
        traceback.print_exc()
        raise
    # Small tensors: the time per call is launch overhead (dynamo guards, wrapper, launcher).
    results += bench(64, 64, args.rounds, (torch.float32,))
    (args.out / "gpu_bench.json").write_text(json.dumps(results, indent=1))
    (args.out / "gpu_tuned.json").write_text(json.dumps(_tuned_configs(), indent=1))
    (args.out / "gpu_launchers.json").write_text(json.dumps(_launch_paths()))
    table = _table(results)
    (args.out / "gpu_bench.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
