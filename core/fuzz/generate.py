"""Random valid programs: `generate(seed, index, dtypes)` is a pure function of its arguments.

Each statement an op generator proposes is evaluated on zero-filled stand-ins of the inputs;
one that torch refuses (shape, dtype or autograd error) is dropped and another is drawn.
"""

from __future__ import annotations

import random
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace

import torch

from polyduct.fuzz import ops_conv, ops_index, ops_pointwise, ops_reduce, ops_shape
from polyduct.fuzz.gen import MAX_NUMEL, Emit, Gen, Val
from polyduct.fuzz.program import Program, Stmt, evaluate

OpGen = Callable[[Gen], Emit | None]
OPS: tuple[tuple[str, int, OpGen], ...] = (
    *ops_pointwise.OPS, *ops_reduce.OPS, *ops_shape.OPS, *ops_index.OPS, *ops_conv.OPS,
)
SIZE_POOL = (1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 17, 32, 0)
SIZE_WEIGHTS = (6, 8, 10, 8, 8, 4, 6, 6, 4, 4, 3, 2, 1)
NAME = re.compile(r"\b[avi]\d+\b")
# Known bugs being fixed elsewhere, by statement tag (an op generator tags the statements that
# trigger one): a failing program with such a statement is reported as known, not as a new
# failure. Empty while no known bug is open (0-d reductions, the last, are fixed).
KNOWN: dict[str, str] = {}


def _sizes(rng: random.Random) -> tuple[list[int], list[int]]:
    sizes = rng.choices(SIZE_POOL, SIZE_WEIGHTS, k=rng.randint(1, 3))
    # The second call of a dynamic program grows every size above 1: sizes 0 and 1 specialise.
    return sizes, [s + rng.randint(1, 3) if s > 1 else s for s in sizes]


def _add(g: Gen, stmts: list[Stmt], emit: Emit, known: bool) -> None:
    if not known and set(emit.tags) & set(KNOWN):
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = evaluate(emit.expr, g.env())
    except Exception:  # noqa: BLE001 -- torch refused the statement: draw another
        return
    if not isinstance(result, torch.Tensor) or result.numel() > MAX_NUMEL:
        return
    out = f"v{len(stmts)}"
    exact = emit.exact if emit.exact is not None else not result.dtype.is_floating_point
    base = g.base_of(result)
    if base is not None and "inplace" in emit.tags and not exact:
        g.mark_inexact(base)
    g.pool.append(Val(out, result, exact, base or out))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g.alt[out] = g.alt_value(emit.expr)
    stmts.append(Stmt(out, emit.expr, emit.tags))


def _outputs(g: Gen, stmts: list[Stmt]) -> tuple[str, ...]:
    names = [s.out for s in stmts]
    if not names:
        return ()
    extra = g.rng.sample(names[:-1], min(len(names) - 1, g.rng.randint(0, 2)))
    return tuple(dict.fromkeys([names[-1], *extra]))


def _trainable(g: Gen, outputs: Iterable[str]) -> bool:
    by_name = {v.name: v for v in g.pool}
    return any(by_name[o].meta.requires_grad and by_name[o].is_float() for o in outputs)


def generate(seed: int, index: int, dtypes: Iterable[torch.dtype], known: bool = True) -> Program:
    """Program number `index` of the campaign seeded `seed`, over `dtypes` only."""
    rng = random.Random(f"polyduct.fuzz:{seed}:{index}")
    sizes, alt = _sizes(rng)
    allowed = tuple(d for d in dtypes)
    train = rng.random() < 0.15 and any(d in allowed for d in (torch.float32, torch.float64))
    g = Gen(rng, allowed, sizes, alt, train=train)
    for _ in range(rng.randint(1, 3)):
        g.new_input(g.random_dtype(floats_only=train and not g.inputs))
    stmts: list[Stmt] = []
    target = rng.choice((1, 2, 3, 4, 5, 6, 8, 10, 12))
    weights = [w for _, w, _ in OPS]
    for _ in range(target * 8):
        if len(stmts) >= target:
            break
        if rng.random() < 0.06:
            g.new_input()
            continue
        emit = rng.choices(OPS, weights)[0][2](g)
        if emit is not None:
            _add(g, stmts, emit, known)
    outputs = _outputs(g, stmts)
    used = {n for s in stmts for n in NAME.findall(s.expr)}
    g.inputs = [spec for spec in g.inputs if spec.name in used or not stmts]
    exact = tuple(v.name for v in g.pool if v.exact)
    mode = rng.choices(("static", "dynamic", "auto"), (60, 20, 20))[0]
    program = Program(tuple(g.inputs), tuple(stmts), outputs, mode, train, seed, exact=exact)
    if train and not _trainable(g, outputs):
        program = replace(program, train=False,
                          inputs=tuple(replace(s, grad=False) for s in program.inputs))
    return program if rng.random() < 0.45 else program.without_alt()
