"""Building blocks the generated pipeline modules call: loops, reductions, scans, sorts.

Generated modules (see `codegen.py`) hold the kernel's traced bodies; this module turns them into
Halide Funcs. Everything here builds Halide IR only; calling compiled pipelines is `launch.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import halide as hl

from polyduct_halide import cpu, gpu
from polyduct_halide import hlmath as m
from polyduct_halide.hlspecial import ex, opaque

Values = tuple[Any, ...]


def rdom(name: str, extents: Sequence[Any]) -> tuple[hl.RDom, list[Any]]:
    """An RDom over `extents` whose last dimension is innermost; returns it and its vars in order.

    A zero-dimensional domain becomes one iteration with no variables.
    """
    if not extents:
        return hl.RDom([hl.Range(0, 1)], name), []
    dom = hl.RDom([hl.Range(0, ex(e)) for e in reversed(extents)], name)
    n = len(extents)
    return dom, [dom[n - 1 - i] for i in range(n)]


def flat(rvars: Sequence[Any], extents: Sequence[Any]) -> Any:
    """Row-major flat position of `rvars` over `extents`."""
    pos: Any = ex(0)
    for var, ext in zip(rvars, extents, strict=True):
        pos = pos * ex(ext) + var
    return pos


def unflatten(pos: Any, extents: Sequence[Any]) -> list[Any]:
    """Row-major coordinates of flat position `pos` over `extents`."""
    coords: list[Any] = []
    for ext in reversed(extents):
        coords.append(pos % ex(ext))
        pos = pos / ex(ext)
    return list(reversed(coords))


def total(extents: Sequence[Any]) -> Any:
    """Product of `extents`."""
    out: Any = ex(1)
    for ext in extents:
        out = out * ex(ext)
    return out


def tup(values: Sequence[Any]) -> Any:
    """A Halide Tuple of several values, or the single value itself."""
    return hl.Tuple(list(values)) if len(values) > 1 else values[0]


def elems(ref: Any, n: int) -> list[Any]:
    """The `n` elements of a Func reference (a Tuple-valued one when n > 1)."""
    # FuncRef arithmetic builds Halide's `+=` sugar objects; plain Exprs compose safely.
    return [ex(ref[i]) for i in range(n)] if n > 1 else [ex(ref)]


def output(name: str, type_: hl.Type) -> hl.Func:
    """A 1-D output Func over flat memory; points no store writes keep their memory."""
    func = hl.Func(name)
    func[hl.Var("i")] = hl.undef(type_)
    return func


def scatter(func: hl.Func, index: Any, value: Any, atomic: bool) -> None:
    """`func[index] = value` as an update definition."""
    func[index] = value  # atomic adds read the old value in `value`; they run serially


def reduction(
    name: str,
    xv: list[hl.Var],
    trace: Callable[..., Values],
    rvars: Sequence[Any],
    extents: Sequence[Any],
    rtype: str,
    dtype: hl.Type,
    strict: bool = True,
    zero: Any = None,
    target: hl.Target | None = None,
) -> list[hl.Func]:
    """Funcs over `xv` reducing the values `trace(*xv, *rvars)` with `rtype` over the RDom of
    `rvars` (`extents`); `strict`: the pipeline's floats are IEEE's (the target's StrictFloat);
    `zero`: the pipeline's opaque zero (`opaque_zero`). On a CPU `target`, a float32 Welford
    pass runs in float64, as eager's does on the CPU: a row's mean is its sum over its count, and
    the float32 sum of values near FLT_MAX overflows where their mean does not (halide seed 9203,
    program 5825).

    The first `reduction_num_outputs(rtype)` Funcs are the op's results; any others are
    intermediate passes (all are scheduled like the results).

    With `strict`, the values are a Func of pure variables that the update reads at the RVars
    (inlined when lowering): `rfactor` (a reduction's vector lanes) simplifies the update before
    lowering applies StrictFloat, and folded a `x * 0` written in it to 0 where x is infinite
    (halide seed 9103, program 1075); Halide's `strict_float()` on the expression instead
    rewrites it as a tree, exponential in a deep kernel's shared subexpressions (program 2216).
    Halide's pass that trims loops whose updates change nothing also reasons as if floats were
    real numbers: it dropped the guarded tail of a vector-lane reduction of `x - x`, whose NaNs
    and infinities are not 0 (halide seed 9203, program 7788). So each float value is read
    through the opaque zero, about which the pass can prove nothing.
    """
    build, outputs = m.REDUCTIONS[rtype]
    if strict:
        pure = [hl.Var(f"{name}_v{i}") for i in range(len(rvars))]
        traced = trace(*xv, *pure)
        source = hl.Func(f"{name}_values")
        source[[*xv, *pure]] = tup(traced)
        values = elems(source[[*xv, *rvars]], len(traced))
        values = [opaque(v, zero) if v.type().is_float() else v for v in values]
    else:
        values = list(trace(*xv, *rvars))
    # An update definition takes its RDom from the RVars its expressions mention: a value that
    # mentions none (the sum of a constant, counting elements) would be added once, not once per
    # element. The select (folded away when lowering) makes every value mention the position.
    pos = flat(rvars, extents)
    at = ex(pos) >= 0
    values = [hl.select(at, v, v) for v in map(ex, values)]
    wide = rtype.startswith("welford") and dtype == hl.Float(32)
    if not wide or target is None or target.has_gpu_feature():
        return build(name, xv, values, pos, dtype)
    funcs = build(name, xv, values, pos, hl.Float(64))
    results = []
    for i, func in enumerate(funcs[:outputs]):
        narrow = hl.Func(f"{name}_f32_{i}")
        narrow[xv] = hl.cast(dtype, func[xv])
        results.append(narrow)
    return [*results, *funcs]


def unread(name: str, xv: list[hl.Var], pv: hl.Var, values: Values) -> hl.Func:
    """A scan or sort over no elements: no iteration reads it, and nothing computes it. (A scan
    of its own computes one element: its source's region is the union of two empty ones, the
    pure definition's and the update's, which Halide widens to one point; that read an empty
    view's offset past the end of its buffer, halide seed 10503 program 1237.)"""
    func = hl.Func(name)
    func[[*xv, pv]] = tup(values)
    return func


def scan(
    name: str,
    xv: list[hl.Var],
    pv: hl.Var,
    values: Values,
    combine: Callable[[Values, Values], Values],
    extent: Any,
    sched: list[tuple[Any, ...]],
) -> hl.Func:
    """Inclusive scan along `pv` (flat reduction position) of `values` (traced at `pv`).

    Its source Func goes to `sched` as computed at root (the default schedule's business:
    an autoscheduler refuses Funcs scheduled before it runs)."""
    func = hl.Func(name)
    n = len(values)
    dom = hl.RDom([hl.Range(1, hl.max(ex(extent) - 1, 0))], f"{name}_r")
    src = hl.Func(f"{name}_src")
    src[[*xv, pv]] = tup(values)
    func[[*xv, pv]] = src[[*xv, pv]]
    # Read the current element from `src`, not `func`: see hlreduce's note on Tuple updates.
    prev = tuple(elems(func[[*xv, dom.x - 1]], n))
    here = tuple(elems(src[[*xv, dom.x]], n))
    func[[*xv, dom.x]] = tup(combine(prev, here))
    sched.append(("root", src))
    return func


def sort(
    name: str,
    xv: list[hl.Var],
    pv: hl.Var,
    values: Values,
    extent: Any,
    descending: bool,
    sched: list[tuple[Any, ...]],
) -> hl.Func:
    """Stable sort along `pv` of `values` (traced at `pv`) by the first value, by rank counting.

    O(n^2) per row: each element's rank is the number of elements that sort before it; NaN sorts
    last ascending and first descending, as in torch.
    """
    n = len(values)
    src = hl.Func(f"{name}_src")
    src[[*xv, pv]] = tup(values)
    rank = hl.Func(f"{name}_rank")
    other = hl.RDom([hl.Range(0, ex(extent))], f"{name}_j")
    rank[[*xv, pv]] = hl.i32(0)
    key_j = elems(src[[*xv, other.x]], n)[0]
    key_p = elems(src[[*xv, pv]], n)[0]
    before = m.sorts_before(key_j, key_p, descending) | (m.same_key(key_j, key_p) & (other.x < pv))
    rank[[*xv, pv]] = rank[[*xv, pv]] + hl.select(before, 1, 0)
    out = hl.Func(name)
    out[[*xv, pv]] = tup(values)
    place = hl.RDom([hl.Range(0, ex(extent))], f"{name}_k")
    slot = hl.unsafe_promise_clamped(rank[[*xv, place.x]], 0, ex(extent) - 1)
    out[[*xv, slot]] = tup(elems(src[[*xv, place.x]], n))
    sched.extend(("root", func) for func in (src, rank))
    return out


AUTOSCHEDULERS = {
    "Adams2019": "autoschedule_adams2019",
    "Li2018": "autoschedule_li2018",
    "Mullapudi2016": "autoschedule_mullapudi2016",
    "Anderson2021": "autoschedule_anderson2021",
}
# Autoscheduler parameters on GPU targets (Mullapudi2016 schedules for the host without them).
GPU_PARAMS: dict[str, dict[str, str]] = {"Mullapudi2016": {"experimental_gpu_schedule": "1"}}
_ESTIMATE = 1024  # extent assumed for symbolic sizes when giving autoschedulers estimates


def _autoschedule(
    name: str,
    pipeline: hl.Pipeline,
    params: list[Any],
    outputs: list[hl.Func],
    target: hl.Target,
    estimate: int,
) -> None:
    hl.load_plugin(_plugin_path(AUTOSCHEDULERS[name]))
    extra = GPU_PARAMS.get(name, {}) if target.has_gpu_feature() else {}
    for param in params:
        if isinstance(param, hl.ImageParam):
            param.dim(0).set_estimate(0, estimate)
        else:
            param.set_estimate(_ESTIMATE)
    for func in outputs:
        func.set_estimate(func.args()[0], 0, estimate)
    pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(name, extra))


def _plugin_path(stem: str) -> str:
    """The autoscheduler library shipped inside the halide package (lib or lib64)."""
    root = Path(hl.__file__).parent
    for sub in ("lib64", "lib"):
        path = root / sub / f"lib{stem}.so"
        if path.exists():
            return str(path)
    return f"lib{stem}.so"  # let the dynamic loader search


def finish(
    kernel: str,
    schedule: str,
    target: hl.Target,
    params: list[Any],
    outputs: list[hl.Func],
    sched: list[tuple[Any, ...]],
    xv: list[hl.Var],
    xr: list[Any],
    estimate: int = _ESTIMATE * _ESTIMATE,
    rr: Sequence[Any] = (),
    heavy: bool = False,
) -> tuple[hl.Pipeline, list[Any]]:
    """Schedule the pipeline of `outputs`; returns it and its arguments (outputs come after).
    `xr` and `rr` are the kernel's outer and reduction extents. `heavy`: the kernel computes a
    float64 fmod, and the default CPU schedule then never partitions its loops (Halide's loop
    partitioning ran for over ten minutes on two of them in a circular pad's branches: halide
    seed 10923, program 2970; unpartitioned, it compiles in seconds).

    The caller compiles it: JIT (`compile_to_callable`) or ahead of time (`aot.py`).
    """
    pipeline = hl.Pipeline(outputs)
    if schedule == "default" and target.has_gpu_feature():
        gpu.schedule(sched)
    elif schedule == "default":
        cpu.schedule(sched, xv, xr, rr, partition=not heavy)
    elif schedule != "none":
        _autoschedule(schedule, pipeline, params, outputs, target, estimate)
    return pipeline, params


def opaque_zero(outputs: Sequence[hl.Func]) -> Any:
    """A zero the compiler cannot see (for `hlspecial.opaque`), or None.

    It is the min of the first output's buffer: a run-time argument of the pipeline, and always 0
    (both launchers pass 1-D buffers from a tensor's first element, min 0: `aot.buffer`,
    `launch.as_buffer`), so no launcher needs a hidden argument. A kernel that stores nothing
    computes nothing either (None).
    """
    return outputs[0].output_buffer().dim(0).min() if outputs else None


def nofuse(target: hl.Target, outputs: Sequence[hl.Func]) -> Any:
    """The opaque zero for `hlspecial.alone` on GPU targets; None on host targets."""
    return opaque_zero(outputs) if target.has_gpu_feature() else None


def require(target: hl.Target, cond: Any, value: Any, *args: Any) -> Any:
    """`hl.require(cond, value, *args)`, or `value` on a GPU target.

    Halide cannot report a failed requirement from inside a GPU kernel (it refuses to compile
    one), so CUDA kernels only clamp the index (memory-safe) and raise nothing.
    """
    return value if target.has_gpu_feature() else hl.require(cond, value, *args)
