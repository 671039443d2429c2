"""The default schedule for CUDA targets: every stage of every Func runs on the GPU.

A stage Halide is not told to run on the GPU runs on the host and needs host memory, which
tensors on a CUDA device do not have; so every Func the pipeline computes is either inlined or
GPU-scheduled here, update definitions included:

* pure definitions: all pure variables fused into one loop, `gpu_tile`d by `THREADS`;
* reductions, scans and sorts: one GPU thread per output row (the pure variables of the update),
  the reduction / scan / rank loop serial inside the thread; without pure variables (a full
  reduction, a scan of a 1-D tensor) the update runs on a single GPU thread;
* scatter updates (stores): the RDom's variables fused and `gpu_tile`d; atomic scatters (reads of
  the old value, e.g. index_put with accumulate) run on a single GPU thread, in order, as the CPU
  schedule runs them serially.
"""

from __future__ import annotations

from typing import Any

import halide as hl

THREADS = 256  # GPU threads per block
_GUARD = hl.TailStrategy.GuardWithIf


def schedule(sched: list[tuple[Any, ...]]) -> None:
    """GPU-schedule the Funcs and scatter updates recorded in `sched` (see `runtime.finish`)."""
    updates: dict[str, int] = {}
    for entry in sched:
        if entry[0] in ("root", "func"):
            _func(entry[1])
            continue
        _, func, rvars, atomic = entry
        k = updates.get(func.name(), 0)
        updates[func.name()] = k + 1
        if k == 0:  # an output: its pure definition (undef) on the GPU too, else Halide asks
            _tile(func, func.args(), hl.Var, f"{func.name()}_p")  # for its host memory
        used = [rv for rv in rvars if _uses(func, k, rv.name())]
        stage = func.update(k)
        if atomic or not used:
            stage.gpu_single_thread()
        else:
            _tile(stage.allow_race_conditions(), used[::-1], hl.RVar, f"{func.name()}_u{k}")


def _func(func: hl.Func) -> None:
    """compute_root on the GPU: pure stage tiled, each update tiled over its pure variables."""
    func.compute_root()
    pure = func.args()
    _tile(func, pure, hl.Var, f"{func.name()}_p")
    for k in range(func.num_update_definitions()):
        args = {str(a) for a in func.update_args(k)}
        kept = [v for v in pure if v.name() in args]
        _tile(func.update(k), kept, hl.Var, f"{func.name()}_u{k}")


def _tile(stage: Any, loops: list[Any], kind: type, prefix: str) -> None:
    """Fuse `loops` (innermost first) into one and gpu_tile it; no loops: one GPU thread."""
    if not loops:
        stage.gpu_single_thread()
        return
    fused = loops[0]
    for n, outer in enumerate(loops[1:]):
        into = kind(f"{prefix}_f{n}")
        stage.fuse(fused, outer, into)
        fused = into
    block, thread = kind(f"{prefix}_b"), kind(f"{prefix}_t")
    stage.gpu_tile(fused, block, thread, THREADS, _GUARD)


def _uses(func: hl.Func, k: int, name: str) -> bool:
    """Whether update `k` of `func` mentions the variable `name`."""
    text = " ".join(str(a) for a in func.update_args(k))
    text += " ".join(str(v) for v in func.update_values(k))
    return name in text
