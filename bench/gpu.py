"""The GPU job: polyduct-triton on CUDA checked against eager, then benchmarked against Inductor.

Run on a CUDA machine: `python -m bench.gpu --out DIR`. It writes `gpu_check.json` (a training step
of a transformer block and other programs through polyduct-triton on CUDA, compared with eager) and `gpu_bench.json` / `gpu_bench.md` (eager,
Inductor and polyduct-triton side by side at 16384x4096, float32 and bfloat16: median times, ratios,
achieved bandwidth as a fraction of a measured device-to-device copy, and compile times). With
`--cold`, first calls in fresh processes instead (bench/gpu_cold.py).
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


def settle_workers(timeout: float = 300.0) -> float:
    """Seconds until polyduct-triton's compile workers have ended every job queued so far (the
    tuning candidates it compiles in the background after a first call); 0 without it."""
    start = time.perf_counter()
    try:
        from polyduct_triton import precompile
    except ImportError:
        return 0.0
    precompile.settle(timeout)
    return time.perf_counter() - start


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
            settle_workers()  # polyduct's candidates compiled: the next call tunes them
            for call in calls.values():
                call()
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
            "| inductor first call s | polyduct first call s |")
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


def _triton_modules() -> list[Any]:
    """The polyduct-triton kernel modules the backend loaded in this process: named
    `polyduct_triton_k_<digest>`, and defining a `RUNTIME` (looked up in their namespace, not
    through `getattr`, which some modules answer for any name) with `best` and `compiled`."""
    import sys

    def ours(name: str, module: Any) -> bool:
        names = getattr(module, "__dict__", {})
        runtime = names.get("RUNTIME")
        return name.startswith("polyduct_triton_k_") and all(
            isinstance(getattr(runtime, n, None), dict) for n in ("best", "compiled"))

    return [m for name, m in list(sys.modules.items()) if ours(name, m)]


def _tuned_configs() -> list[dict[str, Any]]:
    """The config each polyduct-triton kernel loaded in this process chose per shape class
    (the runtime's `best`): which autotuning candidates win, to prune the candidate lists."""
    return [
        {"kernel": module.NAME, "kind": module.RUNTIME.facts.kind, "xnumel_pow2": xp, "rnumel_pow2": rp,
         "candidates": module.RUNTIME.configs(xp, rp), "chosen": cfg}
        for module in _triton_modules()
        for (_, xp, rp, _), cfg in module.RUNTIME.best.items()
    ]


def _launch_paths() -> dict[str, int]:
    """How the polyduct-triton kernels loaded in this process launch, counted per launcher:
    "torch" (torch's static CUDA launcher) or "triton (why torch's does not)"; and how many of
    them compile workers built ahead of their first launch ("compiled by workers")."""
    from collections import Counter

    paths: Counter[str] = Counter()
    for module in _triton_modules():
        for launch in module.RUNTIME.compiled.values():
            paths[getattr(launch, "via", "?")] += 1
            paths["compiled by workers"] += bool(getattr(launch, "ahead", False))
    return {k: v for k, v in paths.items() if v}


def main() -> None:
    from bench.gpu_cold import COLD_EXTRA, COLD_VARIANTS, _cold_worker, cold_compile

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold-worker", nargs=3, metavar=("WORKLOAD", "DTYPE", "VARIANT"))
    parser.add_argument("--cold", action="store_true", help="only the cold-compile table")
    parser.add_argument("--cold-variants", nargs="*", default=list(COLD_VARIANTS),
                        choices=COLD_VARIANTS, help="with --cold: these compilers only")
    parser.add_argument("--cold-repeats", type=int, default=1,
                        help="with --cold: fresh processes per workload and compiler (median)")
    parser.add_argument("--cold-dtypes", nargs="*", default=["float32"],
                        choices=["float32", "bfloat16"], help="with --cold: these dtypes")
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
                     args.cold_repeats, tuple(args.cold_dtypes))
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
    # Through the module `bench.gpu`, not this `__main__` copy of it: bench.gpu_cold reads
    # bench.gpu's WORKLOADS, which `--workloads` filters.
    from bench.gpu import main as _main

    _main()
