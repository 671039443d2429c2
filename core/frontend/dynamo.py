"""`torch.compile(fn, backend="polyduct")`: the TorchDynamo backend (entry point
`torch_dynamo_backends: polyduct`). AOTAutograd traces forward and backward into functional aten
graphs, each compiled by `polyduct.frontend.compile.compile_graph`.

Graphs are named `forward` / `backward` (training) or `inference`, and numbered in the order they
are compiled for one captured (Dynamo) graph: scoped overrides select graphs by either.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch import config as functorch_config
from torch._functorch._aot_autograd.utils import make_boxed_func

from polyduct.cache_admin import auto_prune
from polyduct.cudagraphs import CudaGraphed
from polyduct.frontend.compile import compile_graph, plugins_for
from polyduct.frontend.decompositions import decomposition_table
from polyduct.frontend.entry_checks import check_arguments, mode_options, warn_load_errors
from polyduct.frontend.options import FrontendOptions
from polyduct.frontend.overlap import check_overlapping_writes
from polyduct.overrides import kept_whole, matches, scope_from_set


def polyduct_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Callable[..., Any]:
    """The dynamo backend: validate options, then AOTAutograd with polyduct graph compilers.

    `kwargs` holds what torch.compile passes besides `options`: only `mode` (entry_checks.MODES;
    "reduce-overhead" and "max-autotune" turn on CUDA graphs, as under Inductor).
    """
    check_arguments(kwargs)
    opts = FrontendOptions.from_mapping({**(options or {}), **mode_options(kwargs.get("mode"))})
    plugins = plugins_for(opts)
    warn_load_errors(plugins.errors)
    opts.validate(plugins)
    auto_prune()
    check_overlapping_writes(gm)

    position = itertools.count()

    def compiler_for(name: str) -> Callable[..., Any]:
        def compiler(graph: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
            index = next(position)
            compiled = compile_graph(graph, inputs, opts, index, name)
            fn = compiled.fn
            if opts.cudagraphs:
                used = sorted({src.backend for src in compiled.sources.values()})
                settle = _settle([plugins.kernel_backend(b) for b in used])
                static = _static_inputs() if name != "backward" else frozenset()
                fn = CudaGraphed(fn, f"{name} graph {index}", settle, static)
            return make_boxed_func(fn)

        return compiler

    backend = aot_autograd(
        fw_compiler=compiler_for("forward"),
        bw_compiler=compiler_for("backward"),
        inference_compiler=compiler_for("inference"),
        decompositions=_decompositions(opts, plugins),
        keep_inference_input_mutations=False,
    )
    # Effect tokens (linalg's error checks) are made and consumed inside the graph, as library
    # calls, not passed in: the runtime passes None where the graph's token input would be.
    with functorch_config.patch(unlift_effect_tokens=True):
        return backend(gm, example_inputs)


def _static_inputs() -> frozenset[int]:
    """The positions of the graph being compiled that AOTAutograd marks static (parameters and
    buffers), as Inductor's CUDA graphs read them; none outside a tracing context."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    return frozenset(getattr(meta, "static_input_indices", None) or ())


def _settle(backends: Sequence[Any]) -> Callable[[], None]:
    """What CUDA graphs call before recording: each kernel backend's background work finished."""

    def settle() -> None:
        for backend in backends:
            backend.settle()

    return settle


def _decompositions(opts: FrontendOptions, plugins: Any) -> dict[Any, Any]:
    """The decomposition table, less ops a scoped override runs as an extern or user lowering."""
    sets = {n: scope_from_set(n, spec.overrides) for n, spec in plugins.override_sets.items()}
    whole = kept_whole(opts.overrides, sets)
    table = decomposition_table()
    if not whole:
        return table
    return {op: fn for op, fn in table.items() if not any(matches(w, str(op)) for w in whole)}
