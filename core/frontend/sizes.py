"""Sizes from torch's symbolic shapes: SymInts and fake-tensor layouts as polyduct sympy."""

from __future__ import annotations

import functools
from typing import Any

import sympy
import torch

from polyduct.indexing import FloorDiv, ModularIndexing, size_symbol
from polyduct.ir import Layout


def sym_expr(value: Any) -> sympy.Expr:
    """An int or SymInt as a sympy expression over polyduct size symbols.

    torch's own integer functions (`FloorDiv`, `CleanDiv`, `ModularIndexing`) become polyduct's
    (`polyduct.indexing`), which every kernel backend's index printer knows.
    """
    if type(value) is int:
        return _integer(value)
    if isinstance(value, torch.SymInt):
        return _from_torch(value.node.expr)
    if isinstance(value, (int, sympy.Expr)):
        return sympy.sympify(value)
    raise TypeError(f"not a size: {value!r}")


@functools.lru_cache(maxsize=1024)
def _integer(value: int) -> sympy.Expr:
    return sympy.Integer(value)


@functools.lru_cache(maxsize=1024)
def _from_torch(expr: sympy.Expr) -> sympy.Expr:
    """A torch symbolic-shape expression over polyduct's size symbols and functions."""
    subs = {s: size_symbol(str(s)) for s in expr.free_symbols}
    return _polyduct_functions(sympy.sympify(expr.xreplace(subs)))


def _polyduct_functions(expr: sympy.Expr) -> sympy.Expr:
    from torch.utils._sympy import functions as torch_fns

    if not expr.args:
        return expr
    args = [_polyduct_functions(a) for a in expr.args]
    if isinstance(expr, torch_fns.FloorDiv):  # CleanDiv is a FloorDiv
        return FloorDiv(*args)
    if isinstance(expr, torch_fns.ModularIndexing):
        return ModularIndexing(*args)
    return expr.func(*args) if args != list(expr.args) else expr


def meta_layout(val: torch.Tensor) -> Layout:
    """The layout a fake tensor describes."""
    size = tuple(sym_expr(s) for s in val.shape)
    stride = tuple(sym_expr(s) for s in val.stride())
    return Layout(size, stride, sym_expr(val.storage_offset()), val.dtype, val.device.type)
