"""Fast paths of polyduct.indexing agree with the general sympy routes they skip."""

from __future__ import annotations

import itertools

import sympy

from polyduct.indexing import (
    CIndexPrinter,
    FloorDiv,
    ModularIndexing,
    PythonIndexPrinter,
    expanded,
    index_vars,
    size_symbol,
)

X0, X1, X2 = index_vars("x", 3)
S0, S1 = size_symbol("s0"), size_symbol("s1")


def _value(expr: sympy.Expr, env: dict[sympy.Symbol, int]) -> int:
    """Evaluate an index expression with Python's floor division and modulo."""
    if isinstance(expr, FloorDiv):
        base, divisor = (_value(a, env) for a in expr.args)
        return base // divisor
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = (_value(a, env) for a in expr.args)
        return (base // divisor) % modulus
    if expr.is_Symbol:
        return env[expr]
    if expr.is_Integer:
        return int(expr)
    if expr.is_Add:
        return sum(_value(a, env) for a in expr.args)
    if expr.is_Mul:
        out = 1
        for a in expr.args:
            out *= _value(a, env)
        return out
    if expr.is_Pow:
        return _value(expr.args[0], env) ** int(expr.args[1])
    raise AssertionError(f"unexpected {expr}")


def test_floordiv_monomial_divisor_simplifies_exactly() -> None:
    assert FloorDiv(4 * X0 + 8 * X1, 2) == 2 * X0 + 4 * X1
    assert FloorDiv(S0 * X0 + S0, S0) == X0 + 1
    assert FloorDiv(6 * S0 * X0 + 12 * X1, 3) == 2 * S0 * X0 + 4 * X1
    assert FloorDiv(S0**2 * X0, S0) == S0 * X0
    assert FloorDiv(8 - 4 * X0, 4) == 2 - X0


def test_floordiv_keeps_inexact_quotients_unevaluated() -> None:
    for base, divisor in [(64 * X0 + X1, 16), (S0 * X0 + X1, S0), (X0, S0**2), (X0**2 + X0, 2)]:
        assert isinstance(FloorDiv(base, divisor), FloorDiv)


def test_floordiv_non_monomial_cases_still_cancel() -> None:
    assert FloorDiv(S0 * (X0 + 1), S0) == X0 + 1


def test_floordiv_and_modular_indexing_match_python_semantics() -> None:
    exprs = [
        (32 * X0 + 4 * X1 + X2, 4),
        (32 * X0 + 4 * X1 + X2, 8),
        (S0 * X0 + X1, S0),
        (2 * S0 * X0 + 4 * X1, 2),
        (6 * X0 * S1 + 3 * X1, 3),
    ]
    for (base, divisor), values in itertools.product(exprs, [(0, 1, 2, 3, 1), (5, 3, 7, 4, 2)]):
        env = dict(zip((X0, X1, X2, S0, S1), values, strict=True))
        want = _value(base, env) // _value(sympy.sympify(divisor), env)
        assert _value(FloorDiv(base, divisor), env) == want
        modulus = 3
        got = _value(ModularIndexing(base, divisor, modulus), env)
        assert got == want % modulus


def test_expanded_matches_sympy_expand() -> None:
    cases = [
        S0 * (X0 + 1),
        4 * X0 + ModularIndexing(S0 * (X1 + 1), 1, 4),
        2 * ModularIndexing(64 * X0 + X1, 16, 4) + X1,
        X0**2,
        (X0 + 1) ** 2,
        FloorDiv(S0 * (X0 + S1), 2) + X2,
        sympy.Integer(7),
    ]
    for expr in cases:
        assert expanded(expr) == sympy.expand(expr)
    assert expanded(0) == 0 and isinstance(expanded(0), sympy.Integer)


def test_printers_cache_only_stateless_instances() -> None:
    expr = FloorDiv(64 * X0 + X1, 16) + ModularIndexing(X1, 1, S0)
    assert PythonIndexPrinter().doprint(expr) == PythonIndexPrinter().doprint(expr)
    assert "//" in PythonIndexPrinter().doprint(expr)
    assert "//" not in CIndexPrinter().doprint(expr)

    class Renaming(PythonIndexPrinter):
        def __init__(self, names: dict[str, str]) -> None:
            super().__init__()
            self.names = names

        def _print_Symbol(self, expr: sympy.Symbol) -> str:
            return self.names.get(expr.name, expr.name)

    assert not Renaming({"x0": "i"})._stateless()
    assert Renaming({"x0": "i"}).doprint(X0 + X1) == "i + x1"
    assert Renaming({"x0": "j"}).doprint(X0 + X1) == "j + x1"
    assert not PythonIndexPrinter({"order": "none"})._stateless()
