"""Compile one aten FX graph: lower -> schedule -> kernel codegen -> Wrapper IR -> callable.

The pipeline is a sequence of named steps; `CompiledGraph` keeps every intermediate product
(kernel specs, sources, Wrapper IR, fallback report) so tests and tools can inspect them.
"""

from __future__ import annotations

import copy
import functools
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree

from polyduct import plugins as plugin_mod
from polyduct import remote_cache
from polyduct.errors import UnsupportedOp
from polyduct.frontend import (
    lowerings_index,
    lowerings_matmul,
    lowerings_misc,
    lowerings_pointwise,
    lowerings_pool,
    lowerings_random,
    lowerings_reduce,
    lowerings_scan,
    lowerings_scatter,
    lowerings_scatter_reduce,
    lowerings_views,
)
from polyduct.frontend.kernel_key import trace_stages
from polyduct.frontend.kernel_plan import plan
from polyduct.frontend.lowering import FallbackReport, GraphLowering, LoweringFn
from polyduct.frontend.options import FrontendOptions
from polyduct.frontend.scheduler import Item, KernelPlan, schedule
from polyduct.frontend.wrapper_gen import build_program
from polyduct.handlers.count import OpCounter
from polyduct.ir import IRGraph, StorageView
from polyduct.kernel import KernelBackend, KernelSource, KernelSpec
from polyduct.logs import log_output_code
from polyduct.memory_plan import plan_memory
from polyduct.overrides import Resolver, resolve, scope_from_set
from polyduct.plugin_index import load_for
from polyduct.python_wrapper import CompiledModule
from polyduct.wrapper_ir import WrapperProgram

LOG = logging.getLogger("polyduct.frontend")
"""The pipeline of each compiled graph at INFO (`TORCH_LOGS="polyduct"`, see polyduct.logs)."""


def core_lowerings() -> dict[str, LoweringFn]:
    """The core's lowering table (every family), by aten overload name (a fresh copy)."""
    return dict(_core_lowerings())


@functools.cache
def _core_lowerings() -> dict[str, LoweringFn]:
    """Built once per process: the families' tables are fixed (about 2M instructions)."""
    table: dict[str, LoweringFn] = {}
    modules = (
        lowerings_pointwise,
        lowerings_views,
        lowerings_reduce,
        lowerings_misc,
        lowerings_scan,
        lowerings_index,
        lowerings_pool,
        lowerings_random,
        lowerings_scatter,
        lowerings_scatter_reduce,
        lowerings_matmul,
    )
    for module in modules:
        table.update(module.table())
    return table


def lowering_table(options: FrontendOptions, plugins: Any) -> dict[str, LoweringFn]:
    """Lookup order: program scope (options) -> plugins -> core defaults."""
    table = core_lowerings()
    for name in plugins.lowerings.names():
        table[name] = plugins.lowerings.get(name).fn
    table.update(options.lowerings)
    return table


@dataclass
class CompiledGraph:
    """One compiled graph and everything made on the way."""

    specs: tuple[KernelSpec, ...]
    sources: dict[str, KernelSource]
    program: WrapperProgram
    report: FallbackReport
    fn: Callable[..., Any]
    source: str
    graph_name: str = "inference"
    graph_index: int = 0
    # What `fn` adds around the wrapper's `call` (for AOT packages, which rebuild it): the graph's
    # tensor constants appended to the arguments, and non-tensor outputs put back in place.
    attrs: tuple[torch.Tensor, ...] = ()
    constant_outputs: Mapping[int, Any] = field(default_factory=dict)
    output_count: int = 0

    @property
    def kernel_count(self) -> int:
        return len(self.specs)

    def __call__(self, *args: Any) -> list[Any]:
        return list(self.fn(*args))


