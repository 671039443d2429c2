"""View lowerings: a strided view of a realised buffer is a new layout, a view of a lazy value
re-indexes its loader. Views never make kernels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
import torch.fx

from polyduct.indexing import contiguous_strides, linear_index, unflatten
from polyduct.ir import Expr, Layout, Lazy, StorageView, TensorValue
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.sizes import meta_layout
from polyduct.lowering.values import Ops, unbroadcast

Reindex = Callable[[Sequence[Expr]], list[Expr]]


def _view(
    x: TensorValue, size: Sequence[Expr], reindex: Reindex, layout: Layout | None
) -> TensorValue:
    """`x` seen through `reindex` (output coords -> input coords) with the new `size`."""
    if isinstance(x, StorageView) and layout is not None:
        return StorageView(x.buffer, layout)
    if isinstance(x, StorageView):
        src = x

        def load_view(ops: Ops, idx: Sequence[Expr]) -> Any:
            return src.load(ops, reindex(idx))

        return Lazy(tuple(size), x.dtype, x.device, load_view, 1)
    fn = x.fn

    def load(ops: Ops, idx: Sequence[Expr]) -> Any:
        return fn(ops, reindex(idx))

    return Lazy(tuple(size), x.dtype, x.device, load, x.cost)


def _with(x: TensorValue, size: Sequence[Expr], stride: Sequence[Expr], offset: Expr) -> Layout:
    base = x.layout if isinstance(x, StorageView) else None
    assert base is not None
    return Layout(tuple(size), tuple(stride), sympy.sympify(offset), base.dtype, base.device)


def _strides(x: TensorValue) -> tuple[Expr, ...] | None:
    return x.layout.stride if isinstance(x, StorageView) else None


def _dim(d: int, ndim: int) -> int:
    return d % ndim if ndim else 0


def view(ctx: LoweringContext, x: TensorValue, *args: Any) -> TensorValue:
    """view / reshape / _unsafe_view: contiguous input keeps its storage, else re-index flat."""
    size = ctx.out_size()
    if isinstance(x, StorageView) and _is_dense(x):
        return StorageView(
            x.buffer, Layout(size, contiguous_strides(size), x.layout.offset, x.dtype, x.device)
        )
    if isinstance(x, StorageView) and (stride := view_strides(x.size, x.layout.stride, size)):
        return StorageView(x.buffer, Layout(size, stride, x.layout.offset, x.dtype, x.device))
    in_size = x.size
    out_strides = contiguous_strides(size)

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        flat = linear_index(idx, out_strides) if idx else sympy.Integer(0)
        return list(unflatten(flat, in_size))

    return _view(x, size, reindex, None)


def view_strides(
    old: Sequence[Expr], stride: Sequence[Expr], new: Sequence[Expr]
) -> tuple[Expr, ...] | None:
    """Strides that show a tensor of size `old` and strides `stride` as size `new` without
    copying (as eager's `view` finds them), or None when that needs a copy, or when symbolic
    sizes only match for some values of their symbols.

    The old dims split into runs that are contiguous with each other; each run must be covered
    by consecutive new dims whose element count equals the run's (compared as expanded
    expressions), which take strides within the run.
    """
    if not old or not new or any(n == 0 for n in old):
        return None
    out: list[Expr] = [sympy.Integer(0)] * len(new)
    d = len(new) - 1
    base, run, covered = stride[-1], sympy.Integer(1), sympy.Integer(1)
    for i in range(len(old) - 1, -1, -1):
        run = run * old[i]
        if i > 0 and (old[i - 1] == 1 or sympy.expand(stride[i - 1] - run * base) == 0):
            continue  # old dim i - 1 continues the run
        while d >= 0 and (sympy.expand(covered - run) != 0 or new[d] == 1):
            out[d] = sympy.expand(covered * base)
            covered = covered * new[d]
            d -= 1
        if sympy.expand(covered - run) != 0:
            return None
        if i > 0:
            base, run, covered = stride[i - 1], sympy.Integer(1), sympy.Integer(1)
    return tuple(out) if d == -1 else None


def _is_dense(x: StorageView) -> bool:
    want = contiguous_strides(x.size)
    return all(s == 1 or a == b for s, a, b in zip(x.size, x.layout.stride, want, strict=True))


def permute(ctx: LoweringContext, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    n = len(x.size)
    dims = [_dim(d, n) for d in dims]
    size = [x.size[d] for d in dims]
    inverse = [dims.index(i) for i in range(n)]

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        return [idx[inverse[i]] for i in range(n)]

    st = _strides(x)
    layout = None if st is None else _with(x, size, [st[d] for d in dims], x.layout.offset)  # type: ignore[union-attr]
    return _view(x, size, reindex, layout)


def transpose(ctx: LoweringContext, x: TensorValue, d0: int, d1: int) -> TensorValue:
    n = len(x.size)
    dims = list(range(n))
    if n:
        a, b = _dim(d0, n), _dim(d1, n)
        dims[a], dims[b] = dims[b], dims[a]
    return permute(ctx, x, dims)


def t(ctx: LoweringContext, x: TensorValue) -> TensorValue:
    return transpose(ctx, x, 0, 1) if len(x.size) == 2 else x


def expand(ctx: LoweringContext, x: TensorValue, *args: Any, **kwargs: Any) -> TensorValue:
    size = ctx.out_size()
    source = ctx.node.args[0] if ctx.node.args else None  # eager's tensor, if `x` is it
    x = unbroadcast(ctx, x, size, getattr(source, "meta", {}).get("val"))
    lead = len(size) - len(x.size)

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        return [
            sympy.Integer(0) if s == 1 and o != 1 else i
            for s, o, i in zip(x.size, size[lead:], idx[lead:], strict=True)
        ]

    st = _strides(x)
    layout = None
    if st is not None:
        new = [sympy.Integer(0)] * lead + [
            sympy.Integer(0) if s == 1 and o != 1 else v
            for s, o, v in zip(x.size, size[lead:], st, strict=True)
        ]
        layout = _with(x, size, new, x.layout.offset)  # type: ignore[union-attr]
    return _view(x, size, reindex, layout)


def wrapped_index(index: Any, length: Expr, what: str) -> Expr:
    """`index` along a dim of `length` as eager reads it: a negative one counts from the end.

    The sign decides, numeric or symbolic (`-(s0 + 1)` of a dynamic size is negative); an index
    whose sign the sizes do not settle has no single place at trace time, and the op runs as a
    library call.
    """
    index = sympy.sympify(index)
    if index.is_negative:
        return index + length
    if index.is_nonnegative is not True:
        raise Fallback(f"{what} at an index of unknown sign ({index})")
    return index


def slice_start(start: Any, length: Expr) -> Expr:
    """A slice's first index as eager normalises it: None is 0, a negative one counts from the
    end (clamped at 0), one past the end is the end."""
    if start is None:
        return sympy.Integer(0)
    start = sympy.sympify(start)
    first = wrapped_index(start, length, "a slice")
    if start.is_negative:
        first = sympy.Max(first, 0)
    if (first - length).is_positive:
        return length
    return first


def slice_(
    ctx: LoweringContext,
    x: TensorValue,
    dim: int = 0,
    start: Any = None,
    end: Any = None,
    step: int = 1,
) -> TensorValue:
    dim = _dim(dim, len(x.size))
    return _sliced(x, dim, slice_start(start, x.size[dim]), step, ctx.out_size())


def _sliced(x: TensorValue, dim: int, first: Expr, step: Any, size: Sequence[Expr]) -> TensorValue:
    """Elements `first`, `first + step`, ... of `x` along `dim` (`size` is the result's size)."""

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        out = list(idx)
        out[dim] = first + idx[dim] * step
        return out

    st = _strides(x)
    layout = None
    if st is not None:
        stride = list(st)
        stride[dim] = st[dim] * step
        layout = _with(x, size, stride, x.layout.offset + first * st[dim])  # type: ignore[union-attr]
    return _view(x, size, reindex, layout)


def split_with_sizes(
    ctx: LoweringContext, x: TensorValue, split_sizes: Sequence[Any], dim: int = 0
) -> list[TensorValue]:
    """split / split_with_sizes: consecutive slices along `dim`, each a view."""
    dim = _dim(dim, len(x.size))
    parts: list[TensorValue] = []
    first: Expr = sympy.Integer(0)
    for i in range(len(ctx.meta)):
        size = ctx.out_size(i)
        parts.append(_sliced(x, dim, first, 1, size))
        first = first + size[dim]
    return parts


def split(ctx: LoweringContext, x: TensorValue, split_size: Any, dim: int = 0) -> list[TensorValue]:
    return split_with_sizes(ctx, x, [split_size] * len(ctx.meta), dim)


def unbind(ctx: LoweringContext, x: TensorValue, dim: int = 0) -> list[TensorValue]:
    """Every index along `dim`, each a view without that dim."""
    dim = _dim(dim, len(x.size))
    return [_selected(x, dim, sympy.Integer(i), ctx.out_size(i)) for i in range(len(ctx.meta))]


def diagonal(
    ctx: LoweringContext, x: TensorValue, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> TensorValue:
    """The diagonal of dims `dim1`, `dim2` (shifted by `offset`) as a new last dim."""
    n = len(x.size)
    d1, d2 = _dim(dim1, n), _dim(dim2, n)
    if d1 == d2:
        raise Fallback("diagonal of one dim with itself")
    size = ctx.out_size()
    if size and size[-1].has(sympy.Min, sympy.Max):  # kernel backends print no Min/Max
        raise Fallback(f"diagonal of symbolic length {size[-1]}")
    rest = [d for d in range(n) if d not in (d1, d2)]
    row, col = (0, offset) if offset >= 0 else (-offset, 0)

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        coords: list[Expr] = [sympy.Integer(0)] * n
        for d, i in zip(rest, idx[:-1], strict=True):
            coords[d] = i
        coords[d1], coords[d2] = idx[-1] + row, idx[-1] + col
        return coords

    st = _strides(x)
    layout = None
    if st is not None:
        stride = [st[d] for d in rest] + [st[d1] + st[d2]]
        start = x.layout.offset + row * st[d1] + col * st[d2]  # type: ignore[union-attr]
        layout = _with(x, size, stride, start)
    return _view(x, size, reindex, layout)


def select(ctx: LoweringContext, x: TensorValue, dim: int, index: Any) -> TensorValue:
    n = len(x.size)
    dim = _dim(dim, n)
    return _selected(x, dim, wrapped_index(index, x.size[dim], "select"), ctx.out_size())


def _selected(x: TensorValue, dim: int, index: Expr, size: Sequence[Expr]) -> TensorValue:
    """`x` at `index` along `dim`, without that dim."""

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        return [*idx[:dim], index, *idx[dim:]]

    st = _strides(x)
    layout = None
    if st is not None:
        layout = _with(x, size, [*st[:dim], *st[dim + 1 :]], x.layout.offset + index * st[dim])  # type: ignore[union-attr]
    return _view(x, size, reindex, layout)


def _keep_dims(ctx: LoweringContext, x: TensorValue) -> TensorValue:
    """squeeze / unsqueeze: only size-1 dims change, so map coordinates by position."""
    size = ctx.out_size()
    keep_in = [i for i, s in enumerate(x.size) if s != 1]
    keep_out = [i for i, s in enumerate(size) if s != 1]
    if len(keep_in) != len(keep_out):
        raise Fallback("squeeze/unsqueeze changed a non-unit dim")

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        coords: list[Expr] = [sympy.Integer(0)] * len(x.size)
        for i, o in zip(keep_in, keep_out, strict=True):
            coords[i] = idx[o]
        return coords

    st = _strides(x)
    layout = None
    if st is not None:
        stride = [sympy.Integer(1)] * len(size)
        for i, o in zip(keep_in, keep_out, strict=True):
            stride[o] = st[i]
        layout = _with(x, size, stride, x.layout.offset)  # type: ignore[union-attr]
    return _view(x, size, reindex, layout)


def squeeze(ctx: LoweringContext, x: TensorValue, *args: Any) -> TensorValue:
    return _keep_dims(ctx, x)


def as_strided(
    ctx: LoweringContext, x: TensorValue, size: Any, stride: Sequence[Any], offset: Any = None
) -> TensorValue:
    base = x if isinstance(x, StorageView) and _held_as_eager(ctx, x) else _realized_dense(ctx, x)
    new_size = ctx.out_size()
    new_off = base.layout.offset if offset is None else sympy.sympify(offset)
    return StorageView(
        base.buffer, _with(base, new_size, [sympy.sympify(s) for s in stride], new_off)
    )


def unfold(ctx: LoweringContext, x: TensorValue, dim: int, size: Any, step: Any) -> TensorValue:
    """Windows of `size` every `step` along `dim`, as a new last dim (a strided view)."""
    out_size = ctx.out_size()
    n = len(x.size)
    if n == 0:  # a 0-d tensor unfolds to one window of its single element
        return _view(x, out_size, lambda idx: [], _unit_layout(x, out_size))
    dim, step = _dim(dim, n), sympy.sympify(step)

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        coords = list(idx[:n])
        coords[dim] = idx[dim] * step + idx[n]
        return coords

    st = _strides(x)
    layout = None
    if st is not None:
        stride = [*st[:dim], st[dim] * step, *st[dim + 1 :], st[dim]]
        layout = _with(x, out_size, stride, x.layout.offset)  # type: ignore[union-attr]
    return _view(x, out_size, reindex, layout)


def _unit_layout(x: TensorValue, size: Sequence[Expr]) -> Layout | None:
    if not isinstance(x, StorageView):
        return None
    return _with(x, size, [sympy.Integer(1)] * len(size), x.layout.offset)


def _held_as_eager(ctx: LoweringContext, x: StorageView) -> bool:
    """Whether `x` is memory laid out as eager's argument is (as_strided addresses that
    storage): a graph input or a library call's result is; a value a kernel of ours stored
    with other strides (channels-last for a convolution, say) is not."""
    arg = ctx.node.args[0]
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or val.dim() != len(x.size):
        return True
    eager = meta_layout(val)
    pairs = zip(x.size, x.layout.stride, eager.stride, strict=True)
    return x.layout.offset == eager.offset and all(n == 1 or a == b for n, a, b in pairs)


def _realized_dense(ctx: LoweringContext, x: TensorValue) -> StorageView:
    """A lazy value computed into a buffer laid out as eager's (contiguous, offset 0) tensor, so
    as_strided addresses the same storage elements; any other eager layout falls back."""
    arg = ctx.node.args[0]
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if (
        not isinstance(val, torch.Tensor)
        or not all(isinstance(v, int) for v in (*val.shape, val.storage_offset()))
        or not val.is_contiguous()
        or val.storage_offset() != 0
    ):
        raise Fallback("as_strided of a computed value that eager does not hold contiguously")
    return ctx.graph.realize(x.reread() if isinstance(x, StorageView) else x)


def flip(ctx: LoweringContext, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    """Reverse `dims`; a lazy re-index (negative strides are not a layout kernels take)."""
    n = len(x.size)
    flipped = {_dim(d, n) for d in dims}

    def reindex(idx: Sequence[Expr]) -> list[Expr]:
        return [x.size[d] - 1 - i if d in flipped else i for d, i in enumerate(idx)]

    return _view(x, x.size, reindex, None)


def alias(ctx: LoweringContext, x: TensorValue, *args: Any) -> TensorValue:
    return x


def table() -> dict[str, LoweringFn]:
    """The view lowerings, by aten overload name."""
    return {
        "aten.view.default": view,
        "aten.reshape.default": view,
        "aten._unsafe_view.default": view,
        "aten.permute.default": permute,
        "aten.transpose.int": transpose,
        "aten.t.default": t,
        "aten.expand.default": expand,
        "aten.slice.Tensor": slice_,
        "aten.select.int": select,
        "aten.squeeze.default": squeeze,
        "aten.squeeze.dim": squeeze,
        "aten.squeeze.dims": squeeze,
        "aten.unsqueeze.default": squeeze,
        "aten.as_strided.default": as_strided,
        "aten.alias.default": alias,
        "aten.flip.default": flip,
        "aten.unfold.default": unfold,
        "aten.split_with_sizes.default": split_with_sizes,
        "aten.split.Tensor": split,
        "aten.unbind.int": unbind,
        "aten.diagonal.default": diagonal,
        "aten.detach.default": alias,
        "aten.lift_fresh_copy.default": alias,
    }
