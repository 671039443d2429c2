"""Reduction initial values and combine rules, and sort-order predicates, as Halide expressions.

Every output of a reduction is its own single-valued Func: Halide 21 mis-orders Tuple-valued update
definitions under StrictFloat (an element sees already-updated values of the others), so
multi-output reductions (argmax, welford, online softmax) are built from single-valued passes.
NaN and tie rules follow docs/conventions.md "Reductions".

Every update is `f = op(f, value)` with an `op` Halide can prove associative (`+`, `*`, `min`,
`max`, `&`, `|`), so that a schedule may `rfactor` it into vector lanes (`cpu.py`); xor_sum is the
one exception. Float max/min are integer max/min of order-preserving keys of the bits (see
`_key`), which keeps torch's NaN rule exactly and is associative; the first position of the
extreme value is a min over positions.
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


def _flip(bits: E) -> E:
    """Signed integer `bits` with the magnitude bits of negative values flipped: it maps a float's
    bits to an integer ordered like the floats, and (being its own inverse) back."""
    bits = ex(bits)
    return bits ^ ((bits >> (bits.type().bits() - 1)) & bits.type().max())


def _key(x: E) -> E:
    """Float `x` as a signed integer of its width ordered like the floats (-0 just below +0), NaN
    (either sign) above +inf for max or below -inf for min: `_unkey` of a max of keys is the
    max with NaN winning, exactly."""
    x = ex(x)
    return _flip(hl.reinterpret(hl.Int(x.type().bits()), x))


def _unkey(key: E, t: hl.Type) -> E:
    """The float of type `t` whose `_key` is `key`; the NaN keys give NaNs."""
    return hl.reinterpret(t, _flip(key))


def _extreme(name: str, xv: list[hl.Var], x: E, largest: bool, t: hl.Type) -> list[hl.Func]:
    """max (largest) or min of `x` as type `t`, NaN winning: [result, intermediate passes...]."""
    x = _cast(t, x)
    if t.is_bool():
        return [_fold(name, xv, ex(not largest), lambda a: (a | x) if largest else (a & x))]
    if not _is_float(t):
        init = t.min() if largest else t.max()
        return [_fold(name, xv, init, lambda a: hl.max(a, x) if largest else hl.min(a, x))]
    it = hl.Int(t.bits())
    key = hl.select(isnan(x), it.max() if largest else it.min(), _key(x))
    init = _key(_lowest(t) if largest else _highest(t))
    keys = _fold(f"{name}_key", xv, init, lambda a: hl.max(a, key) if largest else hl.min(a, key))
    return [_pure(name, xv, _unkey(keys[xv], t)), keys]


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
            return _extreme(name, xv, x, kind == "max", t)
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
        best = _extreme(f"{name}_best", xv, x, largest, x.type())
        here = hl.cast(hl.Int(64), pos)
        hit = same_key(_as_ordered(x), _as_ordered(best[0][xv]))
        never = hl.Int(64).max()
        index = _fold(name, xv, never, lambda a: hl.min(a, hl.select(hit, here, never)))
        return [index, *best]

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
    top = _extreme(f"{name}_max", xv, x, True, t)
    here = ex(top[0][xv])
    # A row of -inf has no finite max: shift by 0 so its sum is 0 rather than NaN.
    shift = hl.select(here == hl.cast(t, float("-inf")), hl.cast(t, 0), here)
    total = _fold(name, xv, hl.cast(t, 0), lambda a: a + hl.exp(x - shift))
    return [top[0], total, *top[1:]]


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
