"""The default schedule for CPU targets: intermediates at root, parallel tasks, vector lanes.

* Funcs recorded as `root` (scan and sort helpers) are computed at root.
* Funcs recorded as `func` (reductions, scans, sorts) are computed at root; their output rows
  (the pure variables `xv`, fused) are cut into about `TASKS` parallel tasks. A reduction's
  update (`f[xv] = op(f[xv], value)` over an RDom) is vectorised as `vectorisation` chose from
  the strides of its loads:

  - `LANES`: along the row. The innermost RVar is split by `VECTOR` and `rfactor`ed on the
    split: `VECTOR` partial results per row, one per vector lane, then combined in order. Sums
    and products reassociate (as eager's vectorised sums do); min/max/and/or and the integer
    ops are exact (`hlreduce`). Halide refuses updates it cannot prove associative (xor_sum):
    those stay serial.
  - `ROWS`: across rows. `ROW_LANES` neighbouring outputs along the unit-stride output variable
    are reduced side by side, each one in order (nothing reassociates): a column sum reads whole
    cache lines of every row.
  - serial otherwise.
* Scatter updates (stores) vectorise their innermost RVar (the tail guarded) and run about
  `TASKS` parallel tasks over their outermost one.

Tasks are few and large because each costs a claim on Halide's thread pool (measured, 1024x1024
row sum on 2 threads: one task per row 0.42 ms, 16 to 256 rows per task 0.07 ms).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import halide as hl
import sympy

LANES = "lanes"
ROWS = "rows"
VECTOR = 8  # lanes of a row reduction or a scatter (float32 in AVX2 registers)
# Outputs reduced side by side: 32 float32 are two cache lines of each row (measured, 1024x1024
# column sum, one thread: 8 lanes 0.98 ms, 16 0.50, 32 0.24, 64 0.29; serial 6.4).
ROW_LANES = 32
TASKS = 32  # parallel tasks a loop is cut into, enough to balance a few dozen threads
MIN_TASK_WORK = 16384  # elements a parallel task is given at least
_GUARD = hl.TailStrategy.GuardWithIf  # RVars and outputs cannot round up: tails are predicated


def vectorisation(
    loads: Sequence[sympy.Expr], outer: Sequence[sympy.Symbol], inner: sympy.Symbol | None
) -> str:
    """How `schedule` vectorises a reduction whose body loads buffer elements at the flat
    indices `loads`, over output variables `outer` and innermost reduction variable `inner`:
    `LANES` when every load steps by 0 or 1 element along `inner`, else `ROWS` (suffixed with n
    when n > 0) when every load does along `outer[n]`, else "" (serial: gathers cost more than
    they save). Only the strides decide: an indirect index is a symbol of its own here, so
    a gather counts as a broadcast (still correct, only slower)."""
    if inner is not None and all(_step(i, inner) in (0, 1) for i in loads):
        return LANES
    for n, var in enumerate(outer):
        if loads and all(_step(i, var) in (0, 1) for i in loads):
            return f"{ROWS}{n or ''}"
    return ""


def _step(index: sympy.Expr, var: sympy.Symbol) -> int | None:
    """How far `index` moves when `var` grows by one, when that is a constant."""
    step = sympy.expand(index.subs(var, var + 1) - index)
    return int(step) if step.is_Integer else None


def schedule(
    sched: list[tuple[Any, ...]], xv: list[hl.Var], xr: list[Any], rr: Sequence[Any] = (),
    partition: bool = True,
) -> None:
    """Schedule the Funcs and scatter updates recorded in `sched` (see `runtime.finish`);
    `xr` are the extents of the kernel's pure variables `xv`, `rr` its reduction extents.
    Without `partition`, Halide partitions none of their loops (`never_partition_all`)."""
    updates: dict[str, int] = {}
    for entry in sched:
        if entry[0] == "root":
            entry[1].compute_root()
        elif entry[0] == "func":
            vector = entry[2] if len(entry) > 2 else ""
            _func(entry[1], xv, xr, vector, _product(list(rr)), partition)
        else:
            _, func, rvars, atomic = entry
            k = updates.get(func.name(), 0)
            updates[func.name()] = k + 1
            if rvars and not atomic:
                _scatter(func.update(k).allow_race_conditions(), func, k, rvars)
        if not partition:
            _unpartitioned(entry[1])


def _unpartitioned(func: hl.Func) -> None:
    func.never_partition_all()
    for k in range(func.num_update_definitions()):
        func.update(k).never_partition_all()


def _func(
    func: hl.Func, xv: list[hl.Var], xr: list[Any], vector: str, row_work: Any, partition: bool
) -> None:
    """`row_work`: elements an update visits per output point (the reduction's extent)."""
    func.compute_root()
    if not xv:
        for k in range(func.num_update_definitions()):
            if vector == LANES and _is_reduction(func, k):
                _lanes(func, k, None, partition)
        return
    name, total = func.name(), _product(xr)
    rows, row = _fused(func, xv, name), hl.Var(f"{name}_row")
    func.split(rows, rows, row, _task(total), _GUARD).parallel(rows)
    for k in range(func.num_update_definitions()):
        stage, reduction = func.update(k), _is_reduction(func, k)
        if reduction and vector.startswith(ROWS):
            _side_by_side(func, k, xv, int(vector[len(ROWS) :] or 0))
            fused = _fused(stage, xv, f"{name}_u{k}")
            task = _task(total / ROW_LANES, row_work * ROW_LANES)
            stage.split(fused, rows, row, task, _GUARD).parallel(rows)
            continue
        fused = _fused(stage, xv, f"{name}_u{k}")
        stage.split(fused, rows, row, _task(total, row_work), _GUARD).parallel(rows)
        if reduction and vector == LANES:
            _lanes(func, k, row, partition)


def _side_by_side(func: hl.Func, k: int, xv: list[hl.Var], unit: int) -> None:
    """Update `k` reduces `ROW_LANES` neighbouring outputs along `xv[unit]` (the unit-stride
    output variable) as vector lanes, innermost, with the reduction loops around them."""
    stage, var, lane = func.update(k), xv[unit], hl.Var(f"{func.name()}_lane")
    stage.split(var, var, lane, ROW_LANES, _GUARD)
    stage.reorder(lane, *func.rvars(k), *xv).vectorize(lane)


def _fused(stage: Any, xv: list[hl.Var], prefix: str) -> hl.Var:
    """The pure variables of `stage` fused into one loop (innermost first, as Halide nests)."""
    fused = xv[0]
    for n, outer in enumerate(xv[1:]):
        into = hl.Var(f"{prefix}_rows{n}")
        stage.fuse(fused, outer, into)
        fused = into
    return fused


def _is_reduction(func: hl.Func, k: int) -> bool:
    """Whether update `k` writes `func` at its pure variables (a reduction, not a scan or sort)."""
    pure = [str(hl.Expr(v)) for v in func.args()]
    return bool(func.rvars(k)) and [str(a) for a in func.update_args(k)] == pure


def _lanes(func: hl.Func, k: int, row: hl.Var | None, partition: bool) -> None:
    """rfactor update `k` over `VECTOR` interleaved slices of its innermost RVar, vectorised
    (its loops never partitioned without `partition`)."""
    name = func.name()
    inner = func.rvars(k)[0]  # `runtime.rdom`: the RDom's first dimension is the innermost
    stage = func.update(k)
    outer, lane_r, lane = hl.RVar(f"{name}_ro"), hl.RVar(f"{name}_ri"), hl.Var(f"{name}_lane")
    stage.split(inner, outer, lane_r, VECTOR, _GUARD)
    try:
        lanes = stage.rfactor(lane_r, lane)
    except hl.HalideError:
        # Halide could not prove the update associative (xor_sum): it stays a serial loop, split
        # in two levels, which computes the same thing.
        return
    # Per row, inside the row's task: VECTOR accumulators, nothing in memory between rows.
    if row is not None:
        lanes.compute_at(func, row)
    else:
        lanes.compute_root()
    lanes.vectorize(lane)
    lanes.update(0).vectorize(lane)
    if not partition:
        _unpartitioned(lanes)


def _scatter(stage: hl.Stage, func: hl.Func, k: int, rvars: list[Any]) -> None:
    """Vectorise scatter update `k` over its innermost RVar, tasks over the outermost one."""
    inner = rvars[-1]
    if _uses(func, k, inner):
        vectors, lane = hl.RVar(f"{inner.name()}_o"), hl.RVar(f"{inner.name()}_i")
        stage.split(inner, vectors, lane, VECTOR, _GUARD).vectorize(lane)
        if len(rvars) == 1:
            stage.parallel(vectors, _task(inner.extent() / VECTOR, VECTOR), _GUARD)
    if len(rvars) > 1 and _uses(func, k, rvars[0]):
        work = _product([r.extent() for r in rvars[1:]])
        stage.parallel(rvars[0], _task(rvars[0].extent(), work), _GUARD)


def _task(iterations: Any, work: Any = 1) -> Any:
    """Iterations per parallel task: about `TASKS` tasks, but at least `MIN_TASK_WORK` elements
    each, an iteration being `work` elements (a 64x64 kernel runs as one task: waking Halide's
    thread pool costs more than it does)."""
    work = hl.max(hl.cast(hl.Int(32), work), 1)
    return hl.max(hl.cast(hl.Int(32), iterations) / TASKS, (MIN_TASK_WORK + work - 1) / work, 1)


def _product(extents: list[Any]) -> Any:
    total: Any = hl.Expr(1)
    for extent in extents:
        total = total * extent
    return total


def _uses(func: hl.Func, k: int, rvar: Any) -> bool:
    """Whether update `k` of `func` mentions `rvar` (Halide drops RDom dimensions it does not)."""
    text = " ".join(str(a) for a in func.update_args(k))
    text += " ".join(str(v) for v in func.update_values(k))
    return f"{rvar.name()}" in text