def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: FrontendOptions,
    graph_index: int = 0,
    graph_name: str = "inference",
) -> CompiledGraph:
    """Compile an aten-level (functional) FX graph into a callable over its placeholders.

    `graph_index` / `graph_name` (`forward`, `backward`, `inference`) select the scoped
    overrides that apply to this graph (docs/overrides.md).
    """
    plugins = plugins_for(options)
    options.validate(plugins)
    if options.remote_cache is not None:
        remote_cache.configure(options.remote_cache)
    sets = {
        name: scope_from_set(name, spec.overrides) for name, spec in plugins.override_sets.items()
    }
    resolver, whole = resolve(options.overrides, graph_index, graph_name, sets)
    default_kernels = default_kernel_backend(gm, plugins, options.kernels)
    kernels = whole.kernels if whole is not None and whole.kernels else default_kernels
    wrapper_name = whole.wrapper if whole is not None and whole.wrapper else options.wrapper
    limits = plugins.kernel_backends.get(kernels).backend_cls.caps.sort_limits
    lowering = GraphLowering(
        lowering_table(options, plugins), options.realize_cost, resolver, limits
    )
    graph = lowering.run(gm)
    title = f"{graph_name} graph {graph_index}"
    LOG.info("%s: lowered %d FX nodes to %d IR nodes", title, len(gm.graph.nodes), len(graph.nodes))
    total_outputs = len(graph.outputs)
    constants = _take_constant_outputs(graph)
    sizes = _size_outputs(graph, constants)
    planned = plan(graph, _schedule_segments(graph, lowering.barriers))
    specs = tuple(item.spec for item in planned.items if isinstance(item, KernelPlan))
    backend_opts = {kernels: dict(options.kernel_options) if kernels == default_kernels else {}}
    sources = _codegen(specs, resolver, kernels, plugins, backend_opts, lowering.report)
    LOG.info(
        "%s: %d kernels (%s); wrapper %s", title, len(specs), _by_backend(sources), wrapper_name
    )
    int_inputs = {k: v for k, v in lowering.int_inputs.items() if isinstance(v, sympy.Expr)}
    program = build_program(
        graph, planned, sources, int_inputs, lowering.seeds, options.debug_asserts
    )
    program = plan_memory(program)
    wrapper_opts = options.wrapper_options if wrapper_name == options.wrapper else {}
    wrapper = plugins.wrapper_backend(wrapper_name, wrapper_opts)
    loader = plugins.kernel_loader(backend_opts)
    built = wrapper.build(program, loader)
    fn = _with_constants(_entry(built), constants, total_outputs, sizes)
    attrs = tuple(lowering.attrs.values())
    fn = _with_attrs(fn, attrs)
    # the Python wrapper rendered its source to build it: not rendered a second time
    source = built.source if isinstance(built, CompiledModule) else wrapper.render(program)
    compiled = CompiledGraph(
        specs, sources, program, lowering.report, fn, source, graph_name, graph_index,
        attrs, constants, total_outputs,
    )
    LOG.info("%s: %d kernels; extern calls:\n%s", title, compiled.kernel_count, lowering.report)
    log_output_code(title, source, getattr(built, "path", None), sources.values())
    if options.observer is not None:
        options.observer(compiled)
    return compiled


def _by_backend(sources: Mapping[str, KernelSource]) -> str:
    """`cpp: 3, reference: 1` for the log."""
    counts: dict[str, int] = {}
    for source in sources.values():
        counts[source.backend] = counts.get(source.backend, 0) + 1
    return ", ".join(f"{name}: {n}" for name, n in sorted(counts.items())) or "none"


def _schedule_segments(graph: IRGraph, barriers: Sequence[tuple[int, int]]) -> list[Item]:
    """Schedule `graph`, never fusing across a barrier (an op overridden with `fuse=False`)."""
    cuts = sorted({0, len(graph.nodes), *(i for span in barriers for i in span)})
    items: list[Item] = []
    for lo, hi in itertools.pairwise(cuts):
        part = copy.copy(graph)
        part.nodes = graph.nodes[lo:hi]
        items += schedule(part)
    return items


def kernel_contents(spec: KernelSpec) -> tuple[set[str], set[str]]:
    """(overridden aten ops it computes, op-set ops it calls) of one kernel, by tracing it."""
    counter = OpCounter()
    return trace_stages(spec, counter), set(counter.counts)


