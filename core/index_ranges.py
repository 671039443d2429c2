"""Index simplification with the ranges of a kernel's loop variables.

Views compose by flattening and unflattening indices, so a reshape of a permuted tensor reads
`1048576*(i // 1048576) + (i % 1024) + 1024*((i // 1024) % 1024)` with `i = 1048576*x0 +
1024*x1 + x2`. Knowing `0 <= x1, x2 < 1024`, that is `1048576*x0 + 1024*x1 + x2`: one
multiply-add per element instead of three divisions, and a contiguous inner loop the C++ compiler
vectorises. Without the ranges the divisions cannot be removed (x2 could exceed 1024).

Rules (all for non-negative index expressions, as loop indices and buffer offsets are):

* `FloorDiv(a + b, d) -> a / d + FloorDiv(b, d)` when every term of `a` has a coefficient
  divisible by `d` and `b >= 0` over the ranges, and `-> a / d` when also `b < d`;
* `FloorDiv(g*a + b, d) -> FloorDiv(a, d / g)` when `g` divides `d` and `0 <= b < g`, also
  for what the first rule leaves (Swin's patch merging reads row `(r0 + 128*x1) // 1024`, that
  is `x1 // 8`, of a map with 128 channels per position);
* `ModularIndexing(e, d, m)` is `FloorDiv(e, d) % m`: terms whose coefficient `m` divides are
  dropped while the rest stays non-negative, and `q % m -> q` when `0 <= q < m`.

Only variables with an integer extent take part; a symbolic extent (a dynamic size) leaves the
terms that use it alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy

from polyduct.indexing import FloorDiv, ModularIndexing

Bounds = tuple[int, int]  # inclusive
_SHARED_LIMIT = 256  # simplifiers kept by `range_simplifier`
_MEMO_LIMIT = 65536  # expressions one simplifier remembers


def range_simplifier(extents: Mapping[sympy.Symbol, sympy.Expr | int]) -> RangeSimplifier:
    """A `RangeSimplifier` for `extents`, shared with earlier calls for the same extents.

    Its results depend only on the extents, so every trace of a kernel (and every kernel over
    the same loop ranges) reuses one memo; the least recently used of `_SHARED_LIMIT` go.
    """
    key = tuple(extents.items())
    simplifier = _SHARED.pop(key, None)
    if simplifier is None:
        simplifier = RangeSimplifier(extents)
        if len(_SHARED) >= _SHARED_LIMIT:
            del _SHARED[next(iter(_SHARED))]
    _SHARED[key] = simplifier
    return simplifier


class RangeSimplifier:
    """Simplifies index expressions over variables `v` with `0 <= v < extents[v]`."""

    def __init__(self, extents: Mapping[sympy.Symbol, sympy.Expr | int]) -> None:
        self.bounds: dict[sympy.Basic, Bounds] = {
            v: (0, int(n) - 1)
            for v, n in extents.items()
            if isinstance(v, sympy.Symbol) and sympy.sympify(n).is_Integer and int(n) > 0
        }
        self._memo: dict[sympy.Basic, sympy.Expr] = {}

    def __call__(self, expr: sympy.Expr) -> sympy.Expr:
        if not isinstance(expr, sympy.Basic):
            return expr
        done = self._memo.get(expr)
        if done is None:
            if len(self._memo) >= _MEMO_LIMIT:  # a shared simplifier lives across compiles
                self._memo.clear()
            done = self._memo[expr] = self._simplify(expr)
        return done

    def _simplify(self, expr: sympy.Expr) -> sympy.Expr:
        if not expr.args or not expr.has(FloorDiv, ModularIndexing):
            return expr
        args = tuple(self(a) for a in expr.args)
        if isinstance(expr, FloorDiv):
            return self._floordiv(*args)
        if isinstance(expr, ModularIndexing):
            return self._modular(*args)
        if isinstance(expr, sympy.Add):
            return _recombine(sympy.Add(*args))
        return expr.func(*args) if args != expr.args else expr

    def _floordiv(self, base: sympy.Expr, divisor: sympy.Expr) -> sympy.Expr:
        if divisor.is_Integer and int(divisor) > 0:
            d = int(divisor)
            whole, rest = _split(base, d)
            low = self.range(rest)
            if whole is not None and low is not None and low[0] >= 0:
                if low[1] < d:
                    return sympy.expand(whole / d)
                return sympy.expand(whole / d) + self._floordiv(rest, divisor)
            coarse = self._coarse(base, d)
            if coarse is not None:
                return coarse
        return FloorDiv(base, divisor)

    def _coarse(self, base: sympy.Expr, d: int) -> sympy.Expr | None:
        """`(g*a + b) // d` as `a // (d / g)` when g divides d and `0 <= b < g`: the small
        terms never carry into a multiple of g (`(128*x0 + x1) // 16384` with x1 < 128 is
        `x0 // 128`)."""
        for term in sympy.Add.make_args(base):
            g, _ = term.as_coeff_Mul()
            if not g.is_Integer or int(g) <= 1 or d % int(g):
                continue
            whole, rest = _split(base, int(g))
            low = self.range(rest)
            if whole is not None and low is not None and low[0] >= 0 and low[1] < int(g):
                inner = sympy.expand(whole / int(g))
                return inner if d == int(g) else self._floordiv(inner, sympy.Integer(d // int(g)))
        return None

    def _modular(self, base: sympy.Expr, divisor: sympy.Expr, modulus: sympy.Expr) -> sympy.Expr:
        quotient = self._floordiv(base, divisor)
        if modulus.is_Integer and int(modulus) > 0:
            m = int(modulus)
            whole, rest = _split(quotient, m)
            rest_range = self.range(rest)
            if rest_range is not None and rest_range[0] >= 0:
                if rest_range[1] < m:
                    return rest
                if whole is not None:  # multiples of m dropped; the rest stays non-negative
                    return ModularIndexing(rest, 1, modulus)
        if quotient != FloorDiv(base, divisor):
            return ModularIndexing(quotient, 1, modulus)
        return ModularIndexing(base, divisor, modulus)

    def range(self, expr: sympy.Expr) -> Bounds | None:
        """Inclusive integer bounds of `expr` over the ranges, or None if unknown."""
        if expr.is_Integer:
            return int(expr), int(expr)
        if expr in self.bounds:
            return self.bounds[expr]
        if isinstance(expr, sympy.Add):
            return _fold(expr.args, self.range, _add)
        if isinstance(expr, sympy.Mul):
            return _fold(expr.args, self.range, _mul)
        if isinstance(expr, FloorDiv) and expr.args[1].is_Integer and int(expr.args[1]) > 0:
            inner, d = self.range(expr.args[0]), int(expr.args[1])
            return None if inner is None else (inner[0] // d, inner[1] // d)
        if isinstance(expr, ModularIndexing) and all(a.is_Integer for a in expr.args[1:]):
            d, m = int(expr.args[1]), int(expr.args[2])
            inner = self.range(expr.args[0])
            if inner is not None and inner[0] >= 0 and d > 0 and m > 0:
                lo, hi = inner[0] // d, inner[1] // d
                return (lo, hi) if hi < m else (0, m - 1)
        return None


def _recombine(expr: sympy.Expr) -> sympy.Expr:
    """`c*d*FloorDiv(x, d) + c*ModularIndexing(x, 1, d)` back into `c*x` (a flat index split
    into a row and a column, then joined again by the next view)."""
    if not isinstance(expr, sympy.Add):
        return expr
    terms = {t: t.as_coeff_Mul() for t in expr.args}
    for term, (c_mod, mod) in terms.items():
        if not (isinstance(mod, ModularIndexing) and mod.args[1] == 1 and mod.args[2].is_Integer):
            continue
        x, d = mod.args[0], mod.args[2]
        div = c_mod * d * FloorDiv(x, d)
        if div in terms:
            return _recombine(expr - term - div + c_mod * x)
    return expr


def _split(expr: sympy.Expr, d: int) -> tuple[sympy.Expr | None, sympy.Expr]:
    """(sum of the terms with an integer coefficient divisible by d, the other terms)."""
    whole: list[sympy.Expr] = []
    rest: list[sympy.Expr] = []
    for term in sympy.Add.make_args(expr):
        coeff, _ = term.as_coeff_Mul()
        (whole if coeff.is_Integer and int(coeff) % d == 0 else rest).append(term)
    if not whole:
        return None, expr
    return sympy.Add(*whole), sympy.Add(*rest)


def _fold(
    args: tuple[sympy.Expr, ...],
    range_of: Callable[[sympy.Expr], Bounds | None],
    combine: Callable[[Bounds, Bounds], Bounds],
) -> Bounds | None:
    total: Bounds | None = None
    for a in args:
        r = range_of(a)
        if r is None:
            return None
        total = r if total is None else combine(total, r)
    return total


def _add(a: Bounds, b: Bounds) -> Bounds:
    return a[0] + b[0], a[1] + b[1]


def _mul(a: Bounds, b: Bounds) -> Bounds:
    products = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(products), max(products)


# memo of pure simplifiers by their ranges (bounded, least recently used go): not process state
_SHARED: dict[tuple[tuple[sympy.Symbol, sympy.Expr | int], ...], RangeSimplifier] = {}
