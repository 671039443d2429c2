"""Sizes from torch's symbolic shapes: SymInts and fake-tensor layouts as polyduct sympy."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.indexing import FloorDiv, ModularIndexing, contiguous_strides, size_symbol
from polyduct.ir import IRGraph, Layout, Lazy, StorageView, TensorValue


def sym_expr(value: Any) -> sympy.Expr:
    """An int or SymInt as a sympy expression over polyduct size symbols.

    torch's own integer functions (`FloorDiv`, `CleanDiv`, `ModularIndexing`) become polyduct's
    (`polyduct.indexing`), which every kernel backend's index printer knows.
    """
    if type(value) is int:
        return _integer(value)
    if isinstance(value, torch.SymInt):
        return _from_torch(_guarded_constant(value))
    if isinstance(value, (torch.SymFloat, torch.SymBool)):  # a scale factor; a size condition
        return _from_torch(value.node.expr)
    if isinstance(value, (int, sympy.Expr)):
        return sympy.sympify(value)
    raise TypeError(f"not a size: {value!r}")


def _guarded_constant(value: torch.SymInt) -> sympy.Expr:
    """The SymInt's expression, or the constant the trace's guards make it.

    A reshape's `-1` of a dynamic size, `(s0//3)`, that was broadcast against `2*s0` is 1: torch
    guarded `Eq((s0//3), 1)` while tracing, and a kernel must not index that dim by position.
    """
    node = value.node
    expr = node.expr
    if expr.is_number or isinstance(expr, sympy.Symbol) or not node.has_hint():
        return expr
    hint = sympy.Integer(int(node.hint))
    known = node.shape_env._maybe_evaluate_static(sympy.Eq(expr, hint))
    return hint if known is sympy.true else expr


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=1024)
def _integer(value: int) -> sympy.Expr:
    return sympy.Integer(value)


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=1024)
def _from_torch(expr: sympy.Expr) -> sympy.Expr:
    """A torch symbolic-shape expression over polyduct's size symbols and functions."""
    subs = {s: _symbol(s) for s in expr.free_symbols}
    return _polyduct_functions(sympy.sympify(expr.xreplace(subs)))


def _symbol(symbol: sympy.Symbol) -> sympy.Symbol:
    """torch's symbol as polyduct's, with the sign torch gives it: a dynamic size is a positive
    integer; an `int` argument traced as a SymInt (`logits_to_keep`, 0 by default) or a
    data-dependent value may be zero or negative, so `-s` is not known to count from the end."""
    if symbol.is_positive:
        return size_symbol(str(symbol))
    if symbol.is_nonnegative:
        return sympy.Symbol(str(symbol), integer=True, nonnegative=True)
    return sympy.Symbol(str(symbol), integer=True)


def _polyduct_functions(expr: sympy.Expr) -> sympy.Expr:
    from torch.utils._sympy import functions as torch_fns

    if not expr.args:
        return expr
    args = [_polyduct_functions(a) for a in expr.args]
    if isinstance(expr, torch_fns.FloorDiv):  # CleanDiv is a FloorDiv
        return FloorDiv(*args)
    if isinstance(expr, torch_fns.ModularIndexing):
        return ModularIndexing(*args)
    if isinstance(expr, torch_fns.PythonMod):  # a roll's shift modulo a dynamic size
        return sympy.Mod(*args)
    rounded = _rounded_quotient(expr, args, torch_fns)
    if rounded is not None:
        return rounded
    return expr.func(*args) if args != list(expr.args) else expr


def _rounded_quotient(expr: sympy.Expr, args: list[sympy.Expr], fns: Any) -> sympy.Expr | None:
    """`ceil(a / b)` and `floor(a / b)` of sizes (a pooled or patched length, MobileViT's
    `math.ceil(h / patch)`) as integer divisions, which every index printer knows (b > 0)."""
    rounding = {getattr(fns, "CeilToInt", None): 1, getattr(fns, "FloorToInt", None): 0}
    if type(expr) not in rounding or len(args) != 1:
        return None
    divide = getattr(fns, "IntTrueDiv", None)
    inner = args[0]
    if divide is None or type(inner) is not divide or len(inner.args) != 2:
        return None
    a, b = inner.args
    return FloorDiv(a + b - 1, b) if rounding[type(expr)] else FloorDiv(a, b)


def meta_layout(val: torch.Tensor) -> Layout:
    """The layout a fake tensor describes."""
    size = tuple(sym_expr(s) for s in val.shape)
    stride = tuple(sym_expr(s) for s in val.stride())
    return Layout(size, stride, sym_expr(val.storage_offset()), val.dtype, val.device.type)


def eager_layout(value: Any, meta: Any) -> Layout | None:
    """The layout eager gives the FX node computing `value` (a lazy tensor value), when its fake
    tensor's strides are dense and non-overlapping (a permutation of row-major, gaps allowed):
    realising a value into it keeps eager's strides for what reads it next (a library call
    chooses its result's layout from its inputs'; a backward graph asserts saved tensors')."""
    if not isinstance(meta, torch.Tensor) or not non_overlapping(meta):
        return None
    stride = meta_layout(meta).stride
    if len(stride) != len(value.size):
        return None
    return Layout(tuple(value.size), stride, sympy.Integer(0), value.dtype, value.device)


