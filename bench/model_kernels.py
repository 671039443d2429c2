"""`python -m bench kernels --model NAME`: where a compiled model's time goes, per kernel and per
library call of polyduct's generated wrapper.

The model of the suite (`bench.models_nn.by_names`) is compiled with `torch.compile(backend=
"polyduct")`; each compiled graph's wrapper is then rebuilt from its source with every kernel and
every library op wrapped in a timer, and called `--calls` times with the inputs that graph
received. Printed per graph: the time per call, then each kernel and library op (microseconds per
call, summed over its call sites), largest first. The timers cost about half a microsecond per
call each, so the sum of the parts is a little above what they cost unwrapped.

Forward (eval, no grad) by default; `--train` profiles the graphs of one training step (the
forward graph, then the backward graph on the inputs it received). `--show kernel2` prints that
kernel's generated source after the table.

    python -m bench kernels --model resnet                 # forward, one thread
    python -m bench kernels --model cnn_bn --train --show kernel2
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch


def _timed(totals: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        totals[name] += time.perf_counter() - start
        return result

    return call


def _captured(model: torch.nn.Module, inputs: dict[str, Any], kernels: str, train: bool) -> list[Any]:
    """(compiled graph, the arguments of its first call) for every graph one call compiles."""
    from bench.models_judge import main_output

    seen: list[tuple[Any, tuple[Any, ...]]] = []

    def observe(graph: Any) -> None:
        inner = graph.fn

        def first_call(*args: Any) -> Any:
            if not any(g is graph for g, _ in seen):
                seen.append((graph, args))
            return inner(*args)

        object.__setattr__(graph, "fn", first_call)

    compiled = torch.compile(
        model, backend="polyduct", options={"kernels": kernels, "observer": observe}
    )
    if train:
        main_output(compiled(**inputs)).float().sum().backward()
    else:
        with torch.no_grad():
            compiled(**inputs)
    return seen


def profile_graph(
    graph: Any, args: Sequence[Any], calls: int
) -> tuple[float, dict[str, float], dict[str, str]]:
    """Seconds per call of `graph`'s wrapper, seconds per call of each kernel and op, and each
    kernel's source."""
    import polyduct.wrapper.python as python_wrapper
    from polyduct.plugins import default_kernel_loader

    totals: dict[str, float] = collections.defaultdict(float)
    resolve = python_wrapper.resolve_op  # what the generated source imports its ops with
    python_wrapper.resolve_op = lambda name: _timed(totals, name, resolve(name))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "wrapper.py"
            path.write_text(graph.source)
            spec = importlib.util.spec_from_file_location("polyduct_profiled_wrapper", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    finally:
        python_wrapper.resolve_op = resolve
    loader = default_kernel_loader()

    def load(definitions: Any) -> dict[str, Any]:
        return {name: _timed(totals, name, fn) for name, fn in loader(definitions).items()}

    call = module.make_call(load)
    args = (*args, *graph.attrs)  # the graph's tensor constants follow its inputs, as in graph.fn
    with torch.no_grad():
        for _ in range(max(3, calls // 10)):
            call(*args)
        totals.clear()
        start = time.perf_counter()
        for _ in range(calls):
            call(*args)
        per_call = (time.perf_counter() - start) / calls
    sources = {d.name: d.source for d in module.KERNEL_DEFINITIONS}
    return per_call, {name: t / calls for name, t in totals.items()}, sources


def main(args: argparse.Namespace) -> int:
    from bench.models_nn import by_names

    torch.set_num_threads(args.threads)
    (spec,) = by_names([args.model])
    torch.manual_seed(0)
    model = spec.build().to(args.device)
    model.train(args.train)
    inputs = spec.inputs(torch.Generator().manual_seed(1), spec.sizes[0], args.device)
    graphs = _captured(model, inputs, args.kernels, args.train)
    print(f"{spec.name}: {len(graphs)} graph(s), kernels={args.kernels}, {args.threads} thread(s)")
    for graph, graph_args in graphs:
        per_call, parts, sources = profile_graph(graph, graph_args, args.calls)
        print(f"{graph.graph_name} graph {graph.graph_index}: {per_call * 1e3:.3f} ms per call")
        ranked = sorted(parts.items(), key=lambda kv: -kv[1])
        for name, seconds in ranked[: args.top]:
            print(f"  {name:<48} {seconds * 1e6:9.1f} us")
        rest = sum(s for _, s in ranked[args.top :])
        if rest:
            print(f"  {'(the rest)':<48} {rest * 1e6:9.1f} us")
        print(f"  {'sum of the timed parts':<48} {sum(parts.values()) * 1e6:9.1f} us")
        for name in args.show or ():
            if name in sources:
                print(f"--- {name} of {graph.graph_name} graph {graph.graph_index}:\n{sources[name]}")
    return 0


def add_parser(sub: Any) -> None:
    kp = sub.add_parser("kernels", help="per-kernel and per-library-call time of a compiled model")
    kp.add_argument("--model", required=True, help="a model of the suite or of `extra`")
    kp.add_argument("--kernels", default="cpp", help="polyduct kernel backend")
    kp.add_argument("--device", default="cpu")
    kp.add_argument("--threads", type=int, default=1)
    kp.add_argument("--calls", type=int, default=200, help="timed calls per graph")
    kp.add_argument("--top", type=int, default=20, help="parts listed per graph")
    kp.add_argument("--train", action="store_true", help="one training step's graphs")
    kp.add_argument("--show", action="append", help="print this kernel's source (repeatable)")
