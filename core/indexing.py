"""Index arithmetic shared by the IR and every backend: sympy functions and expression printers.

Index expressions are sympy expressions over index variables (`x0, x1, ...` for the outer loops,
`r0, r1, ...` for reduction loops), size symbols (`s0, s1, ...`) and, after indirect indexing,
symbols a backend hands out. All index values are non-negative, so C's truncating `/` and `%`
agree with floor division there; printers rely on that invariant.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import sympy
from sympy.printing.printer import Printer
from sympy.printing.str import StrPrinter


class FloorDiv(sympy.Function):
    """floor(base / divisor) of integer index expressions, the divisor positive."""

    nargs = (2,)
    is_integer = True

    def _eval_is_nonnegative(self) -> bool | None:
        # a nonnegative base over a positive divisor (sizes over sizes): printed as plain division
        base, divisor = self.args
        return True if base.is_nonnegative and divisor.is_positive else None

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
        if divisor != 0 and _is_monomial(divisor):
            terms = sympy.Add.make_args(base)
            if all(_is_monomial(t) for t in terms):
                return _monomial_quotient(terms, divisor)
        quotient = sympy.cancel(base / divisor)
        if quotient.is_integer or (quotient.is_polynomial() and _integral_coefficients(quotient)):
            return quotient
        return None


class ModularIndexing(sympy.Function):
    """(base // divisor) % modulus for non-negative integer index expressions."""

    nargs = (3,)
    is_integer = True

    def _eval_is_nonnegative(self) -> bool | None:
        base, divisor, modulus = self.args
        return True if base.is_nonnegative and divisor.is_positive and modulus.is_positive else None

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr, modulus: sympy.Expr) -> sympy.Expr | None:
        if base == 0 or modulus == 1:
            return sympy.Integer(0)
        if all(isinstance(a, sympy.Integer) for a in (base, divisor, modulus)):
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        return None


def _is_monomial(expr: sympy.Expr) -> bool:
    """Whether `expr` is an integer times a product of integer-valued factors (symbols, FloorDiv,
    ModularIndexing) to positive integer powers."""
    if expr.is_Integer:
        return True
    coeff, rest = expr.as_coeff_Mul()
    if not coeff.is_Integer:
        return False
    for factor in sympy.Mul.make_args(rest):
        if factor.is_Pow:
            factor, exp = factor.args
            if not (exp.is_Integer and exp > 0):
                return False
        if not (factor.is_Symbol or isinstance(factor, (FloorDiv, ModularIndexing))):
            return False
        if factor.is_integer is not True:
            return False
    return True


def _monomial_quotient(terms: tuple[sympy.Expr, ...], divisor: sympy.Expr) -> sympy.Expr | None:
    """floor(sum(terms) / divisor) for integer monomials: the exact quotient when `divisor`
    divides every term, else None (unevaluated).

    Distinct monomials never cancel, so the quotient is a polynomial with integer coefficients
    exactly when each term's is; sympy's Mul cancels the common factors of each term.
    """
    quotients = [t / divisor for t in terms]
    if all(_is_monomial(q) for q in quotients):
        return sympy.Add(*quotients)
    return None


def _integral_coefficients(expr: sympy.Expr) -> bool:
    return all(c.is_integer for c in sympy.Poly(expr).coeffs()) if expr.free_symbols else False


def expanded(expr: sympy.Expr | int) -> sympy.Expr:
    """`sympy.expand(expr)`, the canonical form index expressions are compared in (cached).

    Sums of integer-weighted products of symbols, FloorDiv and ModularIndexing (what views and
    layouts build) are already expanded and come back unchanged without sympy's expansion hints.
    """
    return _expanded(sympy.sympify(expr))


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=8192)
def _expanded(expr: sympy.Expr) -> sympy.Expr:
    return sympy.expand(expr) if _needs_expansion(expr) else expr


def _needs_expansion(expr: sympy.Expr) -> bool:
    if expr.is_Atom:
        return False
    if expr.is_Mul:
        if any(a.is_Add for a in expr.args):
            return True
    elif expr.is_Pow:
        base, exp = expr.args
        if not (base.is_Symbol and exp.is_Integer and exp > 0):
            return True
    elif not (expr.is_Add or isinstance(expr, (FloorDiv, ModularIndexing))):
        return True
    return any(_needs_expansion(a) for a in expr.args)