def broadcast_of_dense(val: torch.Tensor) -> bool:
    """Stride 0 along some dims (an expanded view), non-overlapping along the others."""
    stride = val.stride()
    zero = [isinstance(st, int) and st == 0 and val.shape[d] != 1 for d, st in enumerate(stride)]
    if not any(zero):
        return False
    keep = [d for d in range(val.dim()) if not zero[d]]
    return dense([val.shape[d] for d in keep], [stride[d] for d in keep])


def non_overlapping(val: torch.Tensor) -> bool:
    """No two elements share memory: a permutation of a contiguous layout, possibly with gaps.

    Gaps arise when a saved activation is a view into a wider buffer (q of a fused qkv
    projection): the backward graph was traced with those strides and asserts them.
    """
    return dense(list(val.shape), list(val.stride()))


def dense(shape: Sequence[Any], stride: Sequence[Any]) -> bool:
    """Whether (shape, stride) is a permutation of row-major, with gaps allowed.

    Symbolic sizes are judged by their hints (the example sizes torch traced with), never by
    int(), which would specialise the graph: torch's meta functions give layouts whose overlap
    does not depend on the sizes (row-major, permuted, rows padded to an alignment as the GPU's
    attention pads its bias). Without hints only row-major is recognised."""
    if any(isinstance(v, torch.SymInt) for v in (*shape, *stride)):
        hints = [hint(v) for v in (*shape, *stride)]
        if all(h is not None for h in hints):
            return dense(hints[: len(shape)], hints[len(shape) :])
        sizes = [sym_expr(v) for v in shape]
        return all(
            sympy.simplify(sym_expr(a) - b) == 0
            for a, b in zip(stride, contiguous_strides(sizes), strict=True)
        )
    try:
        dims = sorted(range(len(shape)), key=lambda d: int(stride[d]))
        expected = 1
        for d in dims:
            size, step = int(shape[d]), int(stride[d])
            if size == 1:
                continue
            if step < expected:
                return False
            expected = step * size
        return True
    except (TypeError, ValueError, RuntimeError):
        return False  # symbolic strides: keep the row-major default


def hint(value: Any) -> int | None:
    """The example value of an int or SymInt (None for an unbacked one)."""
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        return None if hint is None else int(hint)
    return int(value)


def realize_like_eager(graph: IRGraph, value: TensorValue, meta: Any) -> StorageView:
    """`value` in memory with the strides eager's tensor has (its fake tensor `meta`): dense and
    non-overlapping strides as they are; an expanded tensor (stride 0 along some dims, as an
    attention mask broadcast over heads) computed once along those dims and viewed with eager's
    strides; anything else row-major."""
    if isinstance(value, StorageView):
        return _unit_strides_like_eager(value, meta)
    layout = eager_layout(value, meta)
    if layout is not None:
        return graph.realize(value, layout)
    view = broadcast_like_eager(graph, value, meta)
    if view is not None:
        graph.remember(value, view)
        return view
    return graph.realize(value)


def broadcast_like_eager(graph: IRGraph, value: Lazy, meta: Any) -> StorageView | None:
    """`value` computed once along the dims that eager's tensor `meta` expands (stride 0) and
    viewed with eager's strides; None unless `meta` is such a broadcast of dense memory."""
    if not isinstance(meta, torch.Tensor) or not broadcast_of_dense(meta):
        return None
    stride = meta_layout(meta).stride
    if len(stride) != len(value.size):
        return None
    size = tuple(1 if st == 0 else n for n, st in zip(value.size, stride, strict=True))
    base = Lazy(size, value.dtype, value.device, value.fn, value.cost)
    zero = sympy.Integer(0)
    stored = graph.realize_as(base, Layout(size, stride, zero, value.dtype, value.device))
    return StorageView(
        stored.buffer, Layout(tuple(value.size), stride, zero, value.dtype, value.device)
    )


def _unit_strides_like_eager(view: StorageView, meta: Any) -> StorageView:
    """`view` with eager's strides along its size-1 dims (they address nothing, so the elements
    are the same): a library call may choose its algorithm or its result's layout from them, as
    a convolution takes a (2, 1, L) input of strides (L, 1, 1) for channels-last."""
    lay = view.layout
    if not isinstance(meta, torch.Tensor) or meta.dim() != len(lay.size):
        return view
    eager = meta_layout(meta)
    if eager.size != lay.size:
        return view
    stride = tuple(
        e if n == 1 else s for n, s, e in zip(lay.size, lay.stride, eager.stride, strict=True)
    )
    if stride == lay.stride:
        return view
    return StorageView(view.buffer, dataclasses.replace(lay, stride=stride))


def size_value(node: torch.fx.Node) -> sympy.Basic | None:
    """The sympy value of a node computing a size, or a condition on sizes (`s0 >= 0`, what a
    `torch._check` on a dynamic size leaves for `aten._assert_scalar`), from the graph's size
    symbols, else None.

    Only for backed symbols (`s0`, ...), which the Wrapper IR defines from the inputs; a
    data-dependent (unbacked) size is left to the node's lowering or extern call.
    """
    val = node.meta.get("val")
    if not isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return None
    expr = sym_expr(val)
    if all(str(s).startswith("s") for s in expr.free_symbols):
        return expr
    return None
