"""`torch.compile(fn, backend="polyduct")`: the TorchDynamo backend (entry point
`torch_dynamo_backends: polyduct`). AOTAutograd traces forward and backward into functional aten
graphs, each compiled by `polyduct.frontend.compile.compile_graph`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from polyduct import plugins as plugin_mod
from polyduct.frontend.compile import compile_graph
from polyduct.frontend.decompositions import decomposition_table
from polyduct.frontend.options import FrontendOptions


def polyduct_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Callable[..., Any]:
    """The dynamo backend: validate options, then AOTAutograd with polyduct graph compilers."""
    opts = FrontendOptions.from_mapping(options)
    opts.validate(plugin_mod.load())

    def compiler(graph: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
        compiled = compile_graph(graph, inputs, opts)
        return make_boxed_func(compiled.fn)  # type: ignore[no-any-return]

    backend = aot_autograd(
        fw_compiler=compiler,
        bw_compiler=compiler,
        decompositions=decomposition_table(),
        keep_inference_input_mutations=False,
    )
    return backend(gm, example_inputs)  # type: ignore[no-any-return]
