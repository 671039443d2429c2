"""Reduction initial values and combine rules, and sort-order predicates, as Halide expressions.

Every output of a reduction is its own single-valued Func: Halide 21 mis-orders Tuple-valued update
definitions under StrictFloat (an element sees already-updated values of the others), so
multi-output reductions (argmax, welford, online softmax) are built from single-valued passes.
NaN and tie rules follow docs/conventions.md "Reductions".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import halide as hl

from polyduct_halide.hlspecial import ex, isnan

E = Any


def _is_float(t: hl.Type) -> bool:
    return bool(t.is_float() or t.is_bfloat())


def _lowest(t: hl.Type) -> E:
    if t.is_bool():
        return ex(False)
    return hl.cast(t, float("-inf")) if _is_float(t) else t.min()


def _highest(t: hl.Type) -> E:
    if t.is_bool():
        return ex(True)
    return hl.cast(t, float("inf")) if _is_float(t) else t.max()


def _nan(x: E) -> E:
    x = ex(x)
    return isnan(x) if _is_float(x.type()) else ex(False)


def _as_ordered(x: E) -> E:
    x = ex(x)
    return hl.cast(hl.UInt(8), x) if x.type().is_bool() else x


def sorts_before(a: E, b: E, descending: bool) -> E:
    """Whether key `a` sorts strictly before key `b` (NaN is the largest value)."""
    a, b = _as_ordered(a), _as_ordered(b)
    if descending:
        return (a > b) | (_nan(a) & hl.logical_not(_nan(b)))
    return (a < b) | (hl.logical_not(_nan(a)) & _nan(b))


def same_key(a: E, b: E) -> E:
    """Whether keys `a` and `b` tie (NaNs tie with each other)."""
    return (ex(a) == b) | (_nan(a) & _nan(b))


def _cast(t: hl.Type, v: E) -> E:
    return hl.cast(t, v)


Pass = Callable[[str, list[hl.Var], Sequence[E], E, hl.Type], list[hl.Func]]


def _fold(name: str, xv: list[hl.Var], init: E, step: Callable[[E], E]) -> hl.Func:
    """func[xv] = init, then func[xv] = step(func[xv]) over the enclosing RDom."""
    func = hl.Func(name)
    func[xv] = init
    func[xv] = step(ex(func[xv]))
    return func


def _pure(name: str, xv: list[hl.Var], value: E) -> hl.Func:
    func = hl.Func(name)
    func[xv] = value
    return func


def _extreme(x: E, largest: bool, acc: E) -> E:
    x = _cast(ex(acc).type(), x)
    if ex(acc).type().is_bool():
        return (acc | x) if largest else (acc & x)
    better = (x > acc) if largest else (x < acc)
    return hl.select(_nan(acc) | hl.logical_not(better | _nan(x)), acc, x)


def _simple(kind: str) -> Pass:
    def build(name: str, xv: list[hl.Var], v: Sequence[E], pos: E, t: hl.Type) -> list[hl.Func]:
        x = ex(v[0])
        if kind == "sum":
            return [_fold(name, xv, hl.cast(t, 0), lambda a: a + _cast(t, x))]
        if kind == "prod":
            if t.is_bool():
                return [_fold(name, xv, hl.Expr(True), lambda a: a & _cast(t, x))]
            return [_fold(name, xv, hl.cast(t, 1), lambda a: a * _cast(t, x))]
        if kind in ("max", "min"):
            init = _lowest(t) if kind == "max" else _highest(t)
            return [_fold(name, xv, init, lambda a: _extreme(x, kind == "max", a))]
        if kind == "any":
            truth = x if x.type().is_bool() else x != hl.cast(x.type(), 0)
            return [_fold(name, xv, hl.Expr(False), lambda a: a | truth)]
        if t.is_bool():
            return [_fold(name, xv, hl.Expr(False), lambda a: a != _cast(t, x))]
        return [_fold(name, xv, hl.cast(t, 0), lambda a: a ^ _cast(t, x))]

    return build


def _arg(largest: bool) -> Pass:
    def build(name: str, xv: list[hl.Var], v: Sequence[E], pos: E, t: hl.Type) -> list[hl.Func]:
        x = ex(v[0])
        vt = x.type()
        init = _lowest(vt) if largest else _highest(vt)
        best = _fold(f"{name}_best", xv, init, lambda a: _extreme(x, largest, a))
        here = hl.cast(hl.Int(64), pos)
        hit = same_key(_as_ordered(x), _as_ordered(best[xv]))

        def first(a: E) -> E:
            return hl.select(hit & (here < a), here, a)

        index = _fold(name, xv, hl.Int(64).max(), first)
        return [index, best]

    return build


def _welford(name: str, xv: list[hl.Var], v: Sequence[E], pos: E, t: hl.Type) -> list[hl.Func]:
    x = _cast(t, v[0])
    # The count must depend on the RDom (an update that does not is run once): max position + 1.
    count = _fold(f"{name}_n", xv, hl.cast(t, 0), lambda a: hl.max(a, hl.cast(t, pos + 1)))
    total = _fold(f"{name}_s", xv, hl.cast(t, 0), lambda a: a + x)
    n = ex(count[xv])
    mean = _pure(f"{name}_mean", xv, hl.select(n == hl.cast(t, 0), hl.cast(t, 0), total[xv] / n))
    dev = x - mean[xv]
    m2 = _fold(f"{name}_m2", xv, hl.cast(t, 0), lambda a: a + dev * dev)
    return [mean, m2, count, total]


def _welford_combine(
    name: str, xv: list[hl.Var], v: Sequence[E], pos: E, t: hl.Type
) -> list[hl.Func]:
    mean_b, m2_b, weight_b = (_cast(t, x) for x in v)
    weight = _fold(f"{name}_w", xv, hl.cast(t, 0), lambda a: a + weight_b)
    moment = _fold(f"{name}_wm", xv, hl.cast(t, 0), lambda a: a + weight_b * mean_b)
    w = ex(weight[xv])
    safe = hl.select(w == hl.cast(t, 0), hl.cast(t, 1), w)
    mean = _pure(
        f"{name}_mean", xv, hl.select(w == hl.cast(t, 0), hl.cast(t, 0), moment[xv] / safe)
    )
    dev = mean_b - mean[xv]
    m2 = _fold(f"{name}_m2", xv, hl.cast(t, 0), lambda a: a + m2_b + weight_b * dev * dev)
    return [mean, m2, weight, moment]


def _softmax(name: str, xv: list[hl.Var], v: Sequence[E], pos: E, t: hl.Type) -> list[hl.Func]:
    x = _cast(t, v[0])
    top = _fold(f"{name}_max", xv, hl.cast(t, float("-inf")), lambda a: _extreme(x, True, a))
    here = ex(top[xv])
    # A row of -inf has no finite max: shift by 0 so its sum is 0 rather than NaN.
    shift = hl.select(here == hl.cast(t, float("-inf")), hl.cast(t, 0), here)
    total = _fold(name, xv, hl.cast(t, 0), lambda a: a + hl.exp(x - shift))
    return [top, total]


# name -> (builder, number of outputs `OpHandler.reduction` returns)
REDUCTIONS: dict[str, tuple[Pass, int]] = {
    "sum": (_simple("sum"), 1),
    "prod": (_simple("prod"), 1),
    "max": (_simple("max"), 1),
    "min": (_simple("min"), 1),
    "argmax": (_arg(True), 1),
    "argmin": (_arg(False), 1),
    "any": (_simple("any"), 1),
    "xor_sum": (_simple("xor_sum"), 1),
    "welford_reduce": (_welford, 3),
    "welford_combine": (_welford_combine, 3),
    "online_softmax_reduce": (_softmax, 2),
}
