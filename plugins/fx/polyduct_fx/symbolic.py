"""Sympy size expressions -> FX arithmetic nodes, hash-consed per expression.

Integers stay Python ints; a symbol is whatever node its `SizeDef` made (emitted on first use, so
the order of size definitions and their users in the program does not matter).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import sympy
import torch
import torch.fx
import torch.utils._sympy.functions as torch_sympy

from polyduct.errors import WrapperError
from polyduct.indexing import FloorDiv, ModularIndexing

SymValue: TypeAlias = "int | torch.fx.Node"
Resolve = Callable[[str], SymValue]


class SymEmitter:
    """Emits sympy size expressions (integers, and quotients of sizes) into `graph`;
    `resolve(name)` gives a symbol's value."""

    def __init__(self, graph: torch.fx.Graph, resolve: Resolve) -> None:
        self.graph, self.resolve = graph, resolve
        self._memo: dict[sympy.Expr, SymValue] = {}

    def emit(self, expr: sympy.Expr | int) -> SymValue:
        """The FX value (int or node) of `expr`."""
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        if expr not in self._memo:
            self._memo[expr] = self._emit_uncached(expr)
        return self._memo[expr]

    def _emit_uncached(self, expr: sympy.Expr) -> SymValue:
        if isinstance(expr, sympy.Symbol):
            return self.resolve(expr.name)
        args = [self.emit(a) for a in expr.args]
        if isinstance(expr, sympy.Not):
            return self.graph.call_function(operator.not_, (args[0],))
        if isinstance(expr, ModularIndexing):
            return self._call(
                operator.mod, self._call(operator.floordiv, args[0], args[1]), args[2]
            )
        fn = _FUNCTIONS.get(type(expr)) or _base_function(expr)
        if fn is None or any(a.is_Rational and not a.is_Integer for a in expr.args):
            raise WrapperError("fx", str(expr), "size expression has no integer FX lowering")
        value = args[0]
        for arg in args[1:]:
            value = self._call(fn, value, arg)
        return value

    def add(self, a: SymValue, b: SymValue) -> SymValue:
        """a + b, folded when both are ints."""
        return self._call(operator.add, a, b)

    def _call(self, fn: Callable[..., Any], a: SymValue, b: SymValue) -> SymValue:
        if isinstance(a, int) and isinstance(b, int):
            return int(fn(a, b))
        return self.graph.call_function(fn, (a, b))


_FUNCTIONS: Mapping[type, Callable[..., Any]] = {
    sympy.Add: operator.add,
    sympy.Mul: operator.mul,
    FloorDiv: operator.floordiv,
    sympy.Max: torch.sym_max,
    sympy.Min: torch.sym_min,
    torch_sympy.Max: torch.sym_max,  # what torch's shape environment produces
    torch_sympy.Min: torch.sym_min,
    sympy.Pow: operator.pow,
    torch_sympy.IntTrueDiv: operator.truediv,  # a float of sizes: an interpolation's scale
    torch_sympy.FloatTrueDiv: operator.truediv,
    # conditions on sizes (what `torch._check` leaves for `aten._assert_scalar`)
    sympy.GreaterThan: operator.ge,
    sympy.StrictGreaterThan: operator.gt,
    sympy.LessThan: operator.le,
    sympy.StrictLessThan: operator.lt,
    sympy.Eq: operator.eq,
    sympy.Ne: operator.ne,
    sympy.And: operator.and_,
    sympy.Or: operator.or_,
}


def _base_function(expr: sympy.Expr) -> Callable[..., Any] | None:
    for cls, fn in _FUNCTIONS.items():
        if isinstance(expr, cls):
            return fn
    return None
