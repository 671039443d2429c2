"""Text-codegen helpers shared by every backend that emits source: the value of a generated
expression, CSE, indented buffers, escaping, literals.

Generated source is deterministic (names are handed out in first-use order) and safe: every name
placed in it passes through `identifier`, every string through `string_literal`.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class Value:
    """A value in a backend's generated kernel source: `name`, the expression that holds it (a
    temporary's name or a literal), and `dtype`, the torch dtype it stands for. Every source
    backend's ops take and return these; `str(value)` is the expression."""

    name: str
    dtype: torch.dtype

    def __str__(self) -> str:
        return self.name


def float_literal(number: float) -> str:
    """`number` as a Python literal, with infinities and NaN spelled `float("inf")`,
    `float("-inf")` and `float("nan")`."""
    if math.isnan(number):
        return 'float("nan")'
    if math.isinf(number):
        return 'float("inf")' if number > 0 else 'float("-inf")'
    return repr(number)


def identifier(name: str, prefix: str = "v") -> str:
    """`name` made a valid identifier in Python and C: unsafe characters become `_`."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not cleaned or not _IDENT.match(cleaned):
        cleaned = f"{prefix}_{cleaned}"
    return cleaned


def string_literal(text: str) -> str:
    """A double-quoted string literal valid in Python and C/C++ (ASCII-only, escaped)."""
    return json.dumps(text, ensure_ascii=True)


class PythonNames:
    """Names -> unique, valid Python identifiers, none of them `reserved` nor a keyword nor a
    dunder, in first-use order: the same name always gets the same identifier."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._map: dict[str, str] = {}
        self._used: set[str] = set(reserved)

    def __call__(self, name: str, prefix: str = "v") -> str:
        if name not in self._map:
            base = identifier(name, prefix)
            if keyword.iskeyword(base) or keyword.issoftkeyword(base) or base.startswith("__"):
                base = f"{prefix}_{base}"
            self._map[name] = self.fresh(base)
        return self._map[name]

    def fresh(self, base: str) -> str:
        """A new identifier (`base`, or `base_N`), unlike every name given out so far."""
        candidate, n = base, 0
        while candidate in self._used:
            n += 1
            candidate = f"{base}_{n}"
        self._used.add(candidate)
        return candidate


class IndentedBuffer:
    """Lines of source with an indentation level."""

    def __init__(self, indent: str = "    ") -> None:
        self._lines: list[str] = []
        self._level = 0
        self._indent = indent

    def line(self, text: str = "") -> None:
        """Append one line at the current indentation."""
        self._lines.append(f"{self._indent * self._level}{text}" if text else "")

    def lines(self, texts: list[str]) -> None:
        """Append several lines at the current indentation."""
        for text in texts:
            self.line(text)

    @contextmanager
    def indent(self, levels: int = 1) -> Iterator[None]:
        """Indent lines added inside the `with` block."""
        self._level += levels
        try:
            yield
        finally:
            self._level -= levels

    def getvalue(self) -> str:
        """The source text, one trailing newline."""
        return "\n".join(self._lines) + "\n"


class CSE:
    """Common-subexpression elimination of op results: one temporary per distinct expression.

    `generate(expr)` returns the temporary that holds `expr`, emitting `tmpN = expr` into the
    buffer the first time. Backends render each op to an expression string and pass it here, so
    identical expressions within one scope share one temporary.
    """

    def __init__(
        self, buffer: IndentedBuffer, assign: str = "{name} = {expr}", prefix: str = "tmp"
    ):
        self.buffer = buffer
        self._assign = assign
        self._prefix = prefix
        self._cache: dict[str, str] = {}
        self._count = 0

    def new_name(self) -> str:
        """A fresh temporary name (unique within this CSE)."""
        name = f"{self._prefix}{self._count}"
        self._count += 1
        return name

    def generate(self, expr: str, *, reuse: bool = True) -> str:
        """The temporary holding `expr`; emits its assignment on first use."""
        if reuse and expr in self._cache:
            return self._cache[expr]
        name = self.new_name()
        self.buffer.line(self._assign.format(name=name, expr=expr))
        if reuse:
            self._cache[expr] = name
        return name

    def invalidate(self) -> None:
        """Forget cached expressions (after a store that may change what a load returns)."""
        self._cache.clear()

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Expressions cached inside the block are forgotten after it (branches, masked bodies)."""
        saved = dict(self._cache)
        try:
            yield
        finally:
            self._cache = saved
