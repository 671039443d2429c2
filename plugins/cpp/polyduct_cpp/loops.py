"""Loop scaffolding shared by the kernel shapes: coordinates from a flat index, the OpenMP split
of a loop over [pd_lo, pd_hi), and which loads step through a variable with a stride."""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from polyduct.codegen import IndentedBuffer
from polyduct.indexing import index_vars
from polyduct_cpp.options import CppOptions


def strided(expr: sympy.Expr, var: sympy.Symbol) -> bool:
    """Whether index `expr` steps through `var` other than by 0 or 1 elements (GCC runs an
    `omp simd` loop over such loads scalar)."""
    expanded = sympy.expand(expr)
    coeff = expanded.coeff(var)
    rest = sympy.expand(expanded - coeff * var)
    return var in rest.free_symbols or coeff.free_symbols != set() or coeff not in (0, 1)


def row_major_from(exprs: Sequence[sympy.Expr], ranges: Sequence[sympy.Expr]) -> int:
    """The first of the trailing outer dims that every index in `exprs` steps through as one
    row-major dim (ConvNeXt's 16x16 positions): 0 when all of them do, the last dim when no
    other joins it."""
    xs = index_vars("x", len(ranges))
    first = len(ranges) - 1
    while first > 0 and all(_joined(e, xs[first - 1], xs[first], ranges[first]) for e in exprs):
        first -= 1
    return first


def _joined(expr: sympy.Expr, outer: sympy.Symbol, inner: sympy.Symbol, size: sympy.Expr) -> bool:
    """Whether `expr` is a * outer + b * inner + (terms of neither) with a = b * size."""
    expanded = sympy.expand(expr)
    a, b = expanded.coeff(outer), expanded.coeff(inner)
    rest = sympy.expand(expanded - a * outer - b * inner)
    if {outer, inner} & (rest.free_symbols | a.free_symbols | b.free_symbols):
        return False
    return sympy.expand(a - b * size) == 0


def flattenable(exprs: Sequence[sympy.Expr], ranges: Sequence[sympy.Expr]) -> bool:
    """Every index is k * (row-major flat outer index) + c: the outer loops can be one loop."""
    xs = set(index_vars("x", len(ranges)))
    affine = all(
        not (sympy.expand(e).coeff(x).free_symbols & xs) for e in exprs for x in xs
    )
    return affine and row_major_from(exprs, ranges) == 0


def transposed(expr: sympy.Expr, inner: sympy.Symbol, across: sympy.Symbol) -> bool:
    """Whether index `expr` steps through `inner` with a stride and through `across` by 1: an
    access a tile over the two dims turns contiguous."""
    return strided(expr, inner) and sympy.expand(expr).coeff(across) == 1


def tile_slot(inner: int, across: int, edge: int) -> str:
    """C index of element (x<across>, x<inner>) in the tile array of a tiled kernel."""
    return f"(x{across} - pd_t0) * {edge} + (x{inner} - pd_ib)"


def decompose(
    out: IndentedBuffer, flat: str, prefix: str, stem: str, dims: Sequence[int] | int
) -> None:
    """Row-major coordinates `<prefix>i` of `flat` over sizes `<stem>i`, for i in `dims`
    (an int: dims 0 .. dims-1)."""
    order = list(range(dims)) if isinstance(dims, int) else list(dims)
    divisor = ""
    for n, i in reversed(list(enumerate(order))):
        base = f"({flat} / ({divisor}))" if divisor else flat
        value = base if n == 0 else f"{base} % {stem}{i}"
        out.line(f"const int64_t {prefix}{i} = {value};")
        divisor = f"{divisor} * {stem}{i}" if divisor else f"{stem}{i}"
    out.line(f"(void){flat};")


def emit_lines(out: IndentedBuffer, text: str) -> None:
    for line in text.splitlines():
        out.line(line)


def split(
    out: IndentedBuffer, options: CppOptions, count: str, work: str, loop: IndentedBuffer
) -> None:
    """Run `loop` (over [pd_lo, pd_hi)) on all threads when `work` is large, else inline.

    The serial path makes no OpenMP call at all, so small kernels pay no team start-up.
    """
    out.line("auto pd_run = [&](const int64_t pd_lo, const int64_t pd_hi) {")
    with out.indent():
        emit_lines(out, loop.getvalue())
    out.line("};")
    if not options.openmp:
        out.line(f"pd_run(0, {count});")
        return
    out.line(f"if ({work} >= {options.parallel_threshold} && {count} > 1) {{")
    with out.indent():
        # Chunks are claimed from a shared counter: on a loaded machine a thread that is not
        # running leaves its share to the others instead of holding up the whole kernel.
        out.line("std::atomic<int64_t> pd_next{0};")
        out.line("#pragma omp parallel")
        out.line("{")
        with out.indent():
            out.line(f"const int64_t pd_chunk = pd_chunk_size({count}, {work});")
            out.line(f"for (int64_t pd_b = pd_next.fetch_add(pd_chunk); pd_b < {count};")
            out.line("     pd_b = pd_next.fetch_add(pd_chunk)) {")
            out.line(f"    pd_run(pd_b, std::min<int64_t>({count}, pd_b + pd_chunk));")
            out.line("}")
        out.line("}")
    out.line("} else {")
    out.line(f"    pd_run(0, {count});")
    out.line("}")
