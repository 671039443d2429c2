"""`ReferenceOps`: the reference backend's op table: pure ops (inherited) plus kernel-context ops.

Tracing a stage body with `ReferenceOps` emits Python lines into the kernel function being
generated. Values are names of temporaries holding torch tensors over the whole iteration space.
Memory ops gather from / scatter into flat views (`rm`), reductions, scans and sorts run over the
last (flat reduction) dim (`rr`). `masked` keeps a stack of active masks: loads under it use
clamped indices, and indirect-index checks only look at unmasked lanes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, final

import sympy
import torch

from polyduct.codegen import CSE, IndentedBuffer, string_literal
from polyduct.errors import UnsupportedOp
from polyduct.handlers.dtypes import DtypePropagation
from polyduct.indexing import PythonIndexPrinter
from polyduct.ops import ReductionType, StoreMode, reduction_num_outputs
from polyduct.reference.math_ops import ReferenceMathOps, V
from polyduct.reference.render import arg_code, dtype_code, literal


class _IndexPrinter(PythonIndexPrinter):
    """Python index printer that also knows sympy's Mod, Min and Max (on tensors)."""

    def _print_Mod(self, expr: sympy.Mod) -> str:
        base, divisor = (self._print(a) for a in expr.args)
        return f"(({base}) % ({divisor}))"

    MIN_FN = "rm.imin"  # index values are tensors here: Python's min would compare them
    MAX_FN = "rm.imax"


@dataclass
class KernelNames:
    """Source names a kernel's body may refer to: buffers, symbols, the device and the shape."""

    kernel: str
    buffers: Mapping[str, str]  # buffer name -> flat view (or local) variable
    locals: frozenset[str]  # buffer names of role `local`
    symbols: dict[sympy.Symbol, str] = field(default_factory=dict)
    dtypes: Mapping[str, torch.dtype] = field(default_factory=dict)  # buffer name -> dtype