def _codegen(
    specs: Sequence[KernelSpec],
    resolver: Resolver,
    default: str,
    plugins: Any,
    backend_opts: dict[str, dict[str, Any]],
    report: FallbackReport,
) -> dict[str, KernelSource]:
    """Each kernel's source, from the backend a scoped override picks for it (or `default`)."""
    instances: dict[str, KernelBackend] = {}
    sources: dict[str, KernelSource] = {}
    for spec in specs:
        if spec.name in sources:  # a structurally identical kernel (kernel_plan): same source
            continue
        name = resolver.kernel_backend(*kernel_contents(spec)) if resolver.chain else None
        name = _supporting(spec, name or default, plugins, report)
        if name not in instances:
            backend_opts.setdefault(name, {})
            instances[name] = plugins.kernel_backend(name, backend_opts[name])
        sources[spec.name] = instances[name].codegen(spec)
    return sources


AUTO_KERNELS = {"cuda": ("triton", "reference"), "cpu": ("cpp", "reference")}


def _supporting(spec: KernelSpec, name: str, plugins: Any, report: FallbackReport) -> str:
    """`name`, or when that backend declares an op of `spec` unsupported, another installed backend
    for the kernel's device that supports them all (the device's default first, the reference
    backend last), recorded in `report`. A backend can so be built one op at a time."""
    declared = plugins.kernel_backends.get(name).backend_cls.caps.unsupported
    if not declared:
        return name
    uses = kernel_contents(spec)[1]
    needed = sorted(uses & set(declared))
    if not needed:
        return name
    installed = plugins.kernel_backends.names()
    preferred = [n for n in AUTO_KERNELS.get(spec.device, ()) if n in installed]
    other: str
    for other in [*preferred, *sorted(installed)]:
        caps = plugins.kernel_backends.get(other).backend_cls.caps
        if spec.device in caps.devices and not uses & set(caps.unsupported):
            report.add_kernel(spec.name, name, needed, other)
            return other
    raise UnsupportedOp(needed[0], name, f"no installed backend supports {needed}", spec.name)


def plugins_for(options: FrontendOptions) -> Any:
    """The plugins a compile with `options` uses: only the distributions of its backends (and of
    every lowering and override set) where the plugin index knows them; all of them when scoped
    overrides may name other backends."""
    if options.overrides is not None:
        return plugin_mod.load()
    kernels = (
        {options.kernels} if options.kernels != "auto" else set().union(*AUTO_KERNELS.values())
    )
    return load_for({*kernels, options.wrapper})


def default_kernel_backend(gm: torch.fx.GraphModule, plugins: Any, requested: str) -> str:
    """`requested`, or for "auto" the default for the graph's device: cpp on CPU, triton on CUDA.

    Falls back to the reference backend when the default plugin is not installed.
    """
    if requested != "auto":
        return requested
    devices = {
        node.meta["val"].device.type
        for node in gm.graph.nodes
        if node.op == "placeholder" and isinstance(node.meta.get("val"), torch.Tensor)
    }
    device = "cuda" if "cuda" in devices else "cpu"
    installed = plugins.kernel_backends.names()
    return next(name for name in AUTO_KERNELS[device] if name in installed)


def _take_constant_outputs(graph: IRGraph) -> dict[int, Any]:
    """Remove outputs that are not tensors or size symbols (None gradients, plain ints).

    The Wrapper IR returns only buffers and size symbols; these constants are put back in place
    around the built callable.
    """
    constants = {
        i: (int(out) if isinstance(out, sympy.Integer) else out)
        for i, out in enumerate(graph.outputs)
        if not isinstance(out, StorageView) and not (isinstance(out, sympy.Expr) and out.is_Symbol)
    }
    graph.outputs = [out for i, out in enumerate(graph.outputs) if i not in constants]
    return constants


def _entry(built: Callable[..., Any]) -> Callable[..., Any]:
    """The function to call per run: the Python wrapper's `call` itself, not the
    `CompiledModule` around it (one Python frame less on every call)."""
    return built.fn if isinstance(built, CompiledModule) else built


def _with_attrs(fn: Callable[..., Any], attrs: tuple[torch.Tensor, ...]) -> Callable[..., Any]:
    """`fn` with the graph's tensor constants (`get_attr`) appended to its arguments."""
    if not attrs:
        return fn

    def run(*args: Any) -> Any:
        return fn(*args, *attrs)

    return run