def symbol_text(symbol: sympy.Basic) -> str:
    """`str(symbol)`, without the printer for a plain Symbol (whose text is its name)."""
    return symbol.name if type(symbol) is sympy.Symbol else str(symbol)


def free_symbols(expr: sympy.Basic) -> frozenset[sympy.Basic]:
    """`expr.free_symbols`, cached (sympy recomputes it on every access)."""
    return frozenset() if expr.is_Number else _free_symbols(expr)


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=8192)
def _free_symbols(expr: sympy.Basic) -> frozenset[sympy.Basic]:
    return frozenset(expr.free_symbols)


# memo of a pure function (symbols are values): not process state
@functools.lru_cache(maxsize=256)
def index_vars(prefix: str, count: int) -> tuple[sympy.Symbol, ...]:
    """`count` non-negative integer index symbols named `<prefix>0`, `<prefix>1`, ... (cached)."""
    return tuple(sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(count))


def size_symbol(name: str) -> sympy.Symbol:
    """A size symbol: a positive integer known only at run time."""
    return sympy.Symbol(name, integer=True, positive=True)


def contiguous_strides(sizes: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Row-major strides for `sizes` (cached)."""
    return _contiguous_strides(tuple(sympy.sympify(s) for s in sizes))


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=4096)
def _contiguous_strides(sizes: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...]:
    strides: list[sympy.Expr] = []
    step: sympy.Expr = sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(step)
        step = step * size
    return tuple(reversed(strides))


def linear_index(idx: Sequence[sympy.Expr], strides: Sequence[sympy.Expr]) -> sympy.Expr:
    """sum(idx[i] * strides[i]) (cached: bodies are traced several times with the same indices)."""
    if len(idx) != len(strides):
        raise ValueError(f"{len(idx)} indices for {len(strides)} strides")
    return _linear_index(_exprs(idx), _exprs(strides))


def _exprs(values: Sequence[sympy.Expr | int]) -> tuple[sympy.Expr, ...]:
    return tuple(v if isinstance(v, sympy.Basic) else sympy.sympify(v) for v in values)


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=8192)
def _linear_index(idx: tuple[sympy.Expr, ...], strides: tuple[sympy.Expr, ...]) -> sympy.Expr:
    return sympy.Add(*(i * s for i, s in zip(idx, strides, strict=True)))


def unflatten(flat: sympy.Expr, ranges: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Row-major coordinates of the flat index `flat` over `ranges` (for flat-indexed backends)."""
    return _unflatten(sympy.sympify(flat), _exprs(ranges))


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=4096)
def _unflatten(flat: sympy.Expr, ranges: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...]:
    if any(size == 0 for size in ranges):
        # An empty range has no index to decode (no 1/0). Each coordinate is the flat index
        # itself, not a constant: accesses keep the range's (empty) shape, so a backend neither
        # reads an element nor stores a block through a scalar pointer.
        return tuple(flat for _ in ranges)
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
    """Prints an index expression as C-family source (C++, Triton, CUDA): `/` and `%` on ints.

    A printer in its initial state (a class that keeps no state of its own, default settings)
    prints from a cache: its output depends only on its class and the expression.
    """

    def doprint(self, expr: object) -> str:
        if self._print_level == 0 and self._stateless():
            return _print_cached(type(self), sympy.sympify(expr))
        return str(super().doprint(expr))

    def _stateless(self) -> bool:
        cls = type(self)
        return (
            cls.__init__ is Printer.__init__
            and vars(self).keys() == _PRINTER_ATTRS
            and not self._context
            and self._settings == _initial_settings(cls)
        )

    int_div = "/"
    """The language's division of integers, which truncates toward zero (C's `/`)."""
    floordiv_fn = ""
    """A function of the generated code's own that floor-divides two integers, if it has one:
    a base that may be negative is then printed once. Spelled out, the floor remainder repeats
    the base, and nested divisions of symbolic sizes (Swin's windows under dynamic shapes) grew
    exponentially: a 20 MB kernel."""

    def _print_FloorDiv(self, expr: FloorDiv) -> str:
        base, divisor = (self._print(a) for a in expr.args)
        if expr.args[0].is_nonnegative:
            return f"(({base}) {self.int_div} ({divisor}))"
        # a base that may be negative (a size of a slice with a negative start, `(-s0) // 2`):
        # truncating division rounds up there, so the floor remainder is taken off first
        if self.floordiv_fn:
            return f"{self.floordiv_fn}({base}, {divisor})"
        return (f"((({base}) - (((({base}) % ({divisor})) + ({divisor})) % ({divisor}))) "
                f"{self.int_div} ({divisor}))")

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

    def _print_Mod(self, expr: sympy.Mod) -> str:
        """sympy's Mod takes the divisor's sign (Python's %); C's % the dividend's."""
        base, divisor = (str(self._print(a)) for a in expr.args)
        return f"(((({base}) % ({divisor})) + ({divisor})) % ({divisor}))"

    def _print_Min(self, expr: sympy.Min) -> str:
        return self._fold(expr.args, "<")

    def _print_Max(self, expr: sympy.Max) -> str:
        return self._fold(expr.args, ">")

    def _fold(self, args: Sequence[sympy.Basic], better: str) -> str:
        """min / max of index expressions (a sliding window's start, `Max(0, s0 - 15)`) as
        nested conditionals, which every C-family language has."""
        first, *rest = (str(self._print(a)) for a in args)
        for item in rest:
            first = f"(({first}) {better} ({item}) ? ({first}) : ({item}))"
        return first


