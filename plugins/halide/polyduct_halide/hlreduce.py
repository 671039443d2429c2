"""Reduction initial values and combine rules, and sort-order predicates, as Halide expressions.

Each reduction is (init, combine, outputs): `init(type, values)` gives the accumulator tuple,
`combine(acc, values, pos)` the updated one (`pos` is the flat reduction position, used by
argmax/argmin), `outputs` which accumulator elements `OpHandler.reduction` returns.
NaN and tie rules follow docs/conventions.md "Reductions".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import halide as hl

from polyduct_halide.hlspecial import ex

E = Any
Init = Callable[[hl.Type, Sequence[E]], list[E]]
Combine = Callable[[list[E], list[E], E], list[E]]


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
    return hl.is_nan(x) if _is_float(x.type()) else ex(False)


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


def _sum(acc: list[E], v: list[E], pos: E) -> list[E]:
    return [acc[0] + _cast(ex(acc[0]).type(), v[0])]


def _prod(acc: list[E], v: list[E], pos: E) -> list[E]:
    a = ex(acc[0])
    if a.type().is_bool():
        return [a & ex(v[0])]
    return [a * _cast(a.type(), v[0])]


def _max(acc: list[E], v: list[E], pos: E) -> list[E]:
    a, b = ex(acc[0]), _cast(ex(acc[0]).type(), v[0])
    if a.type().is_bool():
        return [a | b]
    return [hl.select(_nan(a) | (a > b) | (a == b), a, b)]


def _min(acc: list[E], v: list[E], pos: E) -> list[E]:
    a, b = ex(acc[0]), _cast(ex(acc[0]).type(), v[0])
    if a.type().is_bool():
        return [a & b]
    return [hl.select(_nan(a) | (a < b) | (a == b), a, b)]


def _arg(largest: bool) -> Combine:
    def combine(acc: list[E], v: list[E], pos: E) -> list[E]:
        va, ia = _as_ordered(acc[0]), ex(acc[1])
        vb, ib = _as_ordered(v[0]), hl.cast(hl.Int(64), pos)
        beats = (vb > va) if largest else (vb < va)
        better = beats | (_nan(vb) & hl.logical_not(_nan(va)))
        wins = better | (same_key(vb, va) & (ib < ia))
        return [hl.select(wins, ex(v[0]), acc[0]), hl.select(wins, ib, ia)]

    return combine


def _any(acc: list[E], v: list[E], pos: E) -> list[E]:
    x = ex(v[0])
    return [ex(acc[0]) | (x if x.type().is_bool() else x != hl.cast(x.type(), 0))]


def _xor(acc: list[E], v: list[E], pos: E) -> list[E]:
    a = ex(acc[0])
    b = _cast(a.type(), v[0])
    return [a != b] if a.type().is_bool() else [a ^ b]


def _welford(acc: list[E], v: list[E], pos: E) -> list[E]:
    mean, m2, weight = acc
    x = _cast(ex(mean).type(), v[0])
    new_weight = weight + hl.cast(ex(weight).type(), 1)
    delta = x - mean
    new_mean = mean + delta / new_weight
    return [new_mean, m2 + delta * (x - new_mean), new_weight]


def _welford_combine(acc: list[E], v: list[E], pos: E) -> list[E]:
    mean, m2, weight = acc
    t = ex(mean).type()
    mean_b, m2_b, weight_b = (_cast(t, x) for x in v)
    new_weight = weight + weight_b
    frac = hl.select(new_weight == hl.cast(t, 0), hl.cast(t, 0), weight_b / new_weight)
    delta = mean_b - mean
    return [mean + delta * frac, m2 + m2_b + delta * delta * weight * frac, new_weight]


def _softmax(acc: list[E], v: list[E], pos: E) -> list[E]:
    old_max, old_sum = ex(acc[0]), ex(acc[1])
    t = old_max.type()
    x = _cast(t, v[0])
    new_max = hl.select(_nan(old_max) | (old_max > x) | (old_max == x), old_max, x)
    minus_inf = new_max == hl.cast(t, float("-inf"))
    one = hl.cast(t, 1)
    old_scale = hl.select(minus_inf, one, hl.exp(old_max - new_max))
    new_scale = hl.select(minus_inf, one, hl.exp(x - new_max))
    return [new_max, old_sum * old_scale + new_scale]


def _zero(t: hl.Type, values: Sequence[E]) -> list[E]:
    return [hl.cast(t, 0)]


def _one(t: hl.Type, values: Sequence[E]) -> list[E]:
    return [hl.cast(t, 1)]


def _low(t: hl.Type, values: Sequence[E]) -> list[E]:
    return [_lowest(t)]


def _high(t: hl.Type, values: Sequence[E]) -> list[E]:
    return [_highest(t)]


def _arg_init(high: bool) -> Init:
    def init(t: hl.Type, values: Sequence[E]) -> list[E]:
        vt = ex(values[0]).type()
        start = _highest(vt) if high else _lowest(vt)
        return [start, hl.Int(64).max()]

    return init


def _three(t: hl.Type, values: Sequence[E]) -> list[E]:
    return [hl.cast(t, 0)] * 3


def _softmax_init(t: hl.Type, values: Sequence[E]) -> list[E]:
    return [hl.cast(t, float("-inf")), hl.cast(t, 0)]


REDUCTIONS: dict[str, tuple[Init, Combine, tuple[int, ...]]] = {
    "sum": (_zero, _sum, (0,)),
    "prod": (_one, _prod, (0,)),
    "max": (_low, _max, (0,)),
    "min": (_high, _min, (0,)),
    "argmax": (_arg_init(False), _arg(True), (1,)),
    "argmin": (_arg_init(True), _arg(False), (1,)),
    "any": (_zero, _any, (0,)),
    "xor_sum": (_zero, _xor, (0,)),
    "welford_reduce": (_three, _welford, (0, 1, 2)),
    "welford_combine": (_three, _welford_combine, (0, 1, 2)),
    "online_softmax_reduce": (_softmax_init, _softmax, (0, 1)),
}
