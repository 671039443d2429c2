"""Fusion: groups compute nodes into fusion groups in program order, and a group's loop bodies
into kernel stages (`polyduct.scheduling.plan` makes the `KernelSpec`s).

Fusion rules (greedy, deterministic, each node tries only the most recent group):
- a pointwise node joins a group whose outer space (size-1 dims dropped) equals its shape (an
  `outer` stage) or equals outer + reduction space (an `inner` stage, a reduction epilogue),
  or whose space is its shape with dims split (a layer norm's (B*S, H) output of a (B, S | H)
  reduction: the node's coordinates are merged kernel variables);
- a reduction joins a group with the same outer and reduction spaces (one `reduce` stage each);
- a node may read what the group wrote only at the point being computed: reduction results are
  kernel locals (read at exactly the index the reduction stores), pointwise results only within
  the same stage and at exactly the stored index (forwarded as values, never re-loaded).
Buffers written and read only inside one kernel are removed (forwarded values / locals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from polyduct.handlers.default import DefaultHandler
from polyduct.index_ranges import RangeSimplifier, range_simplifier
from polyduct.indexing import expanded, free_symbols, index_vars, symbol_text
from polyduct.ir import (
    Access,
    AccessRecorder,
    ComputeNode,
    Expr,
    ExternNode,
    IRGraph,
)
from polyduct.kernel import Stage, StageKind
from polyduct.ops import OpHandler

_ONE = sympy.Integer(1)


@dataclass(eq=False)
class Member:
    """A node placed in a group: its stage kind and its coordinates in kernel variables."""

    node: ComputeNode
    kind: StageKind
    x: tuple[Expr, ...]
    r: tuple[Expr, ...]
    access: Access
    replicated: bool = False  # a prologue: opens every stage over r (`stages`)


@dataclass(eq=False)
class Group:
    """A fused kernel being built."""

    outer: tuple[Expr, ...]
    red: tuple[Expr, ...]
    members: list[Member] = field(default_factory=list)

    def stage_of(self, buffer: str) -> int | None:
        """Index of the member that writes `buffer`."""
        for i, m in enumerate(self.members):
            if buffer in m.node.outputs:
                return i
        return None


Item = Group | ExternNode


def _squeeze(ranges: Sequence[Expr]) -> tuple[Expr, ...]:
    return tuple(s for s in ranges if s != 1)


def _squeeze_red(ranges: Sequence[Expr]) -> tuple[Expr, ...]:
    """Reduction ranges without size-1 dims, but never none: a reduction over one element
    (`x.sum(1)` of an (n, 1) tensor) stays a reduction of extent 1 for the backends."""
    squeezed = _squeeze(ranges)
    return squeezed or ((sympy.Integer(1),) if ranges else ())


def _coords(ranges: Sequence[Expr], kvars: Sequence[Expr]) -> tuple[Expr, ...]:
    """Node coordinates: kernel variables at non-unit dims, 0 at size-1 dims."""
    it = iter(kvars)
    return tuple(sympy.Integer(0) if s == 1 else next(it) for s in ranges)


def _merged_coords(
    ranges: Sequence[Expr], dims: Sequence[Expr], kvars: Sequence[Expr]
) -> tuple[Expr, ...] | None:
    """Node coordinates where each non-unit dim of `ranges` is a run of the kernel's `dims`
    merged (row-major), e.g. a (B*S, H) view of a (B, S | H) layer norm's output: the merged
    coordinate is `S*x0 + x1`. None where `ranges` is not such a merge of `dims`."""
    coords: list[Expr] = []
    pos = 0
    for size in ranges:
        if size == 1:
            coords.append(sympy.Integer(0))
            continue
        extent, coord, start = _ONE, sympy.Integer(0), pos
        while pos < len(dims) and extent != size:
            extent, coord, pos = extent * dims[pos], coord * dims[pos] + kvars[pos], pos + 1
        if extent != size or pos == start:
            return None
        coords.append(coord)
    return tuple(coords) if pos == len(dims) else None


def _place(
    node: ComputeNode, group: Group, traces: dict[tuple[Any, ...], Access] | None = None
) -> Member | None:
    """How `node` sits in `group` (stage kind and coordinates), or None if shapes differ.

    `traces` keeps the node's accesses by coordinates: a node placed twice at the same
    coordinates (tried in the last group, then put in a new one) is traced once.
    """
    xv = index_vars("x", len(group.outer))
    rv = index_vars("r", len(group.red))
    sq = _squeeze(node.ranges)
    if node.kind == "pointwise":
        if sq == group.outer:
            kind: StageKind = "outer"
            x, r = _coords(node.ranges, xv), ()
        elif group.red and sq == group.outer + group.red:
            kind, x, r = "inner", _coords(node.ranges, (*xv, *rv)), ()
        elif (merged := _merged_coords(node.ranges, group.outer, xv)) is not None:
            kind, x, r = "outer", merged, ()
        elif group.red and (
            merged := _merged_coords(node.ranges, group.outer + group.red, (*xv, *rv))
        ) is not None:
            kind, x, r = "inner", merged, ()
        else:
            return None
    elif node.kind == "reduction":
        if sq != group.outer or _squeeze_red(node.reduction_ranges) != group.red:
            return None
        kind, x, r = "reduce", _coords(node.ranges, xv), _coords(node.reduction_ranges, rv)
    else:
        return None
    traces = {} if traces is None else traces
    key = (x, r, group.outer, group.red)
    access = traces.get(key)
    if access is None:
        access = traces[key] = Access()
        node.body(AccessRecorder(access, _simplifier(group, xv, rv)), x, r)
    return Member(node, kind, x, r, access)


def _simplifier(group: Group, xv: Sequence[Expr], rv: Sequence[Expr]) -> RangeSimplifier | None:
    """Index simplification over the group's loop ranges, as its kernel will apply it: fusion
    decisions see `x1`, not `((1024*x0 + x1) // 1024) % 1024` (issue 4's softmax backward).
    None when no extent is a number (dynamic shapes): nothing would simplify."""
    if not any(isinstance(n, sympy.Integer) for n in (*group.outer, *group.red)):
        return None
    return _loop_simplifier(xv, rv, group.outer, group.red)


def _loop_simplifier(
    x: Sequence[Expr], r: Sequence[Expr], outer: Sequence[Expr], red: Sequence[Expr]
) -> RangeSimplifier:
    """The shared simplifier for loop variables `x`, `r` over extents `outer`, `red`."""
    ranges = dict(zip(x, outer, strict=False))
    ranges.update(zip(r, red, strict=False))
    return range_simplifier(ranges)


def _scattered(access: Access) -> set[str]:
    """Buffers `access` stores at an indirect (data-dependent) index, or accumulates into at
    any index: an indirect index the loop ranges pin to one value (an index into a dim of size
    1) simplifies away, and the store still adds to what the buffer held (halide seed 9403,
    program 2399: `index_put(..., accumulate=True)` twice, then an add)."""
    return access.accumulated | {n for n, idx in access.stores if _indirect(idx)}


def _indirect(index: Expr) -> bool:
    """Whether `index` holds a data-dependent (`indirect_indexing`) symbol."""
    return any(symbol_text(s).startswith("indirect") for s in free_symbols(index))


def _touched(member: Member) -> set[str]:
    return {n for n, _ in member.access.loads} | {n for n, _ in member.access.stores}


def _reads_ok(member: Member, group: Group) -> bool:
    """Whether `member` reads what `group` wrote only at the point it computes.

    A scatter (a store at an indirect index) shares a kernel with nothing that touches its buffer:
    other points of the loop may write any element of it (issue 4).
    """
    if _scattered(member.access) & {n for m in group.members for n in _touched(m)}:
        return False
    if _touched(member) & {n for m in group.members for n in _scattered(m.access)}:
        return False
    rv = set(index_vars("r", len(group.red)))
    last = group.members[-1] if group.members else None
    for name, index in member.access.loads:
        pos = group.stage_of(name)
        if pos is None:
            continue
        writer = group.members[pos]
        if name in writer.node.accumulators:
            # A local holds the reduction of the point being computed, and of no other: a
            # flip or a shift of the result (`x.sum(-1).flip(0)`) must load it from memory.
            want = expanded(index)
            acc = writer.node.accumulators[name]
            stored = [expanded(i) for n, i in writer.access.reduction_stores if n in (name, acc)]
            if free_symbols(index) & rv or want not in stored:
                return False
            continue
        if writer.replicated:  # forwarded in the stages it opens, which run over r
            if member.kind not in ("reduce", "inner"):
                return False
        elif writer is not last or writer.kind != member.kind or member.kind == "reduce":
            return False
        want = expanded(index)
        if all(expanded(idx) != want for n, idx in writer.access.stores if n == name):
            return False
    return True


def schedule(graph: IRGraph, prologues: bool = True) -> list[Item]:
    """Fuse `graph`'s compute nodes into groups; externs stay in place. `prologues`: a reduction
    may take the pointwise group before it as a prologue (`_with_prologue`)."""
    items: list[Item] = []
    for node in graph.nodes:
        if isinstance(node, ExternNode):
            items.append(node)
            continue
        last = items[-1] if items and isinstance(items[-1], Group) else None
        traces: dict[tuple[Any, ...], Access] = {}
        member = _place(node, last, traces) if last is not None else None
        if last is not None and member is not None and _reads_ok(member, last):
            last.members.append(member)
            continue
        if prologues and last is not None and (prologue := _with_prologue(node, last)):
            items[-1] = prologue
            continue
        group = Group(_squeeze(node.ranges), _squeeze_red(node.reduction_ranges))
        if node.kind in ("scan", "sort"):
            group = Group(tuple(node.ranges), tuple(node.reduction_ranges))
            xv, rv = index_vars("x", len(group.outer)), index_vars("r", len(group.red))
            access = Access()
            node.body(AccessRecorder(access, _simplifier(group, xv, rv)), xv, rv)
            group.members.append(Member(node, node.kind, xv, rv, access))
        else:
            placed = _place(node, group, traces)
            assert placed is not None
            group.members.append(placed)
        items.append(group)
    return items


MAX_PROLOGUE = 4  # pointwise nodes a reduction recomputes in each of its stages


def _gathers(access: Access) -> bool:
    """Whether `access` loads at a data-dependent index: a gather, bounds-checked and scalar on
    the CPU, costs too much to compute again in every stage (DeBERTa's attention scores gather
    their relative-position terms: with them as the softmax's prologue its forward went from
    0.64 to 1.11 ms)."""
    return any(_indirect(idx) for _, idx in access.loads)


def _with_prologue(node: ComputeNode, group: Group) -> Group | None:
    """`group`, pointwise over the reduction `node`'s whole space (outer + reduction dims), with
    `node` joined as its reduction: the group's nodes become a prologue that every stage of the
    new kernel over the reduction dims computes again before its own work (the first one stores
    the results), so each stage reads their values as forwarded values, never from memory
    another stage wrote. A residual add and the layer norm that reads it are one kernel
    (Inductor fuses them too), not two. Only where `node` reads what the group wrote, and for at
    most MAX_PROLOGUE nodes that gather nothing."""
    if node.kind != "reduction" or group.red or len(group.members) > MAX_PROLOGUE:
        return None
    if any(m.kind != "outer" or _gathers(m.access) for m in group.members):
        return None
    new = Group(_squeeze(node.ranges), _squeeze_red(node.reduction_ranges))
    if new.outer + new.red != group.outer:
        return None
    for m in group.members:
        placed = _place(m.node, new)
        if placed is None or placed.kind != "inner":
            return None
        placed.replicated = True
        new.members.append(placed)
    member = _place(node, new)
    written = {b for m in group.members for b in m.node.outputs}
    if member is None or not {n for n, _ in member.access.loads} & written:
        return None
    if not _reads_ok(member, new):
        return None
    new.members.append(member)
    return new


class _KernelOps(DefaultHandler[Any]):
    """Forwards every op to the backend's handler; redirects reduction results to their locals,
    forwards values stored earlier in the same stage, and drops stores of removed buffers."""

    def __init__(
        self,
        inner: OpHandler[Any],
        renames: dict[str, str],
        removed: set[str],
        simplify: RangeSimplifier,
    ):
        self.inner, self.renames, self.removed = inner, renames, removed
        self.simplify = simplify  # index expressions over the kernel's loop ranges
        self.values: dict[tuple[str, Expr], Any] = {}

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)

    def index_expr(self, expr: Expr, dtype: Any) -> Any:
        return self.inner.index_expr(self.simplify(expr), dtype)

    def store_reduction(self, name: str, index: Expr, value: Any) -> None:
        self.inner.store_reduction(name, self.simplify(index), value)

    def load(self, name: str, index: Expr) -> Any:
        index = self.simplify(index)
        if name in self.renames:
            return self.inner.load(self.renames[name], index)
        key = (name, expanded(index))
        if key in self.values:
            return self.values[key]
        return self.inner.load(name, index)

    def store(self, name: str, index: Expr, value: Any, mode: Any = None) -> None:
        index = self.simplify(index)
        if mode is None:
            self.values[(name, expanded(index))] = value
        if name not in self.removed:  # a removed buffer, accumulated into or not, has no reader
            self.inner.store(name, index, value, mode)


def stages(
    group: Group, renames: dict[str, str], removed: set[str], copies: list[tuple[str, Any]]
) -> tuple[Stage, ...]:
    runs: list[list[Member]] = []
    for m in group.members:
        if m.replicated:
            continue
        if runs and runs[-1][-1].kind == m.kind and m.kind in ("outer", "inner"):
            runs[-1].append(m)
        else:
            runs.append([m])
    # A prologue (_with_prologue) opens every stage that runs over the reduction dims; the first
    # of them stores its results, the later ones only forward them.
    prologue = [m for m in group.members if m.replicated]
    stored_once = removed | {b for m in prologue for b in m.node.outputs}
    extents = (group.outer, group.red)
    found, opened = [], False
    for run in runs:
        dropped = removed
        if prologue and run[0].kind in ("reduce", "inner"):
            dropped, opened = (stored_once if opened else removed), True
            run = [*prologue, *run]
        found.append(Stage(run[-1].kind, _stage_body(run, renames, dropped, extents)))
    if copies:
        found.append(Stage("outer", _copy_body(group, copies)))
    return tuple(found)


def _stage_body(
    run: list[Member],
    renames: dict[str, str],
    removed: set[str],
    extents: tuple[Sequence[Expr], Sequence[Expr]],
) -> Any:
    def body(ops: OpHandler[Any], x: Sequence[Expr], r: Sequence[Expr]) -> None:
        wrapped = _KernelOps(ops, renames, removed, _loop_simplifier(x, r, *extents))
        subs = _kernel_subs(x, r)
        identity = all(k is v for k, v in subs.items())  # traced at the kernel's own variables
        for m in run:
            if identity:
                mx, mr = m.x, m.r
            else:
                mx = tuple(sympy.sympify(e).xreplace(subs) for e in m.x)
                mr = tuple(sympy.sympify(e).xreplace(subs) for e in m.r)
            m.node.body(wrapped, mx, mr)

    return body


def _kernel_subs(x: Sequence[Expr], r: Sequence[Expr]) -> dict[Any, Expr]:
    xv, rv = index_vars("x", len(x)), index_vars("r", len(r))
    subs: dict[Any, Expr] = dict(zip(xv, x, strict=True))
    subs.update(zip(rv, r, strict=True))
    return subs


def _copy_body(group: Group, copies: list[tuple[str, Any]]) -> Any:
    def body(ops: OpHandler[Any], x: Sequence[Expr], r: Sequence[Expr]) -> None:
        for buf, (local, layout, coords) in copies:
            subs = _kernel_subs(x, ())
            idx = [sympy.sympify(c).xreplace(subs) for c in coords]
            ops.store(buf, layout.index(idx), ops.load(local, sympy.Integer(0)))

    return body
