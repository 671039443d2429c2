"""Wrapper IR pass `plan_memory`: drop dead buffers, then reuse freed storage for new allocations.

`Free(a)` followed later by `Allocate(b)` with the same device, dtype and storage size (elements
addressed by size and stride) becomes `Reuse(b, old=a)`, and that `Free(a)` is removed (the
`Reuse` drops `a`). Storage is only reused when nothing can still see it:
- only buffers this program allocated are candidates (never graph inputs, extern results or
  views, whose storage the program does not own);
- every name that may alias `a`'s storage (views of it, buffers that reused it, extern results
  computed from it, their multi-output elements) must be unused after the `Free(a)` and must not
  be a graph output.
Extern calls are assumed to possibly return views of their tensor arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

import sympy
from typing_extensions import assert_never

from polyduct.indexing import expanded
from polyduct.wrapper.ir import (
    Allocate,
    Comment,
    Constant,
    ExternCall,
    Free,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    Line,
    MultiOutput,
    Ref,
    ReinterpretView,
    Reuse,
    Shape,
    SizeDef,
    WrapperProgram,
)


def _refs(value: Constant) -> Iterable[str]:
    if isinstance(value, Ref):
        yield value.name
    elif isinstance(value, sympy.Basic):
        yield from _expr_names((value,))
    elif isinstance(value, (tuple, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _refs(item)


def _expr_names(exprs: Iterable[object]) -> set[str]:
    names: set[str] = set()
    for expr in exprs:
        if isinstance(expr, sympy.Basic) and not expr.is_Number:
            names.update(_symbol_names(expr))
    return names


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=4096)
def _symbol_names(expr: sympy.Basic) -> frozenset[str]:
    return frozenset(s.name for s in expr.free_symbols if isinstance(s, sympy.Symbol))


def names_used(line: Line) -> set[str]:
    """Every buffer or size-symbol name `line` reads (not the names it defines)."""
    match line:
        case GraphInputs() | Comment() | KernelDefinition():
            return set()
        case InputAssert(name=name, size=size, stride=stride):
            return {name} | _expr_names((*size, *stride))
        case SizeDef(source=source):
            return {source}
        case Allocate(size=size, stride=stride):
            return _expr_names((*size, *stride))
        case Free(name=name):
            return {name}
        case Reuse(old=old, size=size, stride=stride):
            return {old} | _expr_names((*size, *stride))
        case ReinterpretView(base=base, size=size, stride=stride, offset=offset):
            return {base} | _expr_names((*size, *stride, offset))
        case KernelCall(args=args, sizes=sizes):
            return set(args) | _expr_names(sizes)
        case ExternCall(args=args, kwargs=kwargs, out=out):
            used = set(_refs(args)) | set(_refs(tuple(v for _, v in kwargs)))
            return used | ({out} if out is not None else set())
        case MultiOutput(source=source):
            return {source}
        case GraphOutputs(names=names):
            return {n for n in names if isinstance(n, str)} | _expr_names(
                tuple(n for n in names if not isinstance(n, str))
            )
        case _:
            assert_never(line)


Uses = Callable[[Line], set[str]]


class _UsesOnce:
    """`names_used`, computed once per line object across the passes of one `plan_memory`."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Line, set[str]]] = {}  # id -> (line kept alive, names)

    def __call__(self, line: Line) -> set[str]:
        hit = self._seen.get(id(line))
        if hit is None:
            hit = self._seen[id(line)] = (line, names_used(line))
        return hit[1]


def storage_size(size: Shape, stride: Shape) -> sympy.Expr:
    """Elements a (size, stride) layout addresses from its first element (0 when empty)."""
    return _storage_size(tuple(size), tuple(stride))


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=4096)
def _storage_size(size: Shape, stride: Shape) -> sympy.Expr:
    if any(sympy.sympify(n) == 0 for n in size):
        return sympy.Integer(0)
    terms: list[sympy.Expr] = [sympy.Integer(1)]
    for n, s in zip(size, stride, strict=True):
        stride_expr = sympy.sympify(s)
        terms += (sympy.sympify(n) * stride_expr, -stride_expr)  # (n - 1) * s, distributed
    return expanded(sympy.Add(*terms))


@dataclass
class _Storage:
    """Union-find over names sharing storage, plus which roots this program allocated."""

    parent: dict[str, str] = field(default_factory=dict)
    owned: set[str] = field(default_factory=set)
    _groups: dict[str, set[str]] | None = None  # root -> names, built on first `members`

    def root(self, name: str) -> str:
        while self.parent.get(name, name) != name:
            name = self.parent[name]
        return name

    def join(self, name: str, other: str) -> None:
        self._groups = None
        a, b = self.root(name), self.root(other)
        if a != b:
            self.parent[a] = b
            self.owned.discard(a)

    def members(self, name: str) -> set[str]:
        root = self.root(name)
        if self._groups is None:  # joins are over once members are asked for
            self._groups = {}
            for n in self.parent:
                self._groups.setdefault(self.root(n), set()).add(n)
        return self._groups.get(root, set()) | {root}


