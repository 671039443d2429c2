"""Delta debugging of a failing program: the smallest variant that still fails the same way.

Candidates, each kept only when `still_fails` says so: one call instead of two, no training,
static shapes; one output instead of several; dead statements removed; a statement replaced by
an earlier value of the same shape and dtype (its uses rewired); contiguous, plain-valued inputs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from polyduct.fuzz.program import Program, Stmt, shadow_values

NAME = re.compile(r"\b[avi]\d+\b")
StillFails = Callable[[Program], bool]


def _names(stmt: Stmt) -> set[str]:
    return set(NAME.findall(stmt.expr))


def dead_code_removed(program: Program) -> Program:
    """Drop statements nothing returned depends on (in-place writes to live storage stay)."""
    live = set(program.outputs)
    keep: list[Stmt] = []
    for stmt in reversed(program.stmts):
        writes_live = "inplace" in stmt.tags and bool(_names(stmt) & live)
        if stmt.out in live or writes_live:
            keep.append(stmt)
            live |= _names(stmt)
    used = live | {n for s in keep for n in _names(s)}
    inputs = tuple(s for s in program.inputs if s.name in used)
    return replace(program, stmts=tuple(reversed(keep)), inputs=inputs)


def _rewired(program: Program, i: int, new: str) -> Program:
    old = program.stmts[i].out
    pattern = re.compile(rf"\b{old}\b")
    stmts = [*program.stmts[:i]] + [
        replace(s, expr=pattern.sub(new, s.expr)) for s in program.stmts[i + 1:]]
    outputs = tuple(dict.fromkeys(new if o == old else o for o in program.outputs))
    return replace(program, stmts=tuple(stmts), outputs=outputs)


def _substitutions(program: Program) -> Iterator[Program]:
    try:
        metas = shadow_values(program)
    except Exception:  # noqa: BLE001 -- a program the shrinker cannot evaluate stays as it is
        return
    order = [s.name for s in program.inputs] + [s.out for s in program.stmts]
    exact = set(program.exact)
    for i in reversed(range(len(program.stmts))):
        out = program.stmts[i].out
        m = metas[out]
        for name in order[: len(program.inputs) + i]:
            cand = metas[name]
            if (cand.shape == m.shape and cand.dtype == m.dtype
                    and (name in exact or out not in exact)):
                yield _rewired(program, i, name)
                break


def _candidates(program: Program) -> Iterator[Program]:
    if program.has_alt():
        yield program.without_alt()
    if program.train:
        yield replace(program, train=False,
                      inputs=tuple(replace(s, grad=False) for s in program.inputs))
    if program.mode != "static":
        yield replace(program, mode="static")
    if len(program.outputs) > 1:
        for out in program.outputs:
            yield dead_code_removed(replace(program, outputs=(out,)))
    yield dead_code_removed(program)
    for cand in _substitutions(program):
        yield dead_code_removed(cand)
    for i, spec in enumerate(program.inputs):
        if spec.layout != "contiguous" or spec.values == "edge":
            plain = replace(spec, layout="contiguous",
                            values="normal" if spec.values == "edge" else spec.values)
            yield replace(program, inputs=(*program.inputs[:i], plain, *program.inputs[i + 1:]))


def _size(program: Program) -> tuple[int, int, int]:
    return (len(program.stmts), len(program.inputs) + len(program.outputs),
            int(program.train) + int(program.has_alt()) + int(program.mode != "static"))


def shrink(program: Program, still_fails: StillFails, budget_s: float = 90.0) -> Program:
    """The smallest failing variant of `program` found within `budget_s` seconds."""
    deadline = time.monotonic() + budget_s
    seen: set[Program] = {program}
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for cand in _candidates(program):
            if cand in seen or _size(cand) > _size(program) or time.monotonic() > deadline:
                continue
            seen.add(cand)
            if still_fails(cand):
                program, progress = cand, True
                break
    return program
