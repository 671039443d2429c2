"""Indexing generators (gather, scatter, index_put, ... with valid indices) and in-place ops.

Index tensors are inputs of fixed shape whose values are drawn in range (`Gen.index_input`);
where duplicates would make the result depend on write order (scatter, index_put without
accumulate), the indices are distinct along the written dim. In-place ops never write a tensor
from one that shares its storage, and never write an expanded or self-overlapping view, so
eager's result is always defined.
"""

from __future__ import annotations

import torch

from polyduct.fuzz.gen import Emit, Gen, Val, broadcastable, overlaps
from polyduct.fuzz.ops_pointwise import EXACT_UNARY

INDEXING = ("gather", "take_along_dim", "index_select", "advanced", "scatter", "scatter_add",
            "scatter_reduce", "index_put", "index_add", "masked_fill", "embedding")


def _sub_shape(g: Gen, x: Val, d: int) -> tuple[int, ...]:
    """An index shape no larger than x's, any length along d."""
    return tuple(g.rng.randint(min(1, s), s) if i != d else g.rng.randint(1, 4)
                 for i, s in enumerate(x.shape))


def _gather(g: Gen, x: Val, d: int, form: str) -> Emit | None:
    idx = g.index_input(_sub_shape(g, x, d), x, d)
    if form == "gather":
        return Emit(f"torch.gather({x.name}, {d}, {idx})", x.exact)
    return Emit(f"torch.take_along_dim({x.name}, {idx}, dim={d})", x.exact)


def _scatter(g: Gen, x: Val, d: int, form: str) -> Emit:
    shape = tuple(g.rng.randint(0, s) for s in x.shape)
    if form == "scatter":
        idx = g.index_input(shape, x, d, perm_dim=d)
        src = f"{x.name}.flip({d})" if g.chance(0.6) else str(g.choice((2, -1)))
        return Emit(f"torch.scatter({x.name}, {d}, {idx}, {src})", x.exact)
    idx = g.index_input(shape, x, d)
    if form == "scatter_add":
        return Emit(f"torch.scatter_add({x.name}, {d}, {idx}, {x.name} * 2)",
                    None if x.exact else False)
    reduce = str(g.choice(("sum", "prod", "mean", "amax", "amin")))
    expr = (f"torch.scatter_reduce({x.name}, {d}, {idx}, {x.name}.flip({d}), '{reduce}', "
            f"include_self={g.chance(0.5)})")
    return Emit(expr, x.exact if reduce in ("amax", "amin") else None if x.exact else False)


def _put(g: Gen, x: Val, d: int, form: str) -> Emit | None:
    size = x.shape[d]
    n = g.rng.randint(1, size)
    if form == "index_select":
        return Emit(f"torch.index_select({x.name}, {d}, {g.index_input((n,), x, d)})", x.exact)
    if form == "advanced":
        idx = g.index_input((n,), x, d, negative=True)
        return Emit(f"{x.name}[{':, ' * d}{idx}]", x.exact)
    if form == "index_add":
        idx = g.index_input((n,), x, d)
        # torch's own decomposition of a bool index_add with alpha adds a long (aot_eager fails)
        alpha = "" if x.meta.dtype == torch.bool else ", alpha=2"
        return Emit(f"torch.index_add({x.name}, {d}, {idx}, {x.name}.narrow({d}, 0, {n})"
                    f"{alpha})", None if x.exact else False)
    accumulate = g.chance(0.4)
    n = g.rng.randint(1, x.shape[0])
    idx = g.index_input((n,), x, 0, perm_dim=None if accumulate else 0)
    values = f"{x.name}[:{n}].flip(0)" if g.chance(0.6) else f"{x.name}.new_tensor(3)"
    return Emit(f"{x.name}.index_put(({idx},), {values}, accumulate={accumulate})",
                (None if x.exact else False) if accumulate else x.exact)


