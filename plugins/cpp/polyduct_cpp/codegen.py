"""Kernel source from a `KernelSpec`: trace every stage with `CppOps`, then wrap the traced bodies
in loops: OpenMP across outer points (above a work threshold), SIMD on the innermost loop, and
reductions accumulated in one accumulator per SIMD lane.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sympy

from polyduct.codegen import IndentedBuffer, identifier
from polyduct.indexing import index_vars
from polyduct.kernel import KernelSpec
from polyduct_cpp.columns import column_lanes, column_reduction, columns
from polyduct_cpp.ctypes_map import storage_type
from polyduct_cpp.emitter import StageState
from polyduct_cpp.loops import (
    decompose,
    emit_lines,
    flattenable,
    row_major_from,
    split,
    strided,
    tile_slot,
    transposed,
)
from polyduct_cpp.ops import CppOps
from polyduct_cpp.options import CppOptions
from polyduct_cpp.stage import StageEmitter


def kernel_symbol(name: str) -> str:
    """The C symbol of kernel `name`."""
    return identifier(f"pd_kernel_{name}")


def _trace(
    spec: KernelSpec,
    options: CppOptions,
    flatten: dict[sympy.Symbol, sympy.Expr],
    row_cache: bool = False,
    lanes: int | None = None,
    tile: tuple[int, int, int] | None = None,
) -> tuple[StageEmitter, list[StageState]]:
    emitter = StageEmitter(spec, options.check_indices)
    emitter.lanes = lanes or options.simd_lanes
    emitter.tile = tile
    emitter.flatten = flatten
    emitter.row_cache = row_cache
    ops = CppOps(emitter)
    xs = index_vars("x", len(spec.ranges))
    rs = index_vars("r", len(spec.reduction_ranges))
    states = []
    for i, stage in enumerate(spec.stages):
        state = StageState(stage.kind)
        emitter.begin(state, i)
        stage.body(ops, xs, rs if stage.kind != "outer" else ())
        states.append(state)
    return emitter, states


def generate(spec: KernelSpec, options: CppOptions) -> tuple[str, list[str]]:
    """C++ source of `spec` (one extern "C" function) and its error-site table."""
    emitter, states = _trace(spec, options, {})
    ndim = len(spec.ranges)
    flat = spec.kind == "pointwise" and ndim > 1 and flattenable(emitter.index_exprs, spec.ranges)
    if flat:
        # x_last runs over all outer points; the other outer variables vanish from indexes.
        zeroed = {x: sympy.Integer(0) for x in index_vars("x", ndim)[:-1]}
        emitter, states = _trace(spec, options, zeroed)
    inner, tiled = ndim - 1, None
    if spec.kind == "pointwise" and not flat:
        inner = _inner_dim(emitter.load_exprs, ndim)
        across = _tile_dim(emitter.load_exprs + emitter.store_exprs, ndim, inner)
        if _rewritten_output(spec, emitter.accesses):
            across = None
        if across is not None:
            tiled = (inner, across, TILE)
            emitter, states = _trace(spec, options, {}, tile=tiled)
    reduction = spec.kind != "pointwise" and bool(spec.ranges)
    group = row_major_from(emitter.index_exprs, spec.ranges) if reduction else 0
    by_columns = reduction and column_reduction(
        spec, emitter.load_exprs, states, options.simd_lanes, group
    )
    if by_columns:
        lanes = column_lanes(spec, options.simd_lanes, group)
        emitter, states = _trace(spec, options, {}, lanes=lanes)
    out = IndentedBuffer()
    params = [emitter.storage_decl(b.name) for b in spec.args]
    params += [f"int64_t {emitter.names[s.name]}" for s in spec.size_args]
    params.append("int64_t* __restrict__ pd_err")
    out.line(f'extern "C" void {kernel_symbol(spec.name)}({", ".join(params)}) {{')
    with out.indent():
        _sizes(out, emitter, "pd_n", spec.ranges, "pd_xnumel")
        _sizes(out, emitter, "pd_m", spec.reduction_ranges, "pd_rnumel")
        out.line("(void)pd_err; (void)pd_xnumel; (void)pd_rnumel;")
        _prefault_outputs(out, spec, emitter, options)
        if flat:
            _flat_pointwise(out, states, ndim - 1, options)
        elif tiled is not None:
            _tiled_pointwise(out, emitter, states, options, tiled)
        elif spec.kind == "pointwise":
            _pointwise(out, states, ndim, options, inner)
        elif by_columns:
            tail = row_loop(emitter, states, ndim, options)
            # the grouped dims as one: x<last> runs over all their points, the others vanish
            joined = {x: sympy.Integer(0) for x in index_vars("x", ndim)[group:-1]}
            col, col_states = _trace(spec, options, joined, lanes=lanes)
            rdim = len(spec.reduction_ranges)

            def stage(loop: IndentedBuffer, state: StageState) -> None:
                _STAGES[state.kind](loop, state, rdim, lanes, options)

            columns(out, col, col_states, options, tail, stage, group)
        else:
            _rows(out, spec, options, emitter, states)
    out.line("}")
    return out.getvalue(), list(emitter.sites)


_PREFAULT_MIN_BYTES = 1 << 20  # PD_PREFAULT_MIN_BYTES of polyduct_cpp.h


def _prefault_outputs(
    out: IndentedBuffer, spec: KernelSpec, emitter: StageEmitter, options: CppOptions
) -> None:
    """Fault in fresh output buffers ahead of the loops (`pd_prefault`; large buffers only)."""
    threads = "true" if options.openmp else "false"
    for buf in spec.args:
        small = buf.numel.is_Integer and int(buf.numel) * buf.dtype.itemsize < _PREFAULT_MIN_BYTES
        if buf.role != "out" or small:
            continue
        ctype = storage_type(buf.dtype)
        size = f"int64_t({emitter.index(buf.numel)}) * int64_t(sizeof({ctype}))"
        out.line(f"pd_prefault({emitter.names[buf.name]}, {size}, {threads});")


def _rows(
    out: IndentedBuffer,
    spec: KernelSpec,
    options: CppOptions,
    emitter: StageEmitter,
    states: list[StageState],
) -> None:
    """The per-row loops; with the row cache where rows are short (a runtime choice when the
    row length is symbolic)."""
    rnumel = sympy.Mul(*spec.reduction_ranges)
    limit = options.row_cache_limit
    static = rnumel.is_Integer
    if len(spec.stages) < 2 or (static and not 0 < int(rnumel) <= limit):
        _per_row(out, emitter, states, len(spec.ranges), options)
        return
    cached, cached_states = _trace(spec, options, {}, row_cache=True)
    if not cached.row_arrays or cached.row_cache_unsafe:
        _per_row(out, emitter, states, len(spec.ranges), options)
        return
    if static:
        _per_row(out, cached, cached_states, len(spec.ranges), options)
        return
    out.line(f"if (pd_rnumel <= {limit}) {{")
    with out.indent():
        _per_row(out, cached, cached_states, len(spec.ranges), options)
    out.line("} else {")
    with out.indent():
        _per_row(out, emitter, states, len(spec.ranges), options)
    out.line("}")


def _sizes(
    out: IndentedBuffer, emitter: StageEmitter, stem: str, ranges: Sequence[sympy.Expr], total: str
) -> None:
    names = []
    for i, size in enumerate(ranges):
        out.line(f"const int64_t {stem}{i} = {emitter.index(size)};")
        names.append(f"{stem}{i}")
    out.line(f"const int64_t {total} = {' * '.join(names) or '1'};")


def _inner_dim(loads: Sequence[sympy.Expr], ndim: int) -> int:
    """The dimension of the SIMD loop of a pointwise kernel: the last one, unless loads step
    through it with a stride other than 0 or 1 and another dimension has fewer such loads
    (a transposed input). GCC does not vectorise an `omp simd` loop over loads with a large
    stride (it runs them scalar: GELU's backward over a transposed 256x64 view took 135 µs
    where the swapped loop takes 26); strided stores it vectorises."""
    xs = index_vars("x", ndim)
    counts = [sum(strided(e, x) for e in loads) for x in xs]
    best = min(range(ndim), key=lambda d: (counts[d], -d))
    return best if counts[best] < counts[-1] else ndim - 1


def _tile_dim(accesses: Sequence[sympy.Expr], ndim: int, inner: int) -> int | None:
    """The dimension to tile together with the SIMD dimension `inner`: the one along which most
    accesses that step through `inner` with a stride are contiguous (a transposed store or
    load); None when no access is strided that way. A transposed load then reads the same few
    cache lines for a whole tile (a + b.t() at 2048x2048: 32 ms untiled, 6-9 ms tiled)."""
    xs = index_vars("x", ndim)
    counts = [
        0 if d == inner else sum(transposed(e, xs[inner], x) for e in accesses)
        for d, x in enumerate(xs)
    ]
    best = max(range(ndim), key=lambda d: (counts[d], d))
    return best if counts[best] > 0 else None


def _rewritten_output(spec: KernelSpec, accesses: Mapping[str, int]) -> bool:
    """Whether an output is accessed more than once (stored twice, a zero fill then a scatter's
    accumulation, or stored then loaded): a tiled kernel writes its transposed stores after the
    tile, so such a kernel is not tiled."""
    return any(spec.buffer(name).role == "out" and n > 1 for name, n in accesses.items())


TILE = 32
"""Tile edge of transposing pointwise kernels: the rows one tile writes across stay in L1."""


def _tiled_pointwise(
    out: IndentedBuffer,
    emitter: StageEmitter,
    states: list[StageState],
    options: CppOptions,
    tiled: tuple[int, int, int],
) -> None:
    """Tiles of TILE x TILE over dims `across` and `inner` (the SIMD loop): the body runs with
    its loads contiguous, transposed stores go to tile arrays (`emitter.tile_stores`), and each
    tile is copied out with the stores contiguous (`x_across` innermost)."""
    inner, across, edge = tiled
    simd = not any(s.no_simd for s in states)
    body = "".join(s.body.getvalue() for s in states)
    others = [d for d in range(len(emitter.spec.ranges)) if d not in (inner, across)]
    loop = IndentedBuffer()
    for tile in emitter.tile_stores:
        loop.line(f"alignas(64) {tile.ctype} {tile.array}[{edge * edge}];")
    slot = tile_slot(inner, across, edge)
    loop.line("for (int64_t pd_xo = pd_lo; pd_xo < pd_hi; ++pd_xo) {")
    with loop.indent():
        loop.line("const int64_t pd_rest = pd_xo / pd_tiles;")
        decompose(loop, "pd_rest", "x", "pd_n", others)
        loop.line(f"const int64_t pd_t0 = (pd_xo % pd_tiles) * {edge};")
        loop.line(f"const int64_t pd_t1 = std::min<int64_t>(pd_n{across}, pd_t0 + {edge});")
        loop.line(f"for (int64_t pd_ib = 0; pd_ib < pd_n{inner}; pd_ib += {edge}) {{")
        with loop.indent():
            loop.line(f"const int64_t pd_ie = std::min<int64_t>(pd_n{inner}, pd_ib + {edge});")
            loop.line(f"for (int64_t x{across} = pd_t0; x{across} < pd_t1; ++x{across}) {{")
            with loop.indent():
                loop.line("#pragma omp simd" if simd else "")
                _x_loop(loop, inner, body, "pd_ib", "pd_ie")
            loop.line("}")
            if emitter.tile_stores:
                copies = "".join(f"{t.memory} = {t.array}[{slot}];\n" for t in emitter.tile_stores)
                loop.line(f"for (int64_t x{inner} = pd_ib; x{inner} < pd_ie; ++x{inner}) {{")
                with loop.indent():
                    loop.line("#pragma omp simd")
                    _x_loop(loop, across, copies, "pd_t0", "pd_t1")
                loop.line("}")
        loop.line("}")
    loop.line("}")
    out.line(f"const int64_t pd_tiles = (pd_n{across} + {edge - 1}) / {edge};")
    count = " * ".join([f"pd_n{d}" for d in others] + ["pd_tiles"])
    split(out, options, count, "pd_xnumel", loop)


def _pointwise(
    out: IndentedBuffer, states: list[StageState], ndim: int, options: CppOptions, inner: int
) -> None:
    simd = not any(s.no_simd for s in states)
    body = "".join(s.body.getvalue() for s in states)
    if ndim == 0:
        out.line("{")
        with out.indent():
            emit_lines(out, body)
        out.line("}")
        return
    last = ndim - 1
    loop = IndentedBuffer()
    if ndim == 1:
        loop.line("#pragma omp simd" if simd else "")
        _x_loop(loop, last, body, "pd_lo", "pd_hi")
        split(out, options, f"pd_n{last}", "pd_xnumel", loop)
        return
    outer = [d for d in range(ndim) if d != inner]
    loop.line("for (int64_t pd_xo = pd_lo; pd_xo < pd_hi; ++pd_xo) {")
    with loop.indent():
        decompose(loop, "pd_xo", "x", "pd_n", outer)
        loop.line("#pragma omp simd" if simd else "")
        _x_loop(loop, inner, body, "0", f"pd_n{inner}")
    loop.line("}")
    split(out, options, " * ".join(f"pd_n{i}" for i in outer), "pd_xnumel", loop)


def _flat_pointwise(
    out: IndentedBuffer, states: list[StageState], var: int, options: CppOptions
) -> None:
    simd = not any(s.no_simd for s in states)
    loop = IndentedBuffer()
    loop.line("#pragma omp simd" if simd else "")
    _x_loop(loop, var, "".join(s.body.getvalue() for s in states), "pd_lo", "pd_hi")
    split(out, options, "pd_xnumel", "pd_xnumel", loop)


def _x_loop(out: IndentedBuffer, dim: int, body: str, lo: str, hi: str) -> None:
    out.line(f"for (int64_t x{dim} = {lo}; x{dim} < {hi}; ++x{dim}) {{")
    with out.indent():
        emit_lines(out, body)
    out.line("}")


def _per_row(
    out: IndentedBuffer,
    emitter: StageEmitter,
    states: list[StageState],
    ndim: int,
    options: CppOptions,
) -> None:
    loop = row_loop(emitter, states, ndim, options)
    split(out, options, "pd_xnumel", "pd_xnumel * pd_rnumel", loop)


def row_loop(
    emitter: StageEmitter, states: list[StageState], ndim: int, options: CppOptions
) -> IndentedBuffer:
    """The loop over rows [pd_lo, pd_hi), every stage of a row in turn."""
    loop = IndentedBuffer()
    _row_arrays(loop, emitter)
    loop.line("for (int64_t pd_xf = pd_lo; pd_xf < pd_hi; ++pd_xf) {")
    with loop.indent():
        decompose(loop, "pd_xf", "x", "pd_n", ndim)
        loop.lines(emitter.local_declarations())
        rdim = len(emitter.spec.reduction_ranges)
        rows = sympy.Mul(*emitter.spec.ranges)
        last = emitter.spec.reduction_ranges[-1] if rdim else sympy.Integer(0)
        whole_blocks = rdim > 1 and last.is_Integer and int(last) % emitter.lanes == 0
        for state in states:
            # Only a kernel that may have a single row needs the row-splitting variant.
            state.split_threads = not (rows.is_Integer and int(rows) > 1)
            state.whole_blocks = whole_blocks
            loop.line("{")
            with loop.indent():
                _STAGES[state.kind](loop, state, rdim, emitter.lanes, options)
            loop.line("}")
    loop.line("}")
    return loop


_STACK_ROW_BYTES = 32768  # row-cache arrays up to this size live on the stack


def _row_arrays(out: IndentedBuffer, emitter: StageEmitter) -> None:
    """Declare the row-cache arrays (one row each, reused by every row a thread runs)."""
    rnumel = sympy.Mul(*emitter.spec.reduction_ranges)
    for array, ctype in emitter.row_arrays:
        if rnumel.is_Integer and int(rnumel) * 8 <= _STACK_ROW_BYTES:
            out.line(f"alignas(64) {ctype} {array}[{int(rnumel)}];")
        else:
            out.line(f"pd_array<{ctype}> {array}_buf(pd_rnumel);")
            out.line(f"{ctype}* __restrict__ {array} = {array}_buf.get();")


def _r_loop(out: IndentedBuffer, rdim: int, start: str, lines: list[str], simd: bool) -> None:
    out.line("#pragma omp simd" if simd else "")
    out.line(f"for (int64_t pd_rf = {start}; pd_rf < pd_rnumel; ++pd_rf) {{")
    with out.indent():
        decompose(out, "pd_rf", "r", "pd_m", rdim)
        for line in lines:
            out.line(line)
    out.line("}")


def _outer_stage(
    out: IndentedBuffer, state: StageState, rdim: int, lanes: int, options: CppOptions
) -> None:
    emit_lines(out, state.body.getvalue())


def _inner_stage(
    out: IndentedBuffer, state: StageState, rdim: int, lanes: int, options: CppOptions
) -> None:
    emit_lines(out, state.hoisted.getvalue())
    _r_loop(out, rdim, "0", state.body.getvalue().splitlines(), not state.no_simd)


def _lane_blocks(
    out: IndentedBuffer, state: StageState, rdim: int, lanes: int, lo: str, hi: str
) -> None:
    body = state.body.getvalue().splitlines()
    out.line(f"for (int64_t pd_rb = {lo}; pd_rb < {hi}; pd_rb += {lanes}) {{")
    with out.indent():
        for _, acc in state.accs:
            out.line(f"{acc}.prepare();")
        for address in state.prefetch:  # a hint: never faults, even past the end
            out.line(f"__builtin_prefetch({address});")
        if state.whole_blocks:  # the block's coordinates once, not a division per lane
            decompose(out, "pd_rb", "pd_rb_r", "pd_m", rdim)
        out.line("" if state.no_simd else "#pragma omp simd")
        out.line(f"for (int64_t pd_l = 0; pd_l < {lanes}; ++pd_l) {{")
        with out.indent():
            out.line("const int64_t pd_rf = pd_rb + pd_l;")
            if state.whole_blocks:
                for i in range(rdim - 1):
                    out.line(f"const int64_t r{i} = pd_rb_r{i};")
                out.line(f"const int64_t r{rdim - 1} = pd_rb_r{rdim - 1} + pd_l;")
                out.line("(void)pd_rf;")
            else:
                decompose(out, "pd_rf", "r", "pd_m", rdim)
            for line in body:
                out.line(line)
        out.line("}")
    out.line("}")


def _threaded_blocks(
    out: IndentedBuffer, state: StageState, rdim: int, lanes: int, options: CppOptions
) -> None:
    """A reduction over few outer points splits its lane blocks across threads; per-thread
    partial accumulators are merged in thread order, so the result is deterministic."""
    out.line(f"if (pd_xnumel == 1 && pd_rmain >= {max(options.parallel_threshold, 4 * lanes)}) {{")
    with out.indent():
        out.line("const int pd_maxt = omp_get_max_threads();")
        for ctype, acc in state.accs:
            out.line(f"pd_array<{ctype}> {acc}_part(pd_maxt);")
        out.line("#pragma omp parallel")
        out.line("{")
        with out.indent():
            out.line("const int64_t pd_nt = omp_get_num_threads(), pd_t = omp_get_thread_num();")
            out.line(f"const int64_t pd_blocks = pd_rmain / {lanes};")
            out.line("const int64_t pd_per = (pd_blocks + pd_nt - 1) / pd_nt;")
            out.line(f"const int64_t pd_b0 = std::min(pd_blocks, pd_t * pd_per) * {lanes};")
            out.line(f"const int64_t pd_b1 = std::min(pd_blocks, (pd_t + 1) * pd_per) * {lanes};")
            for ctype, acc in state.accs:
                out.line(f"{ctype} {acc};  // thread-local: no false sharing while accumulating")
            _lane_blocks(out, state, rdim, lanes, "pd_b0", "pd_b1")
            for _, acc in state.accs:
                out.line(f"{acc}_part[pd_t] = {acc};")
        out.line("}")
        out.line(f"for (int64_t pd_i = 0; pd_i < pd_maxt * {lanes}; ++pd_i) {{")
        for _, acc in state.accs:
            out.line(
                f"    {acc}.merge(pd_i % {lanes}, {acc}_part[pd_i / {lanes}], pd_i % {lanes});"
            )
        out.line("}")
    out.line("} else {")
    with out.indent():
        _lane_blocks(out, state, rdim, lanes, "0", "pd_rmain")
    out.line("}")


def _reduce_stage(
    out: IndentedBuffer, state: StageState, rdim: int, lanes: int, options: CppOptions
) -> None:
    body = state.body.getvalue().splitlines()
    emit_lines(out, state.hoisted.getvalue())
    for ctype, acc in state.accs:
        out.line(f"{ctype} {acc};")
    out.line(f"const int64_t pd_rmain = pd_rnumel - pd_rnumel % {lanes};")
    if options.openmp and state.split_threads:
        _threaded_blocks(out, state, rdim, lanes, options)
    else:
        _lane_blocks(out, state, rdim, lanes, "0", "pd_rmain")
    prepare = [f"{acc}.prepare();" for _, acc in state.accs]
    _r_loop(out, rdim, "pd_rmain", ["const int64_t pd_l = 0;", *prepare, *body], False)
    for _, acc in state.accs:
        out.line(f"pd_fold<{lanes}>({acc});")
    emit_lines(out, state.post.getvalue())


def _scan_sort_stage(
    out: IndentedBuffer, state: StageState, rdim: int, lanes: int, options: CppOptions
) -> None:
    pre = state.body.getvalue().splitlines()
    for arr, ctype in state.arrays:
        out.line(f"pd_array<{ctype}> {arr}_buf(pd_rnumel);")
        out.line(f"{ctype}* __restrict__ {arr} = {arr}_buf.get();")
    _r_loop(out, rdim, "0", [*pre, *state.gather], False)
    if state.sort_descending is None:
        out.line("if (pd_rnumel > 0) {")
        with out.indent():
            for arr, ctype in state.arrays:
                out.line(f"{ctype} {arr}_acc = {arr}[0];")
            _r_loop(out, 0, "1", state.combine, False)
        out.line("}")
    else:
        key = state.arrays[0][0]
        desc = "true" if state.sort_descending else "false"
        out.line("pd_array<int64_t> pd_perm(pd_rnumel);")
        out.line("for (int64_t pd_i = 0; pd_i < pd_rnumel; ++pd_i) pd_perm[pd_i] = pd_i;")
        out.line(
            f"std::stable_sort(pd_perm.get(), pd_perm.get() + pd_rnumel, [&](int64_t a, "
            f"int64_t b) {{ return pd_sort_less<{desc}>({key}[a], {key}[b]); }});"
        )
    _r_loop(out, rdim, "0", [*pre, *state.post.getvalue().splitlines()], False)


_STAGES = {
    "outer": _outer_stage,
    "inner": _inner_stage,
    "reduce": _reduce_stage,
    "scan": _scan_sort_stage,
    "sort": _scan_sort_stage,
}