class PythonIndexPrinter(CIndexPrinter):
    """Prints an index expression as Python source with `//` for floor division."""

    def _print_FloorDiv(self, expr: FloorDiv) -> str:
        base, divisor = (self._print(a) for a in expr.args)
        return f"(({base}) // ({divisor}))"

    def _print_ModularIndexing(self, expr: ModularIndexing) -> str:
        base, divisor, modulus = (self._print(a) for a in expr.args)
        return f"((({base}) // ({divisor})) % ({modulus}))"

    def _print_Mod(self, expr: sympy.Mod) -> str:
        base, divisor = (str(self._print(a)) for a in expr.args)
        return f"(({base}) % ({divisor}))"

    min_fn, max_fn = "min", "max"
    """What min and max of index expressions call: Python's builtins; a printer for a kernel
    language (Triton, Halide) names its own."""

    def _print_Min(self, expr: sympy.Min) -> str:
        return self._call(self.min_fn, expr.args)

    def _print_Max(self, expr: sympy.Max) -> str:
        return self._call(self.max_fn, expr.args)

    def _call(self, fn: str, args: Sequence[sympy.Basic]) -> str:
        first, *rest = (str(self._print(a)) for a in args)
        for item in rest:
            first = f"{fn}({first}, {item})"
        return first


_PRINTER_ATTRS = frozenset(vars(CIndexPrinter()))


# memos of pure printers (a printer class -> its settings, its cached print): not process state
_INITIAL_SETTINGS: dict[type[CIndexPrinter], dict[str, object]] = {}
_PRINT_CACHES: dict[type[CIndexPrinter], Callable[[sympy.Basic], str]] = {}


def _initial_settings(cls: type[CIndexPrinter]) -> dict[str, object]:
    if cls not in _INITIAL_SETTINGS:
        _INITIAL_SETTINGS[cls] = dict(cls._get_initial_settings())
    return _INITIAL_SETTINGS[cls]


def _print_cached(cls: type[CIndexPrinter], expr: sympy.Basic) -> str:
    """`cls().doprint(expr)`, memoised per printer class."""
    if cls not in _PRINT_CACHES:

        # memo of a pure printer: not process state
        @functools.lru_cache(maxsize=8192)
        def print_expr(expr: sympy.Basic) -> str:
            return str(StrPrinter.doprint(cls(), expr))

        _PRINT_CACHES[cls] = print_expr
    return _PRINT_CACHES[cls](expr)
