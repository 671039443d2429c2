"""Index arithmetic shared by the IR and every backend: sympy functions and expression printers.

Index expressions are sympy expressions over index variables (`x0, x1, ...` for the outer loops,
`r0, r1, ...` for reduction loops), size symbols (`s0, s1, ...`) and, after indirect indexing,
symbols a backend hands out. All index values are non-negative, so C's truncating `/` and `%`
agree with floor division there; printers rely on that invariant.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from sympy.printing.str import StrPrinter


class FloorDiv(sympy.Function):
    """floor(base / divisor) for non-negative integer index expressions."""

    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr) -> sympy.Expr | None:
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if isinstance(base, sympy.Integer) and isinstance(divisor, sympy.Integer):
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        quotient = sympy.cancel(base / divisor)
        if quotient.is_integer or (quotient.is_polynomial() and _integral_coefficients(quotient)):
            return quotient
        return None


class ModularIndexing(sympy.Function):
    """(base // divisor) % modulus for non-negative integer index expressions."""

    nargs = (3,)
    is_integer = True

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr, modulus: sympy.Expr) -> sympy.Expr | None:
        if base == 0 or modulus == 1:
            return sympy.Integer(0)
        if all(isinstance(a, sympy.Integer) for a in (base, divisor, modulus)):
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        return None


def _integral_coefficients(expr: sympy.Expr) -> bool:
    return all(c.is_integer for c in sympy.Poly(expr).coeffs()) if expr.free_symbols else False


def index_vars(prefix: str, count: int) -> tuple[sympy.Symbol, ...]:
    """`count` non-negative integer index symbols named `<prefix>0`, `<prefix>1`, ..."""
    return tuple(sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(count))


def size_symbol(name: str) -> sympy.Symbol:
    """A size symbol: a positive integer known only at run time."""
    return sympy.Symbol(name, integer=True, positive=True)


def contiguous_strides(sizes: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Row-major strides for `sizes`."""
    strides: list[sympy.Expr] = []
    step: sympy.Expr = sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(step)
        step = step * size
    return tuple(reversed(strides))


def linear_index(idx: Sequence[sympy.Expr], strides: Sequence[sympy.Expr]) -> sympy.Expr:
    """sum(idx[i] * strides[i])."""
    return sympy.Add(*(i * s for i, s in zip(idx, strides, strict=True)))


def unflatten(flat: sympy.Expr, ranges: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Row-major coordinates of the flat index `flat` over `ranges` (for flat-indexed backends)."""
    coords: list[sympy.Expr] = []
    divisor: sympy.Expr = sympy.Integer(1)
    for i, size in reversed(list(enumerate(ranges))):
        if i == 0:
            coords.append(FloorDiv(flat, divisor))
        else:
            coords.append(ModularIndexing(flat, divisor, size))
        divisor = divisor * size
    return tuple(reversed(coords))


def product(values: Sequence[sympy.Expr]) -> sympy.Expr:
    """The product of `values` (1 for none)."""
    return sympy.Mul(*values) if values else sympy.Integer(1)


class CIndexPrinter(StrPrinter):
    """Prints an index expression as C-family source (C++, Triton, CUDA): `/` and `%` on ints."""

    def _print_FloorDiv(self, expr: FloorDiv) -> str:
        base, divisor = (self._print(a) for a in expr.args)
        return f"(({base}) / ({divisor}))"

    def _print_ModularIndexing(self, expr: ModularIndexing) -> str:
        base, divisor, modulus = (self._print(a) for a in expr.args)
        if expr.args[1] == 1:
            return f"(({base}) % ({modulus}))"
        return f"((({base}) / ({divisor})) % ({modulus}))"

    def _print_Pow(self, expr: sympy.Pow) -> str:
        base, exp = expr.args
        if exp.is_Integer and int(exp) > 0:
            return "*".join([f"({self._print(base)})"] * int(exp))
        raise ValueError(f"index expression {expr} has a non-integer power")

    def _print_Integer(self, expr: sympy.Integer) -> str:
        return str(int(expr))


class PythonIndexPrinter(CIndexPrinter):
    """Prints an index expression as Python source with `//` for floor division."""

    def _print_FloorDiv(self, expr: FloorDiv) -> str:
        base, divisor = (self._print(a) for a in expr.args)
        return f"(({base}) // ({divisor}))"

    def _print_ModularIndexing(self, expr: ModularIndexing) -> str:
        base, divisor, modulus = (self._print(a) for a in expr.args)
        return f"((({base}) // ({divisor})) % ({modulus}))"