@final
class ReferenceOps(ReferenceMathOps):
    """The reference op table: every op of the protocol (pure ones from `ReferenceMathOps`)."""

    def __init__(self, names: KernelNames, buffer: IndentedBuffer) -> None:
        self.names = names
        self.buffer = buffer
        self.cse = CSE(buffer)
        self._masks: list[str] = []
        self._indirect: dict[sympy.Symbol, tuple[str, bool]] = {}
        self._checked: set[tuple[sympy.Symbol, str]] = set()
        self._combine_count = 0
        self._dtypes = DtypePropagation(names.dtypes)
        self._dtype_of: dict[V, torch.dtype] = {}

    # emission
    def _emit(self, expr: str, *, reuse: bool = True) -> str:
        return self.cse.generate(expr, reuse=reuse)

    def _emit_multi(self, expr: str, count: int) -> tuple[str, ...]:
        names = tuple(self.cse.new_name() for _ in range(count))
        self.buffer.line(
            f"{', '.join(names)}, = {expr}" if count == 1 else f"{', '.join(names)} = {expr}"
        )
        return names

    def _mask(self) -> str:
        return self._masks[-1] if self._masks else "None"

    def _render_index(self, expr: sympy.Expr | int, op: str = "index") -> str:
        """Source of an index expression; every free symbol must be known to this kernel."""
        if type(expr) is int:
            return str(expr)
        expr = sympy.sympify(expr)
        if isinstance(expr, sympy.Integer):
            return str(int(expr))
        symbols = self.names.symbols
        free = expr.free_symbols
        unknown = [s for s in free if s not in symbols]
        if unknown:
            raise UnsupportedOp(
                op,
                "reference",
                f"unknown symbol(s) {unknown} in index {expr}",
                kernel=self.names.kernel,
            )
        if any(type(s) is not sympy.Symbol or symbols[s] != s.name for s in free):
            expr = expr.xreplace({s: sympy.Symbol(symbols[s]) for s in free})
        return str(_IndexPrinter().doprint(expr))  # symbols already print as their names

    def _buffer(self, op: str, name: str) -> str:
        if name not in self.names.buffers:
            known = ", ".join(sorted(self.names.buffers)) or "none"
            raise UnsupportedOp(
                op,
                "reference",
                f"unknown buffer {name!r} (known: {known})",
                kernel=self.names.kernel,
            )
        return self.names.buffers[name]

    def _check_indirect(self, index: sympy.Expr, name: str) -> None:
        for sym in sorted(sympy.sympify(index).free_symbols, key=str):
            if sym not in self._indirect or (sym, name) in self._checked:
                continue
            size, check = self._indirect[sym]
            if check:
                self._checked.add((sym, name))
                self.buffer.line(
                    f"rm.check_index(KERNEL, {string_literal(name)}, {self.names.symbols[sym]}, "
                    f"{size}, {self._mask()})"
                )

    # memory
    def load(self, name: str, index: sympy.Expr) -> V:
        var = self._buffer("load", name)
        dtype = self.names.dtypes.get(name)
        if name in self.names.locals:
            return self._typed(var, dtype)
        self._check_indirect(index, name)
        value = self._emit(
            f"rm.load({var}, {self._render_index(index, 'load')}, {self._mask()}, KERNEL, "
            f"{string_literal(name)})",
            reuse=False,
        )
        return self._typed(value, dtype)

    def store(self, name: str, index: sympy.Expr, value: V, mode: StoreMode = None) -> None:
        var = self._buffer("store", name)
        if mode not in (None, "atomic_add"):
            raise UnsupportedOp("store", "reference", f"store mode {mode!r}", self.names.kernel)
        if name in self.names.locals:
            self.buffer.line(f"{var} = rm.local({value}, OUTER)")
        else:
            self._check_indirect(index, name)
            self.buffer.line(
                f"rm.store({var}, {self._render_index(index, 'store')}, {value}, {self._mask()}, "
                f"{'None' if mode is None else string_literal(mode)}, KERNEL, {string_literal(name)})"
            )
        self.cse.invalidate()

    def store_reduction(self, name: str, index: sympy.Expr, value: V) -> None:
        self.store(name, index, value)

    # indexing
    def bucketize(
        self,
        values: V,
        boundaries: tuple[str, sympy.Expr, sympy.Expr, sympy.Expr],
        boundary_indices: V,
        indexing_dtype: torch.dtype,
        right: bool,
        sorter: tuple[str, sympy.Expr] | None = None,
        sorter_indices: V | None = None,
    ) -> V:
        sizes = ", ".join(self._render_index(e) for e in boundaries[1:])
        bounds = f"({self._buffer('bucketize', boundaries[0])}, {sizes})"
        sort = "None"
        if sorter is not None:
            sort = f"({self._buffer('bucketize', sorter[0])}, {self._render_index(sorter[1])})"
        return self._emit(
            f"rm.bucketize({values}, {bounds}, {boundary_indices}, {dtype_code(indexing_dtype)}, "
            f"{literal(bool(right))}, {sort}, {arg_code(sorter_indices)})"
        )

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        self.buffer.line(
            f"rm.check_bounds(KERNEL, {self._render_index(expr)}, {self._render_index(size)}, "
            f"{literal(bool(lower))}, {literal(bool(upper))}, {self._mask()})"
        )

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> V:
        value = self._emit(f"rm.as_value({self._render_index(expr)}, {dtype_code(dtype)}, DEVICE)")
        return self._typed(value, dtype)

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> V:
        value = self._emit(f"rm.as_value({self._render_index(expr)}, {dtype_code(dtype)}, DEVICE)")
        return self._typed(value, dtype)

    def indirect_indexing(
        self, x: V, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        sym = sympy.Symbol(f"ind{len(self._indirect)}", integer=True)
        var = self.cse.new_name()
        size_code = self._render_index(size)
        self.buffer.line(
            f"{var} = rm.indirect({x}, {size_code}, {literal(bool(wrap_neg))}, {self._mask()})"
        )
        self.names.symbols[sym] = var
        self._indirect[sym] = (size_code, bool(check))
        return sym

    # reduction, scan, sort
    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: ReductionType, value: Any
    ) -> V | tuple[V, ...]:
        expr = (
            f"rr.reduction({string_literal(reduction_type)}, {arg_code(value)}, "
            f"{dtype_code(dtype)}, SHAPE)"
        )
        count = reduction_num_outputs(reduction_type)
        if count == 1:
            return self._emit(expr, reuse=False)
        return self._emit_multi(expr, count)

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[V, ...], tuple[V, ...]], tuple[V, ...]],
        values: tuple[V, ...],
    ) -> tuple[V, ...]:
        fn = self._combine_function(len(values), combine_fn)
        return self._emit_multi(
            f"rr.scan({fn}, {arg_code(tuple(values))}, {arg_code(tuple(dtypes))}, SHAPE)",
            len(values),
        )

    def _combine_function(
        self, count: int, combine_fn: Callable[[tuple[V, ...], tuple[V, ...]], tuple[V, ...]]
    ) -> str:
        fn = f"combine{self._combine_count}"
        self._combine_count += 1
        left = tuple(f"{fn}_a{i}" for i in range(count))
        right = tuple(f"{fn}_b{i}" for i in range(count))
        self.buffer.line(f"def {fn}({', '.join(left + right)}):")
        with self.buffer.indent(), self.cse.scope():
            result = combine_fn(left, right)
            self.buffer.line(f"return {arg_code(tuple(result))}")
        return fn

    def sort(
        self,
        dtypes: tuple[torch.dtype, ...],
        values: tuple[V, ...],
        stable: bool,
        descending: bool,
    ) -> tuple[V, ...]:
        return self._emit_multi(
            f"rr.sort({arg_code(tuple(values))}, {arg_code(tuple(dtypes))}, "
            f"{literal(bool(stable))}, {literal(bool(descending))}, SHAPE)",
            len(values),
        )

    # random
    def load_seed(self, name: str, offset: V) -> V:
        return self._emit(f"rm.load_seed({self._buffer('load_seed', name)}, {arg_code(offset)})")

    # other
    def constant(self, value: bool | float, dtype: torch.dtype) -> V:
        value_name = self._emit(f"rt.constant({literal(value)}, {dtype_code(dtype)}, DEVICE)")
        return self._typed(value_name, dtype)

    def device_assert_async(self, cond: V, msg: str) -> None:
        self.buffer.line(
            f"rm.device_assert(KERNEL, {cond}, {string_literal(str(msg))}, {self._mask()})"
        )

    def masked(self, mask: V, body: Callable[[], Any], other: Any) -> Any:
        with self._masked(mask), self.cse.scope():
            result = body()
        if result is None:
            return None
        if isinstance(result, tuple):
            return tuple(self._masked_value(mask, r, other) for r in result)
        return self._masked_value(mask, result, other)

    def _masked_value(self, mask: V, value: V, other: Any) -> V:
        masked = self._emit(f"rt.masked({mask}, {value}, {arg_code(other)})")
        return self._typed(masked, self._dtype_of.get(value))

    @contextmanager
    def _masked(self, mask: V) -> Iterator[None]:
        combined = mask if not self._masks else self._emit(f"rt.and_({self._masks[-1]}, {mask})")
        self._masks.append(combined)
        try:
            yield
        finally:
            self._masks.pop()
