"""Compile-time instruction counts under `valgrind --tool=callgrind`, polyduct beside Inductor.

Hardware counters are not available here (`perf stat -e instructions:u` reports "not
supported" in this VM), so counts are callgrind's Ir. Each (graph, compiler) runs in its own
process under `callgrind --instr-atstart=no`: the process runs uninstrumented (valgrind's core
only) through start-up, imports, warm-up compiles, Dynamo's tracing and AOTAutograd, and only the
compiler proper is instrumented (`bench.cgctl`, callgrind client requests): polyduct's
`compile_graph` (lowering, scheduling, kernel codegen, Wrapper IR, wrapper) and Inductor's
`compile_fx_inner` (post-grad passes, lowering, scheduling, codegen, wrapper), each called once
per AOTAutograd graph. AOTAutograd, which both backends run before their compiler and which
dominates small graphs (about 90% of polyduct's backend call on the dynamic pointwise graph),
is not counted: it is the same torch code for both.

polyduct uses the reference kernel backend (no external compiler); Inductor runs with one
compile thread, no FX graph cache and a fresh cache directory, and its C++ compiler runs in child
processes that callgrind does not follow (parent only), so backend compilers are excluded for
both. The compiled code is never run (the captured graph runs eagerly after the compile), since
valgrind cannot execute the AVX-512 code Inductor generates here. Warm-up compiles of another
graph (static and dynamic) keep one-time lazy imports out. Graphs are compiled under
`torch.no_grad()` (inference graphs for both), with PYTHONHASHSEED=0.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
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


def _backend(compiler: str, section: Callable[[], Any]) -> Callable[..., Any]:
    """The backend for `compiler`, with its compiler proper run inside `with section():`."""
    if compiler == "inductor":
        import torch._inductor.config as inductor_config
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        inductor_config.fx_graph_cache = False
        inductor_config.compile_threads = 1

        def inner(*args: Any, **kwargs: Any) -> Any:
            with section():
                return compile_fx_inner(*args, **kwargs)

        def compile_inductor(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
            return compile_fx(gm, inputs, inner_compile=inner)

        return compile_inductor
    from torch._dynamo import lookup_backend

    from polyduct.pipeline import Compilation

    compile_graph = Compilation.compile_graph

    def counted_compile_graph(*args: Any, **kwargs: Any) -> Any:
        with section():
            return compile_graph(*args, **kwargs)

    Compilation.compile_graph = counted_compile_graph  # type: ignore[method-assign]
    polyduct = lookup_backend("polyduct")

    def compile_polyduct(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        return polyduct(gm, inputs, options={"kernels": "reference"})

    return compile_polyduct


def _warm_up_graph(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.relu(x @ w) * 2, -1).t().sum(0) + torch.cos(x).mean()


def _warm_up(backend: Callable[..., Any]) -> None:
    """Compile a graph unlike the measured ones (matmul, views, reductions), static and dynamic,
    so that one-time lazy imports and caches (sympy's, Inductor's, polyduct's) are not counted."""
    for dynamic in (False, True):
        compiled = torch.compile(_fresh_warm_up(), backend=backend, dynamic=dynamic)
        compiled(torch.randn(6, 5), torch.randn(5, 7))


def _fresh_warm_up() -> Callable[..., Any]:
    from bench.variants import fresh

    return fresh(_warm_up_graph)


def worker(graph: str, compiler: str) -> None:
    """Inside callgrind: warm up, then compile `graph` with instrumentation on only in the
    compiler proper, and only for the measured graph."""
    from bench.cgctl import Instrumentation

    lib = os.environ.get("PD_CGCTL_LIB")
    counting = Instrumentation(Path(lib) if lib else None)
    active = False

    @contextlib.contextmanager
    def section() -> Iterator[None]:
        if not active:
            yield
            return
        # a collection that starts inside the section would be counted: where the collector's
        # thresholds fall depends on every allocation made before, so unrelated changes (one more
        # module imported in the warm-up) moved the counts by 8%: collect first, then count
        # with the collector off (the compile's garbage is collected after the section)
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        try:
            with counting:
                yield
        finally:
            gc.enable()
        print(f"instrumented compile: {time.perf_counter() - start:.1f} s", file=sys.stderr)

    backend = _backend(compiler, section)

    def compile_only(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        """Compile, then run the captured graph eagerly: valgrind has no AVX-512, which
        Inductor's kernels use on this machine (its ISA check runs natively in a child)."""
        backend(gm, inputs)
        return gm

    def measured(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        nonlocal active
        active = True
        try:
            return compile_only(gm, inputs)
        finally:
            active = False

    with torch.no_grad():
        _warm_up(compile_only)
        fn, inputs, dynamic = _graph(graph)
        compiled = torch.compile(fn, backend=measured, dynamic=dynamic)
        compiled(*inputs)


def measure(graph: str, compiler: str, timeout_s: float = 3 * 3600) -> int:
    """Instructions (Ir) the compiler proper of `compiler` executes compiling `graph`."""
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
            PYTHONHASHSEED="0",  # set and dict-of-hash orders, hence counts, repeat run to run
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
        count = parse_totals(out.read_text())
        if count == 0:
            raise RuntimeError(f"{graph}/{compiler}: nothing counted (compiler not entered)")
        return count


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
    """Counts by `graph/compiler` (all graphs of one compiler first), `jobs` processes at a
    time; None (reported) for a failure.

    Ir counts do not depend on machine load, so running several at once changes no result.
    Each finished count is also merged into `partial` (a JSON file) as soon as it is known.
    """
    names = [f"{graph}/{compiler}" for compiler in compilers for graph in graphs]
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