def _size_outputs(graph: IRGraph, constants: dict[int, Any]) -> tuple[sympy.Symbol, ...]:
    """The size symbols of outputs that are expressions of sizes (`2*s0`, saved for a backward),
    appended to the graph's outputs: the expressions are evaluated from them after each call."""
    exprs = [c for c in constants.values() if isinstance(c, sympy.Expr)]
    sizes = tuple(sorted({s for e in exprs for s in e.free_symbols}, key=str))
    graph.outputs = [*graph.outputs, *sizes]
    return sizes


def _with_constants(
    fn: Callable[..., Any],
    constants: dict[int, Any],
    total: int,
    sizes: tuple[sympy.Symbol, ...] = (),
) -> Callable[..., Any]:
    if not constants:
        return fn

    template = [constants.get(i) for i in range(total)]
    slots = [i for i in range(total) if i not in constants]
    exprs = {i: c for i, c in constants.items() if isinstance(c, sympy.Expr)}
    count = len(slots)

    def run(*args: Any) -> list[Any]:
        out = template.copy()
        values = list(fn(*args))
        for i, value in zip(slots, values[:count], strict=True):
            out[i] = value
        if exprs:
            env = dict(zip(sizes, values[count:], strict=True))
            for i, expr in exprs.items():
                out[i] = int(expr.xreplace(env))
        return out

    return run


def compile_exported(
    exported: torch.export.ExportedProgram, options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """Compile a `torch.export` program; the result takes the user inputs and returns outputs."""
    from torch.export.graph_signature import InputKind, OutputKind

    from polyduct.frontend.dynamo import _decompositions

    opts = FrontendOptions.from_mapping(options)
    plugins = plugins_for(opts)
    opts.validate(plugins)
    # ops a scoped override keeps whole are not decomposed (as under torch.compile)
    ep = exported.run_decompositions(_decompositions(opts, plugins))
    sig = ep.graph_signature
    lifted: list[Any] = []
    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            lifted.append(None)
        elif spec.target in ep.state_dict:
            lifted.append(ep.state_dict[spec.target])
        else:
            lifted.append(ep.constants[spec.target])
    compiled = compile_graph(ep.graph_module, [], opts)
    mutated = [
        (i, sig.buffers_to_mutate[spec.arg.name])
        for i, spec in enumerate(sig.output_specs)
        if spec.kind == OutputKind.BUFFER_MUTATION
    ]
    user_names = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    inputs_mutated = [
        (i, user_names.index(sig.user_inputs_to_mutate[spec.arg.name]))
        for i, spec in enumerate(sig.output_specs)
        if spec.kind == OutputKind.USER_INPUT_MUTATION
    ]
    user_out = [i for i, spec in enumerate(sig.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
    in_spec, out_spec = exported.call_spec.in_spec, exported.call_spec.out_spec

    def run(*args: Any, **kwargs: Any) -> Any:
        user_inputs = _flat_inputs(in_spec, args, kwargs)
        it = iter(user_inputs)
        outs = compiled(*[next(it) if v is None else v for v in lifted])
        for i, target in mutated:
            ep.state_dict[target].copy_(outs[i])
        for i, pos in inputs_mutated:  # x.add_(y) on a user input: write the result back
            user_inputs[pos].copy_(outs[i])
        results = [outs[i] for i in user_out]
        if out_spec is not None:
            return pytree.tree_unflatten(results, out_spec)
        return results[0] if len(results) == 1 else tuple(results)

    run.compiled = compiled  # type: ignore[attr-defined]
    return run


def _flat_inputs(in_spec: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The user inputs of an exported program, flattened as it was exported: called with the
    positional and keyword arguments `torch.export` saw (keywords in any order)."""
    if in_spec is None:
        if kwargs:
            raise TypeError(
                f"this exported program takes no keyword arguments, got {sorted(kwargs)}"
            )
        return list(args)
    want_args, want_kwargs = pytree.tree_unflatten(list(range(in_spec.num_leaves)), in_spec)
    if set(kwargs) != set(want_kwargs) or len(args) != len(want_args):
        raise TypeError(
            f"the exported program takes {len(want_args)} positional and keyword arguments "
            f"{sorted(want_kwargs)}; got {len(args)} positional and {sorted(kwargs)}"
        )
    flat, spec = pytree.tree_flatten((tuple(args), {k: kwargs[k] for k in want_kwargs}))
    if spec != in_spec:
        raise TypeError(f"inputs are not structured as the exported program's: {spec} != {in_spec}")
    return flat
