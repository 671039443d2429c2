"""`torch.compile(fn, backend="polyduct")`: the TorchDynamo backend (entry point
`torch_dynamo_backends: polyduct`). One `Compilation` (polyduct.pipeline) per captured graph;
AOTAutograd traces forward and backward into functional aten graphs, each run through the
pipeline's passes.

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
from torch._functorch.partitioners import min_cut_rematerialization_partition

from polyduct.cudagraphs import CudaGraphed, host_sync
from polyduct.frontend.entry_checks import check_arguments, mode_options
from polyduct.frontend.overlap import check_overlapping_writes
from polyduct.kernel import KernelBackend
from polyduct.lowering.fx_nodes import WRITTEN_BACK
from polyduct.pipeline import Compilation


def polyduct_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Callable[..., Any]:
    """The dynamo backend: one `Compilation`, then AOTAutograd with polyduct graph compilers.

    `kwargs` holds what torch.compile passes besides `options`: only `mode` (entry_checks.MODES;
    "reduce-overhead" and "max-autotune" turn on CUDA graphs, as under Inductor).
    """
    check_arguments(kwargs)
    compilation = Compilation.create({**(options or {}), **mode_options(kwargs.get("mode"))})
    check_overlapping_writes(gm)
    position = itertools.count()

    def compiler_for(name: str) -> Callable[..., Any]:
        def compiler(graph: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
            index = next(position)
            if name != "backward":
                graph.meta[WRITTEN_BACK] = _written_back()
            compiled = compilation.compile_graph(graph, index, name)
            fn = compiled.fn
            if compilation.options.cudagraphs:
                used = sorted({src.backend for src in compiled.sources.values()})
                settle = _settle([compilation.plugins.kernel_backend(b) for b in used])
                static = _static_inputs() if name != "backward" else frozenset()
                fn = CudaGraphed(fn, f"{name} graph {index}", settle, static, host_sync(graph))
            return make_boxed_func(fn)

        return compiler

    backend = aot_autograd(
        fw_compiler=compiler_for("forward"),
        bw_compiler=compiler_for("backward"),
        inference_compiler=compiler_for("inference"),
        partition_fn=min_cut_rematerialization_partition,
        decompositions=compilation.decompositions(),
        keep_inference_input_mutations=False,
    )
    # Effect tokens (linalg's error checks) are made and consumed inside the graph, as library
    # calls, not passed in: the runtime passes None where the graph's token input would be.
    with functorch_config.patch(unlift_effect_tokens=True):
        return backend(gm, example_inputs)


def _written_back() -> dict[int, int]:
    """Output position -> graph input position of every input AOTAutograd copies a graph output
    into after the call (an in-place write of the program): the first outputs, in order."""
    return dict(enumerate(_fw_metadata("mutated_inp_runtime_indices")))


def _static_inputs() -> frozenset[int]:
    """The positions of the graph being compiled that AOTAutograd marks static (parameters and
    buffers), as Inductor's CUDA graphs read them; none outside a tracing context."""
    return frozenset(_fw_metadata("static_input_indices"))


def _fw_metadata(field: str) -> Sequence[int]:
    """`field` of AOTAutograd's metadata of the graph being compiled; empty outside a tracing
    context."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    return getattr(meta, field, None) or ()


def _settle(backends: Sequence[KernelBackend]) -> Callable[[], None]:
    """What CUDA graphs call before recording: each kernel backend's background work finished."""

    def settle() -> None:
        for backend in backends:
            backend.settle()

    return settle

