"""Where Triton's compile of a generated kernel goes: seconds per stage (Python AST to TTIR, the
TTIR, TTGIR and LLVM-IR passes, PTX, ptxas to a cubin) for each polyduct-triton kernel module
given, compiling its heuristic config (`jobs()[0]`) `--repeats` times into fresh caches after
one warm-up compile. On a machine with no GPU, `--target 90` compiles for sm_90.

    python -m bench.triton_stages [--target ARCH] [--repeats N] KERNEL.py ...
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SECONDS: dict[str, float] = {}


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[name] = SECONDS.get(name, 0.0) + time.perf_counter() - start

    return run


def _instrument() -> None:
    """Time Triton's front end (`ASTSource.make_ir`), each backend stage and the whole compile."""
    import triton.compiler
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import compiler

    compiler.ASTSource.make_ir = _timed("python to ttir", compiler.ASTSource.make_ir)
    add_stages = CUDABackend.add_stages

    def add_timed(self: Any, stages: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        add_stages(self, stages, *args, **kwargs)
        for ext in list(stages):
            stages[ext] = _timed(ext, stages[ext])

    CUDABackend.add_stages = add_timed
    triton.compiler.compile = _timed("triton.compile", compiler.compile)  # as the JIT imports it


def compile_samples(module: Any, job: tuple[Any, ...], runs: int, root: str) -> list[dict[str, float]]:
    """Seconds per stage (and `warmup`: the JIT's whole call) of compiling `job` (a generated
    module's warmup arguments) `runs` times, each into a fresh Triton cache under `root` (the
    last run's is left in place, and Triton's environment points to it)."""
    samples = []
    for run in range(runs):
        os.environ["TRITON_CACHE_DIR"] = os.path.join(root, str(run))
        module._kernel.device_caches.clear()  # the JIT's in-memory cache of compiled kernels
        SECONDS.clear()
        start = time.perf_counter()
        module.RUNTIME.warmup(*job)
        samples.append({**SECONDS, "warmup": time.perf_counter() - start})
    return samples


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    """Each key's median over `samples`, rounded to 0.1 ms (a key missing from a sample: 0)."""
    return {k: round(statistics.median(s.get(k, 0.0) for s in samples), 4) for k in samples[0]}


def stages(path: Path, repeats: int) -> dict[str, Any]:
    """Median seconds per stage of compiling `path`'s heuristic config (plus `warmup`: the JIT's
    whole call, binding and cache key included)."""
    from polyduct.cache import import_module_file

    module = import_module_file(path, f"stages_{abs(hash(path))}")
    jobs = module.jobs()
    if not jobs:
        return {"kernel": module.NAME, "path": str(path), "error": "no static jobs"}
    _, args = jobs[0]
    with tempfile.TemporaryDirectory() as tmp:
        samples = compile_samples(module, args, repeats + 1, tmp)[1:]  # the first warms up
    return {"kernel": module.NAME, "path": str(path), "lines": len(path.read_text().splitlines()),
            **medians(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+", type=Path)
    parser.add_argument("--target", type=int, help="compile for this sm_ arch, with no GPU")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.target:
        import triton
        from triton.backends.compiler import GPUTarget

        from polyduct_triton.precompile import _TargetDriver

        driver = _TargetDriver()
        driver.target = GPUTarget("cuda", args.target, 32)
        triton.runtime.driver.set_active(driver)
    _instrument()
    for path in args.kernels:
        print(json.dumps(stages(path, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
