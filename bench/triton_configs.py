"""What each launch config of a generated Triton kernel costs to compile and to run, on a GPU:
the data behind the launcher's heuristic configs and tuning candidates.

For each GPU workload (bench/gpu.py) and dtype, the graph is compiled by polyduct-triton once
(heuristic configs, no tuning); then each of its kernels is compiled for every config of a grid
around the launcher's candidates, into a fresh Triton cache in this process (Python's
collector frozen, as in a compile worker), and timed with `triton.testing.do_bench` on the
graph's own arguments (written buffers cloned). Compile seconds are medians of `--repeats`.

    python -m bench.triton_configs [--out DIR] [--workloads W ...] [--repeats N]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from bench import gpu, triton_stages

POINTWISE = [(128, 1, 4), (256, 1, 4), (256, 1, 8), (512, 1, 4), (512, 1, 8), (512, 1, 16),
             (1024, 1, 4), (1024, 1, 8), (1024, 1, 16), (2048, 1, 8), (2048, 1, 16)]


def grid(kind: str, xnumel: int, rnumel: int) -> list[tuple[int, int, int]]:
    """Configs to measure: the pointwise grid, or for reductions persistent rows of up to 16
    elements per thread (one to four rows per program) and looped blocks of 1024 and 2048."""
    if kind == "pointwise":
        return [c for c in POINTWISE if c[0] <= max(128, xnumel)]
    rp = 1 << max(0, rnumel - 1).bit_length()
    configs = [(x, rp, w) for x in (1, 2, 4) for w in (8, 16, 32) if 2 <= x * rp // (32 * w) <= 16]
    looped = ((1, 1024, 4), (1, 1024, 8), (2, 1024, 8), (4, 1024, 8), (1, 2048, 4), (1, 2048, 8),
              (1, 2048, 16))
    return configs + [(x, r, w) for x, r, w in looped if r < rp]


def _capture(fn: gpu.Fn, args: tuple[torch.Tensor, ...]) -> list[tuple[ModuleType, tuple]]:
    """Compile `fn` with polyduct-triton (heuristic configs) and run it once; return each
    kernel module with the arguments of its first launch."""
    from polyduct_triton.backend import TritonBackend

    seen: list[tuple[ModuleType, tuple]] = []
    load = TritonBackend.load

    def record(self: TritonBackend, sources: Any) -> Any:
        launches = load(self, sources)
        for launch_fn in launches.values():
            module = sys.modules[launch_fn.__module__]
            run = module._run

            def first(*launch: Any, module: ModuleType = module, run: Any = run) -> None:
                if not any(m is module for m, _ in seen):
                    seen.append((module, launch))
                run(*launch)

            module._run = first
        return launches

    TritonBackend.load = record  # type: ignore[method-assign]
    try:
        options = {"kernels": "triton", "kernel_options": {"autotune": False}}
        torch.compile(gpu.fresh(fn), backend="polyduct", options=options)(*args)
        torch.cuda.synchronize()
    finally:
        TritonBackend.load = load  # type: ignore[method-assign]
    return seen


def measure(module: ModuleType, launch: tuple, cfg: tuple[int, int, int],
            repeats: int) -> dict[str, Any]:
    """Compile seconds (total and per stage, medians) and kernel milliseconds of one config."""
    import triton.testing

    tensors, sizes, xnumel, rnumel, idx64, err = launch
    args = module.RUNTIME._args(tensors, sizes, xnumel, rnumel, err)
    _, job = module.RUNTIME._job(cfg, args, xnumel, rnumel, idx64)
    with tempfile.TemporaryDirectory() as tmp:  # each compile's cache; the last one's is launched
        samples = triton_stages.compile_samples(module, job, repeats, tmp)
        module.RUNTIME.compiled.clear()  # the launch below loads this config's last compile
        scratch = [t.clone() if i in module.RUNTIME.facts.written else t for i, t in enumerate(tensors)]
        ms = triton.testing.do_bench(
            lambda: module.RUNTIME._launch(cfg, scratch, sizes, xnumel, rnumel, idx64, err),
            warmup=25, rep=100)
    seconds = triton_stages.medians(samples)
    seconds["compile"] = seconds.pop("warmup")
    xb, rb, warps = cfg
    per_thread = xb * rb // (32 * warps)
    persistent = module.RUNTIME.facts.kind != "pointwise" and rb >= rnumel
    return {"config": list(cfg), "elements_per_thread": per_thread, "persistent": persistent,
            "kernel_ms": round(ms, 5), **seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu"))
    parser.add_argument("--workloads", nargs="*", default=list(gpu.WORKLOADS))
    parser.add_argument("--dtypes", nargs="*", default=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    args = parser.parse_args()
    triton_stages._instrument()
    rows = []
    for dtype in args.dtypes:
        for name in args.workloads:
            fn, _ = gpu.WORKLOADS[name]
            inputs = gpu._inputs(name, args.rows, args.cols, getattr(torch, dtype))
            kernels = _capture(fn, inputs)
            gc.collect()
            gc.freeze()  # as compile workers run: no full collections of torch's heap
            for module, launch in kernels:
                _, _, xnumel, rnumel, _, _ = launch
                heuristic = module.RUNTIME.configs(xnumel, rnumel)
                for cfg in grid(module.RUNTIME.facts.kind, xnumel, rnumel):
                    row = {"workload": name, "dtype": dtype, "kernel": module.NAME,
                           "kind": module.RUNTIME.facts.kind, "candidate": cfg in heuristic,
                           **measure(module, launch, cfg, args.repeats)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            gc.unfreeze()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "triton_configs.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
