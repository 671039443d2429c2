"""Compile-time instruction counts under `valgrind --tool=callgrind`, polyduct beside Inductor.

Hardware counters are not available here (`perf stat -e instructions:u` reports "not
supported" in this VM), so counts are callgrind's Ir. Each (graph, compiler) runs in its own
process under `callgrind --instr-atstart=no`: the process runs uninstrumented until the backend
is entered, and only the backend call is instrumented (`bench.cgctl`, callgrind client requests).
Dynamo's tracing, imports and the process start are therefore excluded without a baseline
subtraction. The backend call is split, in the same run, into two labelled parts: the compiler
proper (polyduct's `compile_graph`: lowering, scheduling, codegen, wrapper; Inductor's
`compile_fx_inner`: post-grad passes, lowering, scheduling, codegen, wrapper) and the rest
(AOTAutograd's tracing and functionalization, decompositions, which both backends share). Each
benchmark therefore has two entries: `graph/compiler` (the compiler proper) and
`graph/compiler+aot` (the whole backend call).

polyduct uses the reference kernel backend (no external compiler); Inductor runs with one
compile thread, no FX graph cache and a fresh cache directory, and its C++ compiler runs in child
processes that callgrind does not follow (parent only), so backend compilers are excluded for
both. Warm-up compiles of another graph (static and dynamic) keep one-time lazy imports out. Graphs are
compiled under `torch.no_grad()` (inference graphs for both).
"""

from __future__ import annotations

import contextlib
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


INSIDE, OUTSIDE = "compiler", "aot"  # labels of the two parts of a backend call


def _backend(compiler: str, section: Callable[[], Any]) -> Callable[..., Any]:
    """The backend for `compiler`, with its compiler proper run inside `section()`."""
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

    import polyduct.frontend.dynamo as pd_dynamo

    compile_graph = pd_dynamo.compile_graph

    def counted_compile_graph(*args: Any, **kwargs: Any) -> Any:
        with section():
            return compile_graph(*args, **kwargs)

    pd_dynamo.compile_graph = counted_compile_graph  # the module-level name the backend calls
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
    backend, dumping the counts at the compiler proper's entry and exit (labelled parts)."""
    from bench.cgctl import Instrumentation

    lib = os.environ.get("PD_CGCTL_LIB")
    counting = Instrumentation(Path(lib) if lib else None)
    active = False

    @contextlib.contextmanager
    def section() -> Iterator[None]:
        if active:
            counting.dump(OUTSIDE)
        try:
            yield
        finally:
            if active:
                counting.dump(INSIDE)

    real = _backend(compiler, section)

    def measured(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        nonlocal active
        start = time.perf_counter()
        active = True
        with counting:
            try:
                return real(gm, inputs)
            finally:
                counting.dump(OUTSIDE)
                active = False
                print(
                    f"instrumented backend call: {time.perf_counter() - start:.1f} s",
                    file=sys.stderr,
                )

    with torch.no_grad():
        _warm_up(real)
        fn, inputs, dynamic = _graph(graph)
        compiled = torch.compile(fn, backend=measured, dynamic=dynamic)
        compiled(*inputs)


def measure(graph: str, compiler: str, timeout_s: float = 3 * 3600) -> dict[str, int]:
    """Instructions (Ir) `compiler` executes compiling `graph`: {INSIDE: ..., OUTSIDE: ...}."""
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
        parts = [p.read_text() for p in sorted(Path(tmp).glob("callgrind.out*"))]
        if proc.returncode != 0 or not parts:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"{graph}/{compiler} failed: {' | '.join(tail)}")
        return sum_parts(parts)


def sum_parts(parts: list[str]) -> dict[str, int]:
    """Ir per label over callgrind part files (`desc: Trigger: Client Request: <label>`);
    parts without a label (the final dump at exit, uninstrumented) are left out."""
    sums = {INSIDE: 0, OUTSIDE: 0}
    for text in parts:
        match = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.MULTILINE)
        if match is not None and match.group(1) in sums:
            sums[match.group(1)] += parse_totals(text)
    if sums[INSIDE] == 0:
        raise RuntimeError("callgrind dumped no compiler part (the compiler was not entered)")
    return sums


def parse_totals(text: str) -> int:
    """The Ir count from a callgrind output file: its `totals:` line, else `summary:`.

    With `--instr-atstart=no` the header's `summary:` can be 0 while `totals:` holds the count.
    """
    for key in ("totals", "summary"):
        match = re.search(rf"^{key}:\s*(\d+)", text, re.MULTILINE)
        if match is not None:
            return int(match.group(1))
    raise RuntimeError("callgrind output has no totals line")


def entries(graph: str, compiler: str, parts: dict[str, int] | None) -> dict[str, int | None]:
    """The two benchmark entries of one measurement: the compiler proper and the whole call."""
    if parts is None:
        return {f"{graph}/{compiler}": None, f"{graph}/{compiler}+aot": None}
    return {
        f"{graph}/{compiler}": parts[INSIDE],
        f"{graph}/{compiler}+aot": parts[INSIDE] + parts[OUTSIDE],
    }


def _measure_one(graph: str, compiler: str) -> dict[str, int | None]:
    try:
        parts: dict[str, int] | None = measure(graph, compiler)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        print(f"{graph}/{compiler}: {err}", file=sys.stderr)
        parts = None
    print(f"measured {graph}/{compiler}: {parts}", file=sys.stderr, flush=True)
    return entries(graph, compiler, parts)


def measure_all(
    graphs: list[str], compilers: list[str], jobs: int = 1, partial: Path | None = None
) -> dict[str, int | None]:
    """Counts by `graph/compiler` and `graph/compiler+aot`, `jobs` processes at a time (all of
    one compiler first); None (reported) for a failure.

    Ir counts do not depend on machine load, so running several at once changes no result.
    Each finished count is also merged into `partial` (a JSON file) as soon as it is known.
    """
    runs = [(graph, compiler) for compiler in compilers for graph in graphs]
    lock = threading.Lock()

    def one(run: tuple[str, str]) -> dict[str, int | None]:
        counts = _measure_one(*run)
        if partial is not None:
            with lock:
                old = json.loads(partial.read_text()) if partial.exists() else {}
                save(partial, {**old, **counts})
        return counts

    out: dict[str, int | None] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for counts in pool.map(one, runs):
            out.update(counts)
    return out


def save(path: Path, counts: dict[str, int | None]) -> None:
    path.write_text(json.dumps(counts, indent=2, sort_keys=True) + "\n")
