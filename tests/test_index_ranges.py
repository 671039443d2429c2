"""Range-aware index simplification: exact on every point of the ranges, and it simplifies."""

from __future__ import annotations

import itertools
import random

import sympy

from polyduct.index_ranges import RangeSimplifier
from polyduct.indexing import FloorDiv, ModularIndexing, index_vars, linear_index, unflatten

X = index_vars("x", 3)


def values(expr: sympy.Expr, ranges: dict[sympy.Symbol, int]) -> list[int]:
    fn = sympy.lambdify(
        list(ranges),
        expr.replace(FloorDiv, lambda a, b: sympy.floor(a / b)).replace(
            ModularIndexing, lambda a, b, m: sympy.Mod(sympy.floor(a / b), m)
        ),
        "math",
    )
    return [int(fn(*p)) for p in itertools.product(*(range(n) for n in ranges.values()))]


def test_reshape_of_permute_becomes_linear() -> None:
    sizes = (4, 32, 32)
    ranges = dict(zip(X, sizes, strict=True))
    flat = linear_index(X, (1024, 32, 1))
    # unflatten then re-flatten through a permuted view: the composed index of the transformer's
    # attention reshape, with 1024 and 32 standing for its sizes
    coords = unflatten(flat, (4, 32, 32))
    expr = linear_index((coords[0], coords[2], coords[1]), (1024, 1, 32))
    expr = linear_index(unflatten(expr, (4, 32, 32)), (1024, 32, 1))
    assert expr.has(FloorDiv, ModularIndexing)
    simple = RangeSimplifier(ranges)(expr)
    assert not simple.has(FloorDiv, ModularIndexing), simple
    assert values(simple, ranges) == values(expr, ranges)


def test_exact_on_random_compositions() -> None:
    rng = random.Random(7)
    simplified = 0
    for _ in range(60):
        sizes = tuple(rng.choice((1, 2, 3, 4, 6, 8)) for _ in range(3))
        ranges = dict(zip(X, sizes, strict=True))
        base = sum(rng.choice((0, 1, 2, 3, 4, 6, 8, 12)) * v for v in X) + rng.choice((0, 1, 5))
        d, m = rng.choice((1, 2, 3, 4, 8)), rng.choice((2, 3, 4, 8, 16))
        for expr in (
            FloorDiv(base, d),
            ModularIndexing(base, d, m),
            7 * ModularIndexing(base, d, m) + FloorDiv(base + 3, d),
        ):
            simple = RangeSimplifier(ranges)(expr)
            assert values(simple, ranges) == values(expr, ranges), (expr, simple, sizes)
            simplified += simple != expr
    assert simplified > 30  # the rules fire, they are not only exact


def test_unknown_extents_are_left_alone() -> None:
    s = sympy.Symbol("s0", integer=True, positive=True)
    expr = ModularIndexing(32 * X[0] + X[1], 1, 32)
    assert RangeSimplifier({X[0]: 4, X[1]: s})(expr) == expr
    assert RangeSimplifier({X[0]: 4, X[1]: 32})(expr) == X[1]
    # a multiple of the modulus drops even when its variable's extent is symbolic
    assert RangeSimplifier({X[0]: s, X[1]: 32})(expr) == X[1]


def test_multiples_split_off_a_division_whose_rest_is_not_below_the_divisor() -> None:
    # the q/k/v gradient concatenation of the transformer block: (192*x0 + x1) // 16 % 4 with
    # 0 <= x1 < 192 is (x1 // 16) % 4: the 12*x0 part leaves the division and the modulus
    ranges = {X[0]: 5, X[1]: 192}
    expr = ModularIndexing(192 * X[0] + X[1], 16, 4)
    simple = RangeSimplifier(ranges)(expr)
    assert simple == ModularIndexing(FloorDiv(X[1], 16), 1, 4), simple
    assert values(simple, ranges) == values(expr, ranges)
    div = FloorDiv(192 * X[0] + X[1] + 7, 16)
    simple = RangeSimplifier(ranges)(div)
    assert simple == 12 * X[0] + FloorDiv(X[1] + 7, 16)
    assert values(simple, ranges) == values(div, ranges)


def test_view_round_trip_of_a_row_block_is_linear() -> None:
    """(512, 128) seen as (4, 128, 128) and back (BERT's MLP around a GELU): the flat index
    `x1 + 16384*((128*x0 + x1) // 16384) + 128*(x0 % 128)` is `128*x0 + x1`."""
    ranges = {X[0]: 512, X[1]: 128}
    expr = X[1] + 16384 * FloorDiv(128 * X[0] + X[1], 16384) + 128 * ModularIndexing(X[0], 1, 128)
    got = RangeSimplifier(ranges)(expr)
    assert got == 128 * X[0] + X[1]


def test_small_terms_below_a_coefficient_drop_out_of_a_division() -> None:
    ranges = {X[0]: 20, X[1]: 8, X[2]: 3}
    simplify = RangeSimplifier(ranges)
    for expr in (
        FloorDiv(8 * X[0] + X[1], 32),
        FloorDiv(24 * X[0] + 3 * X[1] + X[2], 48),
        ModularIndexing(8 * X[0] + X[1], 16, 5),
        16 * FloorDiv(X[0], 16) + ModularIndexing(X[0], 1, 16) + X[1],
    ):
        got = simplify(expr)
        assert values(got, ranges) == values(expr, ranges), (expr, got)
    assert simplify(FloorDiv(8 * X[0] + X[1], 32)) == FloorDiv(X[0], 4)


def test_nested_floor_divisions_print_each_base_once() -> None:
    # Swin's window padding under dynamic shapes nests floor divisions of sizes: spelled out,
    # a floor division repeats its base, and the C++ kernel grew to 47 MB of source (gcc took
    # minutes and 6 GB). Sizes over sizes are nonnegative (plain division); a base that may be
    # negative goes through the language's floor-division function, printed once.
    from polyduct.indexing import CIndexPrinter, size_symbol

    class Printer(CIndexPrinter):
        floordiv_fn = "floordiv"

    s = size_symbol("s0")
    sizes, maybe_negative = s, s
    for _ in range(3):
        sizes = FloorDiv(sizes, 2) + sympy.Mod(4 - sympy.Mod(FloorDiv(sizes, 2), 4), 4)
    for _ in range(10):
        maybe_negative = FloorDiv(maybe_negative - 3, 2)
    assert sizes.is_nonnegative
    assert "floordiv" not in Printer().doprint(FloorDiv(sizes, 2))
    assert len(Printer().doprint(maybe_negative)) < 500
    assert len(CIndexPrinter().doprint(maybe_negative)) > 20_000  # without the function


def test_small_terms_drop_out_of_what_a_split_division_leaves() -> None:
    # Swin's patch merging: row (r0 + 8192*x0 + 128*x1) // 1024 % 8 of a map with 128 channels
    # per position; the multiple 8192*x0 splits off first, then r0 < 128 drops out of the rest
    x0, x1, r0 = sympy.symbols("x0 x1 r0", integer=True, nonnegative=True)
    ranges = {x0: 2, x1: 64, r0: 128}
    expr = ModularIndexing(r0 + 8192 * x0 + 128 * x1, 1024, 8)
    simple = RangeSimplifier(ranges)(expr)
    assert simple == FloorDiv(x1, 8), simple
    assert values(simple, ranges) == values(expr, ranges)
