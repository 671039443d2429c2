"""The loop-level IR: buffers with layouts, tensor values, and define-by-run compute nodes.

A lowered graph is an `IRGraph`: named buffers (graph inputs, computed buffers, extern results),
compute nodes in program order, and extern calls. Values flowing between lowerings are either a
`StorageView` (a strided window on a realised buffer; views never make kernels) or a `Lazy`
pointwise value (an unrealised loader `fn(ops, idx) -> value` that consumers inline). Sizes,
strides and offsets are sympy expressions over size symbols. Bodies get the op handler passed in
explicitly: there is no "current handler" state anywhere.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import sympy
import torch

from polyduct.handlers.default import DefaultHandler
from polyduct.indexing import contiguous_strides, index_vars, linear_index, product
from polyduct.ops import OpHandler, reduction_num_outputs

Expr: TypeAlias = sympy.Expr
Loader: TypeAlias = Callable[[OpHandler[Any], Sequence[Expr]], Any]
NodeBody: TypeAlias = Callable[[OpHandler[Any], Sequence[Expr], Sequence[Expr]], None]
NodeKind: TypeAlias = Literal["pointwise", "reduction", "scan", "sort"]
BufferKind: TypeAlias = Literal["input", "computed", "extern", "multi"]
# the extern buffer of a graph's random seeds, one slot per random op (filled by the wrapper)
SEED_BUFFER = "seeds"


@dataclass(frozen=True)
class Layout:
    """Size, stride and element offset of a strided tensor, plus dtype and device."""

    size: tuple[Expr, ...]
    stride: tuple[Expr, ...]
    offset: Expr
    dtype: torch.dtype
    device: str

    @staticmethod
    def contiguous(size: Sequence[Expr], dtype: torch.dtype, device: str) -> Layout:
        """A fresh row-major layout."""
        size = tuple(sympy.sympify(s) for s in size)
        return Layout(size, contiguous_strides(size), sympy.Integer(0), dtype, device)

    def index(self, idx: Sequence[Expr]) -> Expr:
        """Flat element offset of the element at coordinates `idx`."""
        if not idx:
            return self.offset
        return _offset_index(self.offset, linear_index(idx, self.stride))

    def extent(self) -> Expr:
        """Elements addressable from the storage start (offset + furthest element + 1)."""
        return _extent(self.size, self.stride, self.offset)

    def is_contiguous(self) -> bool:
        """Row-major with no offset (size-1 dims may have any stride)."""
        want = contiguous_strides(self.size)
        same = all(s == 1 or a == b for s, a, b in zip(self.size, self.stride, want, strict=True))
        return same and self.offset == 0


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=4096)
def _extent(size: tuple[Expr, ...], stride: tuple[Expr, ...], offset: Expr) -> Expr:
    if any(s == 0 for s in size):
        return sympy.Integer(0)
    far = [(s - 1) * st for s, st in zip(size, stride, strict=True)]
    return sympy.Add(sympy.sympify(offset), *far, sympy.Integer(1))  # one flatten for the sum


# memo of a pure sympy function: not process state
@functools.lru_cache(maxsize=8192)
def _offset_index(offset: Expr, index: Expr) -> Expr:
    return offset + index


@dataclass(frozen=True)
class StorageView:
    """A strided view of realised buffer `buffer`."""

    buffer: str
    layout: Layout

    @property
    def size(self) -> tuple[Expr, ...]:
        return self.layout.size

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype

    @property
    def device(self) -> str:
        return self.layout.device

    def load(self, ops: OpHandler[Any], idx: Sequence[Expr]) -> Any:
        """The element at `idx`."""
        return ops.load(self.buffer, self.layout.index(idx))

    def reread(self) -> Lazy:
        """A lazy value reading this view: realised, it is a copy into other memory."""
        return Lazy(self.size, self.dtype, self.device, self.load, 1)


@dataclass(frozen=True)
class Lazy:
    """An unrealised pointwise value: `fn(ops, idx)` computes the element at `idx`."""

    size: tuple[Expr, ...]
    dtype: torch.dtype
    device: str
    fn: Loader
    cost: int = 1  # ops in the inlined expression tree, to decide when re-computing is too costly

    def load(self, ops: OpHandler[Any], idx: Sequence[Expr]) -> Any:
        return self.fn(ops, idx)


TensorValue: TypeAlias = StorageView | Lazy


@dataclass(frozen=True)
class BufferInfo:
    """A named buffer of the graph: how it comes to exist and its (storage) layout."""

    name: str
    kind: BufferKind
    layout: Layout


@dataclass(eq=False)
class ComputeNode:
    """A loop nest: `body(ops, x, r)` loads, computes and stores (reductions: `store_reduction`).

    `ranges` is the outer space (the output's shape), `reduction_ranges` the reduced / scanned /
    sorted dims (empty for pointwise). `outputs` are buffers written with `store`; `accumulators`
    maps each reduction output buffer to the local its `store_reduction` writes.
    """

    name: str
    kind: NodeKind
    ranges: tuple[Expr, ...]
    reduction_ranges: tuple[Expr, ...]
    body: NodeBody
    outputs: tuple[str, ...]
    accumulators: dict[str, str] = field(default_factory=dict)
    acc_dtypes: dict[str, torch.dtype] = field(default_factory=dict)


@dataclass(eq=False)
class ExternNode:
    """A library call of aten op `op`; `args`/`kwargs` hold `polyduct.wrapper.ir` constants."""

    name: str
    op: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    result: str
    outputs: tuple[str, ...]  # buffers bound from the result (MultiOutput when it is a tuple)
    tuple_result: bool
    views: tuple[tuple[str, StorageView], ...] = ()  # argument views to materialise first


Node = ComputeNode | ExternNode


def acc_name(buffer: str) -> str:
    """The kernel-local accumulator a reduction into `buffer` writes."""
    return f"{buffer}_acc"


@dataclass
class IRGraph:
    """A lowered graph: buffers, nodes in program order, inputs and outputs."""

    buffers: dict[str, BufferInfo] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)  # StorageView | sympy.Expr | None
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    # lazy values already computed into a buffer, by identity (the value is kept alive so its
    # id is not reused): one value read by two extern calls is computed once
    _realized: dict[int, tuple[Lazy, StorageView]] = field(default_factory=dict)

    def new_name(self, prefix: str = "buf") -> str:
        """A fresh, deterministic name."""
        return f"{prefix}{next(self._counter)}"

    def add_buffer(self, kind: BufferKind, layout: Layout, name: str | None = None) -> str:
        """Register a buffer and return its name."""
        name = name or self.new_name()
        self.buffers[name] = BufferInfo(name, kind, layout)
        return name

    def realize(self, value: TensorValue, layout: Layout | None = None) -> StorageView:
        """`value` as a strided view of a buffer; a lazy value becomes a pointwise node writing
        `layout` (row-major by default). A value is computed once: later calls get that view."""
        if isinstance(value, StorageView):
            return value
        done = self._realized.get(id(value))
        if done is not None:
            view = done[1]
            if layout is None or view.layout.stride == layout.stride:
                return view
            return self.realize_as(view.reread(), layout)  # other strides than a reader stored
        layout = layout or Layout.contiguous(value.size, value.dtype, value.device)
        view = self.realize_as(value, layout)
        self.remember(value, view)
        return view

    def remember(self, value: Lazy, view: StorageView) -> None:
        """`value` is held by `view` from now on: `realize(value)` returns it."""
        self._realized[id(value)] = (value, view)

    def realize_as(self, value: Lazy, layout: Layout) -> StorageView:
        """Compute `value` into a new buffer with `layout` (one pointwise node)."""
        return self._compute(value, layout, layout)

    def realize_within(self, value: Lazy, layout: Layout) -> StorageView:
        """Compute `value` into a new flat buffer of `layout.extent()` elements through the view
        `layout` of it: the view keeps its element offset (its storage offset is `layout.offset`)."""
        one, zero = sympy.Integer(1), sympy.Integer(0)
        flat = Layout((layout.extent(),), (one,), zero, layout.dtype, layout.device)
        return self._compute(value, flat, layout)

    def _compute(self, value: Lazy, buffer: Layout, view: Layout) -> StorageView:
        name = self.add_buffer("computed", buffer)
        fn = value.fn

        def body(ops: OpHandler[Any], x: Sequence[Expr], r: Sequence[Expr]) -> None:
            ops.store(name, view.index(x), fn(ops, x))

        node = ComputeNode(self.new_name("node"), "pointwise", view.size, (), body, (name,))
        self.nodes.append(node)
        return StorageView(name, view)


class Token:
    """A placeholder value produced while tracing a body for its reads and writes."""


@dataclass
class Access:
    """What one traced body touched: (buffer, index) loads, stores and reduction stores."""

    loads: list[tuple[str, Expr]] = field(default_factory=list)
    stores: list[tuple[str, Expr]] = field(default_factory=list)
    reduction_stores: list[tuple[str, Expr]] = field(default_factory=list)
    exprs: list[Expr] = field(default_factory=list)  # other index expressions (sizes, bounds)
    # buffers stored with a mode (`atomic_add`): read, modified and written back
    accumulated: set[str] = field(default_factory=set)


def _same(expr: Expr) -> Expr:
    return expr


class AccessRecorder(DefaultHandler[Any]):
    """Runs a body on placeholder values and records which buffers it loads and stores."""

    def __init__(self, access: Access, simplify: Callable[[Expr], Expr] | None = None) -> None:
        self.access = access
        self._indirect = itertools.count()
        # recorded indices simplified as the kernel will see them (loop ranges known)
        self._simplify = simplify if simplify is not None else _same

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return Token()

    def load(self, name: str, index: Expr) -> Any:
        self.access.loads.append((name, self._simplify(sympy.sympify(index))))
        return Token()

    def store(self, name: str, index: Expr, value: Any, mode: Any = None) -> None:
        self.access.stores.append((name, self._simplify(sympy.sympify(index))))
        if mode is not None:
            self.access.accumulated.add(name)

    def store_reduction(self, name: str, index: Expr, value: Any) -> None:
        self.access.reduction_stores.append((name, self._simplify(sympy.sympify(index))))

    def indirect_indexing(
        self, x: Any, size: Expr, check: bool = True, wrap_neg: bool = True
    ) -> Expr:
        self.access.exprs.append(sympy.sympify(size))
        return sympy.Symbol(f"indirect{next(self._indirect)}", integer=True, nonnegative=True)

    def masked(self, mask: Any, body: Callable[[], Any], other: Any) -> Any:
        body()
        return Token()

    def reduction(self, dtype: Any, src_dtype: Any, reduction_type: Any, value: Any) -> Any:
        n = reduction_num_outputs(reduction_type)
        return Token() if n == 1 else tuple(Token() for _ in range(n))

    def scan(self, dtypes: Any, combine_fn: Any, values: Any) -> Any:
        return tuple(Token() for _ in values)

    def sort(self, dtypes: Any, values: Any, stable: bool, descending: bool) -> Any:
        return tuple(Token() for _ in values)

    def frexp(self, x0: Any) -> Any:
        return Token(), Token()

    def check_bounds(self, expr: Expr, size: Expr, lower: bool, upper: bool) -> None:
        self.access.exprs.extend((sympy.sympify(expr), sympy.sympify(size)))

    def index_expr(self, expr: Expr, dtype: torch.dtype) -> Any:
        self.access.exprs.append(sympy.sympify(expr))
        return Token()

    def value_expr(self, expr: Expr, dtype: torch.dtype) -> Any:
        self.access.exprs.append(sympy.sympify(expr))
        return Token()

    def bucketize(self, values: Any, boundaries: Any, *args: Any, **kwargs: Any) -> Any:
        self.access.loads.append((boundaries[0], sympy.Integer(0)))
        self.access.exprs.extend(sympy.sympify(e) for e in boundaries[1:])
        sorter = args[3] if len(args) > 3 else kwargs.get("sorter")
        if sorter is not None:
            self.access.loads.append((sorter[0], sympy.Integer(0)))
            self.access.exprs.append(sympy.sympify(sorter[1]))
        return Token()

    def device_assert_async(self, cond: Any, msg: str) -> None:
        return None

    def load_seed(self, name: str, offset: Any) -> Any:
        self.access.loads.append((name, sympy.Integer(0)))
        return Token()


def trace_access(node: ComputeNode) -> Access:
    """Loads and stores of `node`'s body, indexed by `x*` / `r*` symbols."""
    access = Access()
    x = index_vars("x", len(node.ranges))
    r = index_vars("r", len(node.reduction_ranges))
    node.body(AccessRecorder(access), x, r)
    return access


def numel(size: Sequence[Expr]) -> Expr:
    """Number of elements of a shape."""
    return sympy.sympify(product(list(size)))