def indexing(g: Gen) -> Emit | None:
    x = g.pick(lambda v: v.rank >= 1 and 0 not in v.shape)
    if x is None:
        return None
    form = str(g.choice(INDEXING))
    d = g.rng.randrange(x.rank)
    if form in ("gather", "take_along_dim"):
        return _gather(g, x, d, form)
    if form.startswith("scatter"):
        return _scatter(g, x, d, form)
    if form == "masked_fill":
        m = g.pick(lambda v: v.is_bool() and v.exact and broadcastable(x, v))
        cond = m.name if m is not None else f"({x.name} > 0)" if x.exact else None
        value = "-1" if not x.is_float() else str(g.choice(("0.5", "float('nan')", "-0.0")))
        return None if cond is None else Emit(f"{x.name}.masked_fill({cond}, {value})", x.exact)
    if form == "embedding":
        w = g.pick(lambda v: v.rank == 2 and v.is_float() and v.shape[0] > 0)
        if w is None:
            return None
        idx = g.index_input(tuple(x.shape[:2]), w, 0)
        return Emit(f"torch.nn.functional.embedding({idx}, {w.name})", w.exact)
    return _put(g, x, d, form)


def _target(g: Gen) -> Val | None:
    """A value that may be written in place."""
    inputs = {v.name for v in g.pool if v.is_input}

    def ok(v: Val) -> bool:
        if overlaps(v.meta) or (g.train and (v.base in inputs or v.meta.requires_grad)):
            return False
        if v.base in inputs and v.rank == 0 and v.dtype == torch.float64:
            return False  # AOTAutograd drops such a write (aot_eager too): not polyduct's to test
        return not v.meta.requires_grad or not v.meta.is_leaf

    return g.pick(ok)


def inplace(g: Gen) -> Emit | None:
    t = _target(g)
    if t is None:
        return None
    tags = ("inplace",)
    if t.rank and g.chance(0.25):  # write through a view: every alias must see it
        d = g.rng.randrange(t.rank)
        view = f"{t.name}.narrow({d}, {g.rng.randint(0, t.shape[d])}, 0)"
        if t.shape[d] > 1:
            view = f"{t.name}.select({d}, {g.rng.randrange(t.shape[d])})"
        return Emit(f"{view}.{g.choice(('fill_(2)', 'zero_()', 'mul_(-1)', 'neg_()'))}",
                    t.exact and t.dtype != torch.bool, tags)
    src = g.pick(lambda v: v.base != t.base and broadcastable(t, v)
                 and torch.broadcast_shapes(t.shape, v.shape) == t.shape)
    form = g.rng.randrange(6)
    if form == 0 and src is not None:
        value = src.name
        if src.is_float() and not t.dtype.is_floating_point and t.dtype != torch.bool:
            if not src.exact:
                return None
            # float to integer is undefined in C for NaN, inf and out-of-range values (as casts)
            lo = 0 if t.dtype == torch.uint8 else -100
            value = f"{src.name}.nan_to_num(0.0, 0.0, 0.0).clamp({lo}, 100)"
        return Emit(f"{t.name}.copy_({value})", t.exact and src.exact, tags)
    if form == 1 and src is not None:
        op = str(g.choice(("add_", "sub_", "mul_")))
        return Emit(f"{t.name}.{op}({src.name})", None if t.exact and src.exact else False, tags)
    if form == 2:
        lo, hi = sorted(g.rng.choice((-1, 0, 2)) for _ in range(2))
        return Emit(f"{t.name}.clamp_({lo}, {hi})", t.exact, tags)
    if form == 3:
        unary = str(g.choice(EXACT_UNARY[:3])).replace("torch.", "").replace("({x})", "_()")
        return Emit(f"{t.name}.{unary}", t.exact, tags)
    if form == 4 and t.rank and 0 not in t.shape:
        n = g.rng.randint(1, t.shape[0])
        idx = g.index_input((n,), t, 0, perm_dim=0)
        return Emit(f"{t.name}.index_put_(({idx},), {t.name}.new_tensor(5))", t.exact, tags)
    value = str(g.choice(("1", "-3", "0"))) if not t.is_float() else "float('-inf')"
    return Emit(f"{t.name}.fill_({value})", t.exact, tags)


OPS = (
    ("indexing", 10, indexing),
    ("inplace", 8, inplace),
)
