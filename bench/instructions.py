"""Compile-time instruction counts under `valgrind --tool=callgrind`, polyduct beside Inductor.

Hardware counters are not available here (`perf stat -e instructions:u` reports "not
supported" in this VM), so counts are callgrind's Ir. Each (graph, compiler) runs in its own
process under `callgrind --instr-atstart=no`: the process runs uninstrumented until the backend
is entered, and only the backend call (AOTAutograd + lowering + scheduling + codegen + wrapper)
is instrumented (`bench.cgctl`, callgrind client requests). Dynamo's tracing, imports and the
process start are therefore excluded without a baseline subtraction. polyduct uses the
reference kernel backend (no external compiler); Inductor runs with one compile thread, no FX
graph cache and a fresh cache directory, and its C++ compiler runs in child processes that
callgrind does not follow (parent only). A warm-up compile of another graph first keeps one-time
lazy imports out. Graphs are compiled under `torch.no_grad()` (inference graphs for both).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from bench.cgctl import build

GRAPHS = ("add1000", "linear20", "transformer_block", "dynamic_pointwise")
COMPILERS = ("polyduct", "inductor")


def _add1000(x: torch.Tensor) -> torch.Tensor:
    for _ in range(1000):
        x = x + 1
    return x


def _graph(name: str) -> tuple[Callable[..., Any], tuple[Any, ...], bool]:
    from bench.workloads import Block, pointwise3

    torch.manual_seed(0)
    if name == "add1000":
        return _add1000, (torch.randn(8, 8),), False
    if name == "linear20":
        layers = torch.nn.Sequential(*(torch.nn.Linear(32, 32) for _ in range(20)))
        return layers, (torch.randn(4, 32),), False
    if name == "transformer_block":
        return Block(64), (torch.randn(16, 64),), False
    if name == "dynamic_pointwise":
        return pointwise3, tuple(torch.randn(8, 8) for _ in range(3)), True
    raise SystemExit(f"unknown graph {name!r}; known: {GRAPHS}")


def _backend(compiler: str) -> Callable[..., Any]:
    if compiler == "inductor":
        import torch._inductor.config as inductor_config
        from torch._inductor.compile_fx import compile_fx

        inductor_config.fx_graph_cache = False
        inductor_config.compile_threads = 1
        return compile_fx
    from torch._dynamo import lookup_backend

    polyduct = lookup_backend("polyduct")

    def compile_polyduct(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        return polyduct(gm, inputs, options={"kernels": "reference"})

    return compile_polyduct


def worker(graph: str, compiler: str) -> None:
    """Inside callgrind: warm up, then compile `graph` with instrumentation on only in the backend."""
    from bench.cgctl import Instrumentation

    real = _backend(compiler)
    lib = os.environ.get("PD_CGCTL_LIB")
    counting = Instrumentation(Path(lib) if lib else None)

    def measured(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        start = time.perf_counter()
        with counting:
            out = real(gm, inputs)
        print(f"instrumented backend call: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        return out

    with torch.no_grad():
        warm = torch.compile(lambda x: torch.cos(x) * 2, backend=real)
        warm(torch.randn(4))
        fn, inputs, dynamic = _graph(graph)
        compiled = torch.compile(fn, backend=measured, dynamic=dynamic)
        compiled(*inputs)


def measure(graph: str, compiler: str, timeout_s: float = 1800) -> int:
    """Instructions (Ir) `compiler` executes compiling `graph`, from callgrind's totals."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "bench",
            "instr-worker",
            "--graph",
            graph,
            "--compiler",
            compiler,
        ]
        env = dict(
            os.environ,
            PD_CGCTL_LIB=str(build(Path(tmp))),
            TORCHINDUCTOR_COMPILE_THREADS="1",
            POLYDUCT_CACHE_DIR=str(Path(tmp) / "pd"),
            TORCHINDUCTOR_CACHE_DIR=str(Path(tmp) / "ind"),
        )
        proc = subprocess.run(
            cmd,
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
            cwd=Path(__file__).parent.parent,
        )
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"{graph}/{compiler} failed: {' | '.join(tail)}")
        return parse_totals(out.read_text())


def parse_totals(text: str) -> int:
    """The Ir count from a callgrind output file: its `totals:` line, else `summary:`.

    With `--instr-atstart=no` the header's `summary:` can be 0 while `totals:` holds the count.
    """
    for key in ("totals", "summary"):
        match = re.search(rf"^{key}:\s*(\d+)", text, re.MULTILINE)
        if match is not None:
            return int(match.group(1))
    raise RuntimeError("callgrind output has no totals line")


def _measure_one(name: str) -> int | None:
    graph, compiler = name.split("/")
    try:
        count: int | None = measure(graph, compiler)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        print(f"{name}: {err}", file=sys.stderr)
        count = None
    print(f"measured {name}: {count}", file=sys.stderr, flush=True)
    return count


def measure_all(
    graphs: list[str], compilers: list[str], jobs: int = 1, partial: Path | None = None
) -> dict[str, int | None]:
    """Counts by `graph/compiler`, `jobs` processes at a time; None (reported) for a failure.

    Ir counts do not depend on machine load, so running several at once changes no result.
    Each finished count is also merged into `partial` (a JSON file) as soon as it is known.
    """
    names = [f"{graph}/{compiler}" for graph in graphs for compiler in compilers]
    lock = threading.Lock()

    def one(name: str) -> int | None:
        count = _measure_one(name)
        if partial is not None:
            with lock:
                old = json.loads(partial.read_text()) if partial.exists() else {}
                save(partial, {**old, name: count})
        return count

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def save(path: Path, counts: dict[str, int | None]) -> None:
    path.write_text(json.dumps(counts, indent=2, sort_keys=True) + "\n")
