"""Column reductions: a reduction whose loads are contiguous across outputs and strided along the
reduction (`x.sum(0)` of a row-major matrix, a bias gradient, a LayerNorm over the channels of an
NCHW tensor seen as NHWC) runs with one SIMD lane per output.

The row loop would read one element per row step, which GCC runs scalar. Here a block of `lanes`
outputs adjacent along the last outer dim is reduced together: for each reduction index, one
vector load covers the block, and lane l accumulates output x<last> = pd_xc + l, its values in
order (a Welford or argmax lane sees its column as a scalar loop would; totals are merged every
CHUNK steps, for accuracy). After the reduction each lane's state is moved into lane 0 of its own
accumulator and finished, and the kernel's later stages (outer, or inner: a LayerNorm's
normalisation pass) run for that output as the row loop runs them. Outputs past the last whole
block of each row of the last dim take the row loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import sympy

from polyduct.codegen import IndentedBuffer
from polyduct.indexing import index_vars
from polyduct.kernel import KernelSpec
from polyduct_cpp.emitter import Emitter, StageState
from polyduct_cpp.loops import decompose, emit_lines, split, strided
from polyduct_cpp.options import CppOptions


def column_reduction(
    spec: KernelSpec,
    loads: Sequence[sympy.Expr],
    states: Sequence[StageState],
    lanes: int,
    group: int,
) -> bool:
    """Whether `spec` is a reduction, reduce stages then outer and inner stages only, whose
    loads step along the reduction with a stride more often than along the last outer dim, and
    whose outer dims from `group` on (see `loops.row_major_from`) hold at least `lanes` points."""
    if not spec.ranges or not spec.reduction_ranges or not states:
        return False
    reduces = _leading_reduces(states)
    if not reduces or any(s.kind not in ("outer", "inner") for s in states[len(reduces) :]):
        return False
    if any("pd_check_index" in s.hoisted.getvalue() for s in reduces):  # checked once per row
        return False
    extent = sympy.Mul(*spec.ranges[group:])
    if extent.is_Integer and int(extent) < lanes:
        return False
    x = index_vars("x", len(spec.ranges))[-1]
    r = index_vars("r", len(spec.reduction_ranges))[-1]
    return sum(strided(e, r) for e in loads) > sum(strided(e, x) for e in loads)


# the name a line declares or assigns (`auto t0_1 = ...`, `pd_loc_buf0_acc = ...`)
_DEFINED = re.compile(r"^\s*(?:[\w:<>, ]+\s+)?(\w+)(?:\[[^\]]*\])?\s*=[^=]", re.MULTILINE)


def _leading_reduces(states: Sequence[StageState]) -> list[StageState]:
    """The reduce stages the kernel starts with, as long as each is independent of those before
    it (reads none of their values: `sum(0)` and `amax(0)` of one tensor, Welford's pass and a
    count beside it; not logsumexp's sum of exp(x - max)). They then run side by side in one
    block loop. Empty when the first stage is not a reduce stage."""
    reduces: list[StageState] = []
    defined: set[str] = set()
    for state in states:
        if state.kind != "reduce":
            break
        text = state.hoisted.getvalue() + state.body.getvalue()
        if any(re.search(rf"\b{re.escape(name)}\b", text) for name in defined):
            return []
        reduces.append(state)
        for part in (state.hoisted, state.body, state.post):
            defined.update(_DEFINED.findall(part.getvalue()))
        defined.update(acc for _, acc in state.accs)
    return reduces


def column_lanes(spec: KernelSpec, simd_lanes: int, group: int) -> int:
    """Outputs per block: four SIMD registers' worth (a row step then reads whole cache lines
    several at a time), fewer when the dims from `group` on hold fewer points, at most 64."""
    extent = sympy.Mul(*spec.ranges[group:])
    lanes = min(64, 4 * simd_lanes)
    while extent.is_Integer and lanes > simd_lanes and int(extent) < lanes:
        lanes //= 2
    return max(lanes, simd_lanes)


def columns(
    out: IndentedBuffer,
    emitter: Emitter,
    states: list[StageState],
    options: CppOptions,
    tail: IndentedBuffer,
    stage: Callable[[IndentedBuffer, StageState], None],
    group: int,
) -> None:
    """Blocks of `lanes` outputs along the outer dims from `group` on (one dim, x<last>, in
    `emitter`'s indexes) across threads, then the rest of each row of those dims through `tail`
    (the row loop over flat outputs [pd_lo, pd_hi)). `stage` emits one later stage for one
    output, as the row loop does."""
    lanes = emitter.lanes
    last = len(emitter.spec.ranges) - 1
    reduces = _leading_reduces(states)
    rows = " * ".join(f"pd_n{i}" for i in range(group)) or "1"
    out.line(f"const int64_t pd_rows = {rows};  // points of the outer dims before the group")
    out.line(f"const int64_t pd_ncol = {' * '.join(f'pd_n{i}' for i in range(group, last + 1))};")
    out.line(f"const int64_t pd_xmain = pd_ncol - pd_ncol % {lanes};")
    out.line(f"const int64_t pd_blocks = pd_xmain / {lanes};  // per row")
    loop = IndentedBuffer()
    loop.line("for (int64_t pd_xb = pd_lo; pd_xb < pd_hi; ++pd_xb) {")
    with loop.indent():
        if group:
            loop.line("const int64_t pd_xo = pd_xb / pd_blocks;")
            decompose(loop, "pd_xo", "x", "pd_n", group)
        loop.line(f"const int64_t pd_xc = pd_xb % pd_blocks * {lanes};")
        for reduce in reduces:
            for ctype, acc in reduce.accs:
                loop.line(f"{ctype} {acc}_all;")
        loop.line(f"for (int64_t pd_rc = 0; pd_rc < pd_rnumel; pd_rc += {CHUNK}) {{")
        with loop.indent():
            for reduce in reduces:
                loop.line("{")
                with loop.indent():
                    _chunk(loop, emitter, reduce, lanes, last)
                loop.line("}")
        loop.line("}")
        loop.line(f"for (int64_t pd_l = 0; pd_l < {lanes}; ++pd_l) {{")
        with loop.indent():
            loop.line(f"const int64_t x{last} = pd_xc + pd_l;")
            loop.lines(emitter.local_declarations())
            for reduce in reduces:
                loop.line("{")
                with loop.indent():
                    _lane_results(loop, reduce, lanes)
                loop.line("}")
            for state in states[len(reduces) :]:
                loop.line("{")
                with loop.indent():
                    stage(loop, state)
                loop.line("}")
        loop.line("}")
    loop.line("}")
    out.line("{")
    with out.indent():
        split(out, options, "pd_rows * pd_blocks", "pd_rows * pd_xmain * pd_rnumel", loop)
    out.line("}")
    out.line("if (pd_xmain < pd_ncol) {")
    with out.indent():
        out.line("auto pd_tail = [&](const int64_t pd_lo, const int64_t pd_hi) {")
        with out.indent():
            emit_lines(out, tail.getvalue())
        out.line("};")
        ends = IndentedBuffer()
        ends.line("for (int64_t pd_xo = pd_lo; pd_xo < pd_hi; ++pd_xo) {")
        ends.line("    pd_tail(pd_xo * pd_ncol + pd_xmain, (pd_xo + 1) * pd_ncol);")
        ends.line("}")
        work = "pd_rows * (pd_ncol - pd_xmain) * pd_rnumel"
        split(out, options, "pd_rows", work, ends)
    out.line("}")


CHUNK = 256
"""Reduction steps accumulated before they are merged into the running total: a column of n
values is summed in chunks, so rounding error grows with n / CHUNK + CHUNK, not n."""


def _chunk(
    out: IndentedBuffer, emitter: Emitter, reduce: StageState, lanes: int, last: int
) -> None:
    """Reduce steps [pd_rc, pd_rc + CHUNK) of the block into fresh accumulators, then merge
    them lane by lane into the block's totals (`<acc>_all`)."""
    for ctype, acc in reduce.accs:
        out.line(f"{ctype} {acc};")
    out.line(f"const int64_t pd_rend = std::min<int64_t>(pd_rnumel, pd_rc + {CHUNK});")
    out.line("for (int64_t pd_rf = pd_rc; pd_rf < pd_rend; ++pd_rf) {")
    with out.indent():
        decompose(out, "pd_rf", "r", "pd_m", len(emitter.spec.reduction_ranges))
        for _, acc in reduce.accs:
            out.line(f"{acc}.prepare();")
        out.line("" if reduce.no_simd else "#pragma omp simd")
        out.line(f"for (int64_t pd_l = 0; pd_l < {lanes}; ++pd_l) {{")
        with out.indent():
            out.line(f"const int64_t x{last} = pd_xc + pd_l;")
            emit_lines(out, reduce.hoisted.getvalue())  # per output: every lane is one
            emit_lines(out, reduce.body.getvalue())
        out.line("}")
    out.line("}")
    out.line(f"for (int64_t pd_l = 0; pd_l < {lanes}; ++pd_l) {{")
    for _, acc in reduce.accs:
        out.line(f"    {acc}_all.merge(pd_l, {acc}, pd_l);")
    out.line("}")


def _lane_results(out: IndentedBuffer, reduce: StageState, lanes: int) -> None:
    """Lane pd_l of each accumulator alone in lane 0 of a fresh one (the other lanes are the
    identity), finished; the stage's result lines read those."""
    post = reduce.post.getvalue()
    for ctype, acc in reduce.accs:
        out.line(f"{ctype} {acc}_col;")
        out.line(f"{acc}_col.merge(0, {acc}_all, pd_l);")
        out.line(f"pd_fold<{lanes}>({acc}_col);")
        post = re.sub(rf"\b{re.escape(acc)}\b", f"{acc}_col", post)
    emit_lines(out, post)
