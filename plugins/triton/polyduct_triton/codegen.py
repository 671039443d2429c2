"""KernelSpec -> one self-contained Python module: Triton kernel, helpers and launcher.

Every value is a 2-D block: outer points along axis 0 (XBLOCK), reduction points along axis 1
(RBLOCK). Stages that iterate over the reduction dims loop over RBLOCK-sized chunks; the launcher
picks RBLOCK >= rnumel for scan and sort stages, and whenever the reduction fits one block, so
those loops run once (persistent).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import sympy

from polyduct.codegen import IndentedBuffer, identifier, string_literal
from polyduct.indexing import product, unflatten
from polyduct.kernel import KernelSpec
from polyduct_triton.context import KernelContext, StageCode
from polyduct_triton.launcher import render_launcher
from polyduct_triton.prelude import prelude_for


def generate(spec: KernelSpec, ops_cls: type, interpret: bool, autotune: bool = True) -> str:
    """The module source for `spec`, traced with a fresh `ops_cls(ctx)` per stage; without
    `autotune` its launcher always takes the heuristic config."""
    ctx = KernelContext(spec, interpret)
    xs, rs = ctx.xs, ctx.rs
    for stage in spec.stages:
        ctx.begin(stage.kind)
        stage.body(_Recording(ops_cls(ctx), ctx.ops_used), xs, rs if stage.kind != "outer" else ())
    name = identifier(spec.name, prefix="k")
    out = IndentedBuffer()
    out.line(f"# polyduct-triton kernel {name} on {identifier(spec.device)}")
    out.lines(["import torch", "import triton", "import triton.language as tl"])
    if not interpret:  # the interpreter has no libdevice; compiled kernels use it (triton >= 3.2)
        out.line("from triton.language.extra import libdevice")
    out.line("from polyduct_triton.kernel_runtime import KernelFacts, KernelRuntime")
    out.line("from polyduct_triton.launcher import jit")
    out.line("")
    out.line(f"INTERPRET = {interpret}")
    out.line(f"NAME = {string_literal(spec.name)}")
    out.line("_jit = jit")
    kernel = IndentedBuffer()
    _kernel(kernel, ctx, xs, rs)
    text = kernel.getvalue()
    for helper in [prelude_for(text + "".join(ctx.helpers)), *ctx.helpers]:
        if helper.strip():
            out.lines(["", ""] + helper.strip("\n").replace("@triton.jit", "@_jit").splitlines())
    out.lines(["", ""])
    out.lines(text.rstrip("\n").splitlines())
    out.lines(["", ""])
    digest = hashlib.sha256(out.getvalue().encode()).hexdigest()  # the kernel and its helpers
    out.lines(render_launcher(spec, ctx, text.count("\n"), digest, autotune).splitlines())
    return out.getvalue()


class _Recording:
    """The ops handler as a stage body sees it, noting each op the body calls (`ops_used`
    decides whether the kernel may contract a*b+c; see launcher.CONTRACTIBLE)."""

    def __init__(self, ops: object, used: set[str]) -> None:
        self._ops, self._used = ops, used

    def __getattr__(self, name: str) -> object:
        self._used.add(name)
        return getattr(self._ops, name)


def _signature(ctx: KernelContext) -> str:
    params = [ctx.arg(b.name) for b in ctx.spec.args]
    params += [ctx.args[s.name] for s in ctx.spec.size_args]
    params += ["xnumel", "rnumel"] + (["err_ptr"] if ctx.checks else [])
    params += ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr", "IDX64: tl.constexpr",
               "PERSISTENT: tl.constexpr"]
    return ", ".join(params)


def _defs(ctx: KernelContext, names: Sequence[sympy.Symbol], flat: str,
          ranges: Sequence[sympy.Expr]) -> list[str]:
    coords = unflatten(sympy.Symbol(flat, integer=True, nonnegative=True), ranges)
    return [f"{v.name} = {ctx.index(c)}" for v, c in zip(names, coords, strict=True)]


def _kernel(out: IndentedBuffer, ctx: KernelContext, xs: Sequence[sympy.Symbol],
            rs: Sequence[sympy.Symbol]) -> None:
    out.line("@_jit")
    out.line(f"def _kernel({_signature(ctx)}):")
    with out.indent():
        out.line("if IDX64:")
        out.line("    xindex = tl.program_id(0).to(tl.int64) * XBLOCK + "
                 "tl.arange(0, XBLOCK)[:, None].to(tl.int64)")
        out.line("else:")
        out.line("    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        _mask(out, "xmask", "xindex < xnumel", product(ctx.spec.ranges), "XBLOCK", "[XBLOCK, 1]")
        out.lines(_defs(ctx, xs, "xindex", ctx.spec.ranges))
        if not any(stage.kind != "outer" for stage in ctx.stages) or not rs:
            for stage in ctx.stages:
                _stage(out, ctx, stage, rs)
            return
        # PERSISTENT (the launcher's RBLOCK covers the row): no loops, and a row loaded by one
        # stage is not loaded again by the next (softmax, layernorm: one read per element).
        out.line("if PERSISTENT:")
        with out.indent():
            _persistent(out, ctx, rs)
        out.line("else:")
        with out.indent():
            for stage, hints in zip(ctx.stages, _evictions(ctx.stages), strict=True):
                _stage(out, ctx, stage, rs, hints)


def _stage(out: IndentedBuffer, ctx: KernelContext, stage: StageCode,
           rs: Sequence[sympy.Symbol], hints: dict[str, str] | None = None) -> None:
    loops = stage.kind != "outer" and bool(ctx.spec.reduction_ranges)
    if not loops:
        out.lines(stage.loop.getvalue().splitlines())
        out.lines(stage.post.getvalue().splitlines())
        return
    out.lines(stage.pre.getvalue().splitlines())
    out.line("for roffset in range(0, rnumel, RBLOCK):")
    with out.indent():
        _reduction_index(out, ctx, rs)
        out.lines([_hinted(line, hints or {}) for line in stage.loop.getvalue().splitlines()])
        out.line("pass")
    out.lines(stage.post.getvalue().splitlines())


def _reduction_index(out: IndentedBuffer, ctx: KernelContext,
                     rs: Sequence[sympy.Symbol]) -> None:
    """rindex, rmask and the reduction variables of the block starting at `roffset`."""
    out.line("if IDX64:")
    out.line("    rindex = roffset + tl.arange(0, RBLOCK)[None, :].to(tl.int64)")
    out.line("else:")
    out.line("    rindex = roffset + tl.arange(0, RBLOCK)[None, :]")
    _mask(out, "rmask", "rindex < rnumel", product(ctx.spec.reduction_ranges), "RBLOCK",
          "[1, RBLOCK]")
    out.lines(_defs(ctx, rs, "rindex", ctx.spec.reduction_ranges))


def _mask(out: IndentedBuffer, name: str, test: str, numel: sympy.Expr, block: str,
          shape: str) -> None:
    """`name = test`, the lanes of a block in range; where the kernel's sizes are static and the
    config's blocks tile them, a constant True instead, decided when Triton compiles the config
    (`numel % block` of two constants): Triton then drops the masks of loads, stores and
    selects (6% less to compile for float32 row_sum's kernel, 3-9% fewer instructions)."""
    if not (isinstance(numel, sympy.Integer) and numel > 0):
        out.line(f"{name} = {test}")
        return
    out.line(f"if {int(numel)} % {block} == 0:")
    out.line(f"    {name} = tl.full({shape}, True, tl.int1)")
    out.line("else:")
    out.line(f"    {name} = {test}")


_LOAD = re.compile(r"(\w+) = (.*\btl\.load\(.*)")
_WRITES = ("tl.store(", "tl.atomic_")
_OTHER = ", other=0)"  # how memory_ops.load ends its tl.load call


def _evictions(stages: Sequence[StageCode]) -> list[dict[str, str]]:
    """Cache hints for the loads of looped stages, per stage: load text -> eviction policy.

    Each stage loops over the row again, so a row that a later stage loads again is kept in
    cache while this stage streams it (`evict_last`), and the last stage to load it lets it go
    (`evict_first`): the row comes from memory once. Loads that already carry a hint keep it.
    """
    loads = [{m.group(2) for line in s.loop.getvalue().splitlines()
              if (m := _LOAD.fullmatch(line)) and "eviction_policy" not in line and _OTHER in line}
             for s in stages]
    hints = []
    for i, mine in enumerate(loads):
        later = set().union(*loads[i + 1:])
        earlier = set().union(*loads[:i])
        hints.append({v: "evict_last" if v in later else "evict_first"
                      for v in mine if v in later or v in earlier})
    return hints


def _hinted(line: str, hints: dict[str, str]) -> str:
    match = _LOAD.fullmatch(line)
    policy = hints.get(match.group(2)) if match else None
    if policy is None:
        return line
    return line.replace(_OTHER, f", other=0, eviction_policy='{policy}')", 1)


def _persistent(out: IndentedBuffer, ctx: KernelContext, rs: Sequence[sympy.Symbol]) -> None:
    """Every stage once, in order, over one RBLOCK that covers the reduction.

    A load repeated by a later stage (same text: buffer, index and mask) takes the earlier value,
    unless anything was stored in between (a store may alias a loaded buffer).
    """
    out.line("roffset = 0")
    _reduction_index(out, ctx, rs)
    loaded: dict[str, str] = {}
    for stage in ctx.stages:
        sections = (stage.loop, stage.post) if stage.kind == "outer" else (
            stage.pre, stage.loop, stage.post)
        for section in sections:
            for line in section.getvalue().splitlines():
                out.line(_reuse_load(line, loaded))


def _reuse_load(line: str, loaded: dict[str, str]) -> str:
    if any(w in line for w in _WRITES):
        loaded.clear()
        return line
    match = _LOAD.fullmatch(line)  # only unindented lines: nested blocks may not always run
    if match is None:
        return line
    name, value = match.groups()
    if value in loaded:
        return f"{name} = {loaded[value]}"
    loaded[value] = name
    return line


def numel_exprs(spec: KernelSpec) -> tuple[sympy.Expr, sympy.Expr]:
    """xnumel and rnumel of `spec` as sympy expressions over its size symbols."""
    return product(spec.ranges), product(spec.reduction_ranges)
