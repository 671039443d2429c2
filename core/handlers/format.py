"""`Formatter`: renders a loop body as readable text, one line per op (`tmp3 = exp(tmp2)`).

Values are temporary names; index expressions print as sympy text; buffer names print bare.
`masked` and `scan` show their traced sub-bodies indented below the line that opens them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from polyduct.codegen import IndentedBuffer, string_literal
from polyduct.handlers.default import DefaultHandler
from polyduct.indexing import index_vars
from polyduct.ops import reduction_num_outputs

_NO_VALUE = frozenset({"store", "store_reduction", "check_bounds", "device_assert_async"})
Body = Callable[[Any, Sequence[sympy.Expr], Sequence[sympy.Expr]], None]


def _render(arg: object) -> str:
    if isinstance(arg, torch.dtype):
        return str(arg)
    if isinstance(arg, tuple):
        inner = ", ".join(_render(a) for a in arg)
        return f"({inner},)" if len(arg) == 1 else f"({inner})"
    if isinstance(arg, float):
        return repr(arg)
    return str(arg)


class Formatter(DefaultHandler[str]):
    """Records each op as a text line into `buffer`; op results are fresh `tmpN` names."""

    def __init__(self, buffer: IndentedBuffer | None = None) -> None:
        self.buffer = buffer or IndentedBuffer()
        self._temps = itertools.count()
        self._symbols = itertools.count()
        self._functions = itertools.count()

    def _new(self) -> str:
        return f"tmp{next(self._temps)}"

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        trimmed = list(args)
        while trimmed and trimmed[-1] is None:
            trimmed.pop()  # optional arguments left at None are not shown
        call = f"{name}({', '.join(_render(a) for a in trimmed)})"
        if name in _NO_VALUE:
            self.buffer.line(call)
            return None
        count = self._outputs(name, args)
        if count is None:
            result = self._new()
            self.buffer.line(f"{result} = {call}")
            return result
        results = tuple(self._new() for _ in range(count))
        self.buffer.line(f"{', '.join(results)}{',' if count == 1 else ''} = {call}")
        return results

    @staticmethod
    def _outputs(name: str, args: tuple[Any, ...]) -> int | None:
        """How many results a multi-output op returns (None: a single value)."""
        if name == "reduction":
            count = reduction_num_outputs(args[2])
            return None if count == 1 else count
        if name == "frexp":
            return 2
        if name == "sort":
            return len(args[1])
        return None

    def device_assert_async(self, cond: str, msg: str) -> None:
        self.buffer.line(f"device_assert_async({cond}, {string_literal(msg)})")

    def indirect_indexing(
        self, x: str, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        symbol = sympy.Symbol(f"indirect{next(self._symbols)}", integer=True, nonnegative=True)
        self.buffer.line(f"{symbol} = indirect_indexing({x}, {size}, {check}, {wrap_neg})")
        return symbol

    def masked(self, mask: str, body: Callable[[], Any], other: Any) -> Any:
        result = self._new()
        self.buffer.line(f"{result} = masked({mask}, other={_render(other)}):")
        with self.buffer.indent():
            self.buffer.line(f"return {_render(body())}")
        return result

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[str, ...], tuple[str, ...]], tuple[str, ...]],
        values: tuple[str, ...],
    ) -> tuple[str, ...]:
        fn = f"combine{next(self._functions)}"
        left = tuple(f"{fn}_a{i}" for i in range(len(values)))
        right = tuple(f"{fn}_b{i}" for i in range(len(values)))
        self.buffer.line(f"def {fn}({', '.join(left + right)}):")
        with self.buffer.indent():
            self.buffer.line(f"return {_render(tuple(combine_fn(left, right)))}")
        results = tuple(self._new() for _ in values)
        joined = ", ".join(results) + ("," if len(results) == 1 else "")
        self.buffer.line(f"{joined} = scan({_render(dtypes)}, {fn}, {_render(tuple(values))})")
        return results


def format_body(
    body: Body, ranges: Sequence[sympy.Expr], reduction_ranges: Sequence[sympy.Expr] = ()
) -> str:
    """The text of `body` traced over index variables `x0..` (ranges) and `r0..` (reduction)."""
    formatter = Formatter()
    xs = index_vars("x", len(ranges))
    rs = index_vars("r", len(reduction_ranges))
    body(formatter, xs, rs)
    return formatter.buffer.getvalue()
