"""The compile path, top to bottom: one `Compilation` per program, `PASSES` per graph.

An entry (`polyduct.frontend.dynamo` for torch.compile, `polyduct.frontend.export` for
torch.export) builds one `Compilation`: the environment read once (`polyduct.environment`),
options validated once, the plugin set loaded once, and the kernel backend choice
(`polyduct.kernel_choice`). Each aten graph then runs through `PASSES`, a tuple of named passes;
each takes the compilation and a `GraphProgram` and returns a new `GraphProgram`, which holds one
more product per pass. After every pass its time is recorded, and after the passes named by the
`dump_after` option (`POLYDUCT_DUMP_AFTER`) what it made is logged; both go to the `polyduct` log
(`TORCH_LOGS="polyduct"`, see polyduct.logs).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import sympy
import torch
import torch.fx

from polyduct import environment, remote_cache
from polyduct.cache_admin import auto_prune
from polyduct.errors import InvalidOption
from polyduct.frontend.entry_checks import warn_load_errors
from polyduct.frontend.options import FrontendOptions
from polyduct.ir import IRGraph, StorageView
from polyduct.kernel import KernelBackend, KernelSource, KernelSpec
from polyduct.kernel_choice import AUTO, KernelChoice, StandIn, kernel_contents
from polyduct.logs import log_output_code
from polyduct.lowering.decompositions import decomposition_table
from polyduct.lowering.graph import FallbackReport, GraphLowering, LoweringFn
from polyduct.lowering.table import core_lowerings
from polyduct.overrides import Resolver, Scope, kept_whole, matches, resolve, scope_from_set
from polyduct.plugin_index import AUTO as AUTO_NEED
from polyduct.plugin_index import load_for
from polyduct.plugins import PluginOptions, Plugins, load
from polyduct.scheduling.fusion import Item, schedule
from polyduct.scheduling.plan import KernelPlan, Planned, plan
from polyduct.wrapper import Built
from polyduct.wrapper.gen import build_program
from polyduct.wrapper.ir import WrapperProgram
from polyduct.wrapper.memory_plan import plan_memory

LOG = logging.getLogger("polyduct.frontend")
"""The pipeline of each compiled graph at INFO (`TORCH_LOGS="polyduct"`, see polyduct.logs)."""
PLUGIN_INDEX_ENV: Final = "POLYDUCT_PLUGIN_INDEX"


@dataclass(frozen=True)
class Compilation:
    """Everything fixed for one compiled program, built once at its entry."""

    options: FrontendOptions
    plugins: Plugins
    choice: KernelChoice
    lowerings: Mapping[str, LoweringFn]  # program scope (options) -> plugins -> core defaults
    override_sets: Mapping[str, Scope]
    env: Mapping[str, str]  # the `POLYDUCT_*` variables read at the entry

    @classmethod
    def create(
        cls, options: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
    ) -> Compilation:
        """Read the environment, validate `options`, load the plugins they need."""
        env = environment.snapshot(environ)
        opts = FrontendOptions.from_mapping(options, env)
        unknown = sorted(set(opts.dump_after) - set(PASS_NAMES))
        if unknown:
            raise InvalidOption(
                "polyduct", "dump_after", unknown[0], "one of " + ", ".join(PASS_NAMES)
            )
        plugins = _load_plugins(opts, PluginOptions.from_env(env), env)
        warn_load_errors(plugins.errors)
        opts.validate(plugins)
        if opts.remote_cache is not None:
            remote_cache.configure(opts.remote_cache)
        auto_prune(environ=env)
        lowerings = core_lowerings()
        lowerings.update({name: plugins.lowerings.get(name).fn for name in plugins.lowerings})
        lowerings.update(opts.lowerings)
        sets = {n: scope_from_set(n, s.overrides) for n, s in plugins.override_sets.items()}
        return cls(opts, plugins, KernelChoice(plugins, opts.kernels), lowerings, sets, env)

    def decompositions(self) -> dict[Any, Any]:
        """The decomposition table, less ops a scoped override runs as an extern or lowering."""
        whole = kept_whole(self.options.overrides, self.override_sets)
        table = decomposition_table()
        if not whole:
            return table
        return {op: fn for op, fn in table.items() if not any(matches(w, str(op)) for w in whole)}

    def kernel_options(self, name: str, prog: GraphProgram) -> dict[str, Any]:
        """Options of kernel backend `name` in graph `prog`: `kernel_options` when it is the
        backend the options chose for the graph (none for a stand-in or an override's), plus
        what the backend's declared environment variables set."""
        given = dict(self.options.kernel_options) if name == prog.optioned else {}
        declared = self.plugins.kernel_backends.get(name).environment
        return environment.declared_options(declared, self.env, given)

    def compile_graph(
        self, gm: torch.fx.GraphModule, index: int = 0, name: str = "inference"
    ) -> CompiledGraph:
        """Run `PASSES` over one aten graph; `index` / `name` (`forward`, `backward`,
        `inference`) select the scoped overrides that apply to it (docs/overrides.md)."""
        prog = GraphProgram(gm, index, name)
        times: list[str] = []
        for pass_name, step in PASSES:
            start = time.perf_counter()
            prog = step(self, prog)
            times.append(f"{pass_name} {1e3 * (time.perf_counter() - start):.1f} ms")
            if pass_name in self.options.dump_after:
                LOG.info("%s after %s:\n%s", prog.title, pass_name, _dump(pass_name, prog))
        LOG.info("%s: passes %s", prog.title, ", ".join(times))
        compiled = _compiled(prog)
        if self.options.observer is not None:
            self.options.observer(compiled)
        return compiled


def _load_plugins(
    opts: FrontendOptions, plugin_opts: PluginOptions, env: Mapping[str, str]
) -> Plugins:
    """Only the distributions of the compile's backends (and of every lowering and override set)
    where the plugin index knows them; all of them when scoped overrides may name other backends."""
    if opts.overrides is not None:
        return load(plugin_opts)
    kernels = AUTO_NEED if opts.kernels == AUTO else opts.kernels
    use_index = env.get(PLUGIN_INDEX_ENV, "1").strip().lower() not in ("0", "false", "no")
    return load_for({kernels, opts.wrapper}, plugin_opts, use_index)


@dataclass(frozen=True)
class Lowered:
    """The IR of one graph and what lowering found besides it."""

    graph: IRGraph
    lowering: GraphLowering
    constants: Mapping[int, Any]  # non-tensor outputs, put back around the built callable
    output_count: int


@dataclass(frozen=True)
class GraphProgram:
    """One graph on its way through `PASSES`: each pass fills one more field."""

    gm: torch.fx.GraphModule
    index: int
    name: str
    resolver: Resolver | None = None
    kernels: str = ""  # the graph's kernel backend
    optioned: str = ""  # the backend `kernel_options` are for ("" when an override chose one)
    wrapper: str = ""  # the graph's wrapper backend
    lowered: Lowered | None = None
    planned: Planned | None = None
    specs: tuple[KernelSpec, ...] = ()
    sources: Mapping[str, KernelSource] = field(default_factory=dict)
    stand_ins: tuple[StandIn, ...] = ()  # kernels run on another backend than the graph's
    program: WrapperProgram | None = None
    built: Built | None = None

    @property
    def title(self) -> str:
        return f"{self.name} graph {self.index}"


def choose_backends(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """The graph's scoped overrides, kernel backend and wrapper backend."""
    resolver, whole = resolve(c.options.overrides, prog.index, prog.name, c.override_sets)
    own = c.choice.for_graph(prog.gm)
    kernels = (whole.kernels if whole is not None else None) or own
    wrapper = (whole.wrapper if whole is not None else None) or c.options.wrapper
    optioned = kernels if kernels == own else ""
    return dataclasses.replace(
        prog, resolver=resolver, kernels=kernels, optioned=optioned, wrapper=wrapper
    )


def lower(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """aten FX graph -> loop-level IR (anything without a lowering becomes an extern call)."""
    assert prog.resolver is not None
    limits = c.plugins.kernel_backends.get(prog.kernels).backend_cls.caps.sort_limits
    lowering = GraphLowering(
        dict(c.lowerings), c.options.realize_cost, prog.resolver, limits, c.options.conv_layout
    )
    graph = lowering.run(prog.gm)
    LOG.info(
        "%s: lowered %d FX nodes to %d IR nodes",
        prog.title,
        len(prog.gm.graph.nodes),
        len(graph.nodes),
    )
    count = len(graph.outputs)
    lowered = Lowered(graph, lowering, _take_constant_outputs(graph), count)
    return dataclasses.replace(prog, lowered=lowered)


def schedule_kernels(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """IR -> fusion groups and their kernel specs, never fusing across an override barrier."""
    assert prog.lowered is not None
    graph = prog.lowered.graph
    caps = c.plugins.kernel_backends.get(prog.kernels).backend_cls.caps
    # a scoped override or a stand-in may give a kernel to another backend: prologues only where
    # every kernel goes to this one
    overridden = prog.resolver is not None and bool(prog.resolver.chain)
    prologues = caps.prologues and not caps.unsupported and not overridden
    items = schedule_segments(graph, prog.lowered.lowering.barriers, prologues)
    planned = plan(graph, items, inplace=caps.inplace)
    specs = tuple(item.spec for item in planned.items if isinstance(item, KernelPlan))
    return dataclasses.replace(prog, planned=planned, specs=specs)


def schedule_segments(
    graph: IRGraph, barriers: Sequence[tuple[int, int]], prologues: bool = True
) -> list[Item]:
    """Schedule `graph`, never fusing across a barrier (an op overridden with `fuse=False`);
    `prologues`: the kernel backend's `Capabilities.prologues`."""
    cuts = sorted({0, len(graph.nodes), *(i for span in barriers for i in span)})
    items: list[Item] = []
    for lo, hi in itertools.pairwise(cuts):
        part = copy.copy(graph)
        part.nodes = graph.nodes[lo:hi]
        items += schedule(part, prologues)
    return items


def codegen(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """Each kernel's source, from the backend a scoped override picks for it (or the graph's)."""
    assert prog.resolver is not None and prog.lowered is not None
    sources, stand_ins = _codegen(c, prog, prog.resolver)
    LOG.info(
        "%s: %d kernels (%s); wrapper %s",
        prog.title,
        len(prog.specs),
        _by_backend(sources),
        prog.wrapper,
    )
    return dataclasses.replace(prog, sources=sources, stand_ins=stand_ins)


def wrapper_ir(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """Schedule and kernels -> the graph's Wrapper IR."""
    assert prog.lowered is not None and prog.planned is not None
    lowering = prog.lowered.lowering
    int_inputs = {k: v for k, v in lowering.int_inputs.items() if isinstance(v, sympy.Expr)}
    program = build_program(
        prog.lowered.graph,
        prog.planned,
        dict(prog.sources),
        int_inputs,
        lowering.seeds,
        c.options.debug_asserts,
    )
    return dataclasses.replace(prog, program=program)


def memory(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """Buffer reuse and dead-free removal on the Wrapper IR."""
    assert prog.program is not None
    return dataclasses.replace(prog, program=plan_memory(prog.program))


def build(c: Compilation, prog: GraphProgram) -> GraphProgram:
    """Wrapper IR -> a callable, through the wrapper backend; kernels loaded by their backends."""
    assert prog.program is not None
    given = dict(c.options.wrapper_options) if prog.wrapper == c.options.wrapper else {}
    declared = c.plugins.wrapper_backends.get(prog.wrapper).environment
    wrapper = c.plugins.wrapper_backend(
        prog.wrapper, environment.declared_options(declared, c.env, given)
    )
    names = {d.backend for d in prog.program.kernels()}
    loader = c.plugins.kernel_loader({n: c.kernel_options(n, prog) for n in names})
    return dataclasses.replace(prog, built=wrapper.make(prog.program, loader))


PASSES: Final[tuple[tuple[str, Callable[[Compilation, GraphProgram], GraphProgram]], ...]] = (
    ("choose_backends", choose_backends),
    ("lower", lower),
    ("schedule", schedule_kernels),
    ("codegen", codegen),
    ("wrapper_ir", wrapper_ir),
    ("plan_memory", memory),
    ("build", build),
)
PASS_NAMES: Final = tuple(name for name, _ in PASSES)


def _codegen(
    c: Compilation, prog: GraphProgram, resolver: Resolver
) -> tuple[dict[str, KernelSource], tuple[StandIn, ...]]:
    instances: dict[str, KernelBackend] = {}
    sources: dict[str, KernelSource] = {}
    stand_ins: list[StandIn] = []
    for spec in prog.specs:
        if spec.name in sources:  # a structurally identical kernel (scheduling.plan): same source
            continue
        name, uses = None, None
        if resolver.chain:  # traced once, for the overrides and the stand-in check
            origins, uses = kernel_contents(spec)
            name = resolver.kernel_backend(origins, uses)
        name, stand_in = c.choice.supporting(spec, name or prog.kernels, uses)
        stand_ins += [stand_in] if stand_in is not None else []
        if name not in instances:
            instances[name] = c.plugins.kernel_backend(name, c.kernel_options(name, prog))
        sources[spec.name] = instances[name].codegen(spec)
    return sources, tuple(stand_ins)


def _dump(pass_name: str, prog: GraphProgram) -> str:
    """What pass `pass_name` made, as text."""
    if pass_name == "choose_backends":
        return f"kernels {prog.kernels}, wrapper {prog.wrapper}"
    if pass_name == "lower" and prog.lowered is not None:
        return "\n".join(repr(node) for node in prog.lowered.graph.nodes)
    if pass_name == "schedule":
        return "\n".join(
            f"{s.name}: {s.kind} over {s.ranges} x {s.reduction_ranges}, "
            f"buffers {[b.name for b in s.buffers]}"
            for s in prog.specs
        )
    if pass_name == "codegen":
        return "\n\n".join(f"# {s.name} ({s.backend})\n{s.source}" for s in prog.sources.values())
    if pass_name == "build" and prog.built is not None:
        return prog.built.source
    assert prog.program is not None
    return "\n".join(repr(line) for line in prog.program.lines)


def _by_backend(sources: Mapping[str, KernelSource]) -> str:
    """`cpp: 3, reference: 1` for the log."""
    counts: dict[str, int] = {}
    for source in sources.values():
        counts[source.backend] = counts.get(source.backend, 0) + 1
    return ", ".join(f"{name}: {n}" for name, n in sorted(counts.items())) or "none"


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
    attrs: tuple[torch.Tensor | torch.nn.Module, ...] = ()  # constants, subgraphs
    constant_outputs: Mapping[int, Any] = field(default_factory=dict)
    output_count: int = 0

    @property
    def kernel_count(self) -> int:
        return len(self.specs)

    def __call__(self, *args: Any) -> list[Any]:
        return list(self.fn(*args))


def _compiled(prog: GraphProgram) -> CompiledGraph:
    """The finished graph: the built callable with constants around it, and every product."""
    assert prog.lowered is not None and prog.program is not None and prog.built is not None
    lowered, built = prog.lowered, prog.built
    fn = _with_constants(built.fn, dict(lowered.constants), lowered.output_count)
    attrs = tuple(lowered.lowering.attrs.values())
    found = lowered.lowering.report  # lowering's report, plus the codegen pass's stand-ins
    report = FallbackReport(list(found.entries), list(found.kernels))
    for stand_in in prog.stand_ins:
        stand_in.record(report)
    compiled = CompiledGraph(
        prog.specs,
        dict(prog.sources),
        prog.program,
        report,
        _with_attrs(fn, attrs),
        built.source,
        prog.name,
        prog.index,
        attrs,
        lowered.constants,
        lowered.output_count,
    )
    LOG.info(
        "%s: %d kernels; extern calls:\n%s",
        prog.title,
        compiled.kernel_count,
        report,
    )
    log_output_code(prog.title, built.source, built.path, prog.sources.values())
    return compiled


def _take_constant_outputs(graph: IRGraph) -> dict[int, Any]:
    """Remove outputs that are not tensors or size expressions (None gradients, plain ints).

    The Wrapper IR returns only buffers and size symbols; these constants are put back in place
    around the built callable.
    """
    constants = {
        i: (int(out) if isinstance(out, sympy.Integer) else out)
        for i, out in enumerate(graph.outputs)
        if not isinstance(out, StorageView)
        and not (isinstance(out, sympy.Expr) and out.is_integer and out.free_symbols)
    }
    graph.outputs = [out for i, out in enumerate(graph.outputs) if i not in constants]
    return constants


def _with_attrs(fn: Callable[..., Any], attrs: tuple[Any, ...]) -> Callable[..., Any]:
    """`fn` with the graph's tensor constants (`get_attr`) appended to its arguments."""
    if not attrs:
        return fn

    def run(*args: Any) -> Any:
        return fn(*args, *attrs)

    return run


def _with_constants(
    fn: Callable[..., Any], constants: dict[int, Any], total: int
) -> Callable[..., Any]:
    if not constants:
        return fn

    template = [constants.get(i) for i in range(total)]
    slots = [i for i in range(total) if i not in constants]

    def run(*args: Any) -> list[Any]:
        out = template.copy()
        for i, value in zip(slots, fn(*args), strict=True):
            out[i] = value
        return out

    return run