def _aliases(lines: tuple[Line, ...], uses: Uses = names_used) -> _Storage:
    storage = _Storage()
    sizes = {line.symbol for line in lines if isinstance(line, SizeDef)}  # never storage
    for line in lines:
        match line:
            case Allocate(name=name):
                storage.parent.setdefault(name, name)
                storage.owned.add(name)
            case Reuse(name=name, old=old) | ReinterpretView(name=name, base=old):
                storage.parent.setdefault(name, name)
                storage.join(name, old)
            case MultiOutput(name=name, source=source):
                storage.parent.setdefault(name, name)
                storage.join(name, source)
            case ExternCall(result=result, out=out) if result and result != out:
                storage.parent.setdefault(result, result)
                # an out= call returns `out`; otherwise the result may view any tensor argument
                for arg in {out} if out is not None else uses(line) - sizes:
                    storage.join(result, arg)
    return storage


def _reusable(last_use: dict[str, int], index: int, name: str, storage: _Storage) -> bool:
    """Whether `Free(name)` at `index` releases storage nothing can see any more: no name of its
    storage group is used (read, or returned as a graph output) by a later line other than a
    `Free` (`last_use`: name -> index of the last such line)."""
    if name not in storage.owned or storage.root(name) != name:
        return False
    return all(last_use.get(member, -1) <= index for member in storage.members(name))


def _last_uses(lines: tuple[Line, ...], uses: Uses = names_used) -> dict[str, int]:
    """Name -> index of the last line, a later `del` of an alias (which reads nothing) aside,
    that uses it (`names_used`; a graph output uses the names it returns)."""
    last: dict[str, int] = {}
    for index, line in enumerate(lines):
        if not isinstance(line, Free):
            for name in uses(line):
                last[name] = index
    return last


def _key(line: Allocate | Reuse, device: str, dtype: object) -> tuple[str, str, sympy.Expr]:
    """What two allocations must share to swap storage: device, dtype and storage size (sympy
    expressions compare structurally, symbols' assumptions included)."""
    return device, str(dtype), storage_size(line.size, line.stride)


def reuse_buffers(program: WrapperProgram, uses: Uses = names_used) -> WrapperProgram:
    """Turn `Free(a) ... Allocate(b)` of equal device, dtype and storage size into `Reuse`."""
    lines = program.lines
    storage = _aliases(lines, uses)
    last_use = _last_uses(lines, uses)
    allocs = {line.name: line for line in lines if isinstance(line, Allocate)}
    pool: dict[tuple[str, str, sympy.Expr], list[tuple[int, str]]] = {}
    out: list[Line | None] = []
    for index, line in enumerate(lines):
        if isinstance(line, Free) and _reusable(last_use, index, line.name, storage):
            old = allocs[line.name]
            pool.setdefault(_key(old, old.device, old.dtype), []).append((len(out), old.name))
        elif isinstance(line, Allocate):
            free = pool.get(_key(line, line.device, line.dtype)) if pool else None
            if free:
                slot, old_name = free.pop()  # most recently freed: likeliest still in cache
                out[slot] = None
                out.append(Reuse(line.name, old_name, line.size, line.stride))
                continue
        out.append(line)
    return WrapperProgram(tuple(line for line in out if line is not None))


def remove_dead_buffers(program: WrapperProgram, uses: Uses = names_used) -> WrapperProgram:
    """Drop `Allocate(a)` and its `Free(a)` when nothing else ever uses `a`."""
    used: dict[str, int] = {}
    for line in program.lines:
        for name in uses(line):
            used[name] = used.get(name, 0) + 1
    frees = {line.name for line in program.lines if isinstance(line, Free)}
    dead = {
        line.name
        for line in program.lines
        if isinstance(line, Allocate) and line.name in frees and used.get(line.name, 0) == 1
    }
    kept = tuple(
        line
        for line in program.lines
        if not (isinstance(line, Allocate | Free) and line.name in dead)
    )
    return WrapperProgram(kept)


def plan_memory(program: WrapperProgram) -> WrapperProgram:
    """The `plan_memory` pass: dead-buffer removal, then storage reuse."""
    uses = _UsesOnce()
    return reuse_buffers(remove_dead_buffers(program, uses), uses)


PASSES: Final = (("plan_memory", plan_memory),)
