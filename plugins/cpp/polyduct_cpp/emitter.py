"""`Emitter`: the state of one kernel being traced: typed temporaries, buffers, index printing,
indirect-index checks, masked bodies and error sites. Stage-specific ops (reduction, scan, sort)
live in `StageEmitter` (stage.py), which subclasses this."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import sympy
import torch

from polyduct.codegen import CSE, IndentedBuffer, Value, identifier
from polyduct.errors import UnsupportedOp
from polyduct.handlers.dtypes import DtypePropagation
from polyduct.indexing import index_vars
from polyduct.kernel import KernelSpec
from polyduct.ops import StoreMode
from polyduct_cpp.ctypes_map import (
    LOW_PRECISION,
    CppIndexPrinter,
    compute_type,
    from_storage,
    literal,
    storage_type,
    to_storage,
)
from polyduct_cpp.loops import tile_slot, transposed

ASSIGN = "auto {name} = {expr};"
# How far ahead a streamed row is read (bytes): 2-8 KiB measured within 1% of each other on a
# 4096x4096 row sum, 32 KiB slower.
PREFETCH_BYTES = 8192
_IDENT: Final = re.compile(r"[A-Za-z_]\w*")
# A call of one of these is cheap: recomputing it beats a round trip through a row array.
_CHEAP_CALLS: Final = frozenset(
    {"static_cast", "std::abs", "std::fabs", "std::min", "std::max", "pd_maximum", "pd_minimum"}
)
_CALL: Final = re.compile(r"((?:std::)?[A-Za-z_]\w*)\(")


# names that vary along the reduction loops (the loop counters and reduction variables)
_R_LOOP: Final = re.compile(r"r\d+|pd_rf|pd_rb|pd_l|pd_rmain")


@dataclass
class Indirect:
    """An indirect index variable: its C name, the raw value's name, size, and whether checked;
    `hoisted` when it is computed (and checked) once per row, before the reduction loops."""

    var: str
    raw: str
    size: str
    check: bool
    hoisted: bool = False


@dataclass
class StageState:
    """What tracing one stage produced: body lines and, for reduce/scan/sort, the extra parts."""

    kind: str
    body: IndentedBuffer = field(default_factory=IndentedBuffer)
    # values of an inner/reduce stage constant along the reduction, computed before its loops
    hoisted: IndentedBuffer = field(default_factory=IndentedBuffer)
    post: IndentedBuffer = field(default_factory=IndentedBuffer)
    accs: list[tuple[str, str]] = field(default_factory=list)  # (C type, name)
    gather: list[str] = field(default_factory=list)
    arrays: list[tuple[str, str]] = field(default_factory=list)  # (name, C type)
    combine: list[str] = field(default_factory=list)
    sort_descending: bool | None = None
    no_simd: bool = False
    split_threads: bool = True  # may a reduce stage split one row across threads
    whole_blocks: bool = False  # the last reduction dim holds whole lane blocks (_lane_blocks)
    prefetch: list[str] = field(default_factory=list)  # addresses read ahead per lane block
    index: int = 0  # position among the kernel's stages


@dataclass(frozen=True)
class TileCopy:
    """A transposed store of a tiled kernel: the tile array and the memory it is copied to,
    e.g. `out_ptr0[1024*x0 + x1]`. (Transposed loads read memory directly: filling a tile from
    them with plain loops measured no faster.)"""

    array: str
    ctype: str
    memory: str


@dataclass(frozen=True)
class RowValue:
    """A value an inner/reduce stage computed for every reduction index (a row-cache candidate)."""

    name: str
    dtype: torch.dtype
    state: StageState


def _expensive(expr: str) -> bool:
    """Whether `expr` itself calls a function worth keeping rather than recomputing (exp, ...)."""
    return any(m.group(1) not in _CHEAP_CALLS for m in _CALL.finditer(expr))


class Emitter:
    """Builds the C++ body of one kernel from op calls (see `CppOps`)."""

    def __init__(self, spec: KernelSpec, check_indices: bool = True) -> None:
        self.spec = spec
        self.names = spec.arg_names()
        self.check_indices = check_indices
        self.dtypes = DtypePropagation({b.name: b.dtype for b in spec.buffers})
        self.sites: list[str] = []  # error sites: buffer names and assert messages
        self.locals = {
            b.name: identifier(f"pd_loc_{b.name}") for b in spec.buffers if b.role == "local"
        }
        # renamed with their assumptions (positive): a floor division of sizes stays C's `/`
        self._subs = {s: sympy.Symbol(self.names[s.name], **s.assumptions0) for s in spec.size_args}
        self._printer = CppIndexPrinter()
        self._indirect: dict[str, Indirect] = {}
        self.index_exprs: list[sympy.Expr] = []  # every index printed (for loop flattening)
        self.load_exprs: list[sympy.Expr] = []  # indexes of buffer loads (for the loop order)
        self.store_exprs: list[sympy.Expr] = []  # indexes of buffer stores (for tiling)
        self.accesses: Counter[str] = Counter()  # loads and stores per buffer (for tiling)
        # tiled pointwise kernels: (SIMD dim, tiled dim, tile edge); stores transposed to the SIMD
        # loop go to a tile array, copied out after the tile (TileCopy)
        self.tile: tuple[int, int, int] | None = None
        self.tile_stores: list[TileCopy] = []
        self.flatten: dict[sympy.Symbol, sympy.Expr] = {}  # outer vars zeroed when flattened
        self._count = 0
        self.state = StageState("outer")
        self.cse = CSE(self.state.body, assign=ASSIGN)
        # Cross-stage reuse ("row cache"): every value gets a canonical id (its expression over
        # canonical operands; loads and locals carry a version bumped by each store), so a later
        # stage that recomputes an expensive value of an earlier stage reads it from a per-row
        # array the earlier stage fills instead (softmax: exp(x - max) once, not twice).
        self.row_cache = False  # set by codegen where rows are short enough to keep
        self.row_cache_unsafe = False  # a local stored inside a row loop (loop-carried value)
        self.row_arrays: list[tuple[str, str]] = []  # (array name, C type)
        self._canon: dict[str, str] = {}
        self._intern: dict[str, int] = {}
        self._versions: dict[str, int] = {}
        self._row_values: dict[str, RowValue] = {}
        self._row_stored: dict[str, str] = {}  # source value name -> its array
        self.hoist = CSE(self.state.hoisted, assign=ASSIGN, prefix="h_")
        self._invariant: set[str] = set()  # names computed in the hoisted part of the stage
        self._checked: set[tuple[str, int]] = set()  # (hoisted indirect variable, site) checked

    def begin(self, state: StageState, stage_index: int) -> None:
        """Start tracing a stage: fresh temporaries (prefixed by stage) written to its body."""
        self.state = state
        state.index = stage_index
        self.cse = CSE(state.body, assign=ASSIGN, prefix=f"t{stage_index}_")
        self.hoist = CSE(state.hoisted, assign=ASSIGN, prefix=f"h{stage_index}_")
        self._invariant = set()
        self._checked = set()

    def invariant(self, text: str) -> bool:
        """Whether C expression `text` of an inner or reduce stage may be computed once per
        row: it reads no reduction variable and no value computed inside the reduction loops,
        and loads only from buffers the kernel never writes (or kernel locals, final by then),
        outside any masked region."""
        if self.state.kind not in ("inner", "reduce") or self.cse.buffer is not self.state.body:
            return False
        written = {self.names[b.name] for b in self.spec.buffers if b.role in ("out", "inout")}
        for name in _IDENT.findall(text):
            if _R_LOOP.fullmatch(name) or name in written:
                return False
            computed = name in self._canon or name in self._indirect or name.startswith("pd_")
            temporary = name.startswith(("t", "pd_ind", "pd_masked"))
            if computed and temporary and name not in self._invariant:
                return False
        return True

    def fresh(self, stem: str) -> str:
        """A kernel-unique C name."""
        self._count += 1
        return f"pd_{stem}{self._count}"

    def line(self, text: str) -> None:
        self.cse.buffer.line(text)

    def site(self, what: str) -> int:
        """The id of an error site (reported back to Python by number)."""
        if what not in self.sites:
            self.sites.append(what)
        return self.sites.index(what)

    # values
    def value(self, expr: str, dtype: torch.dtype, reuse: bool = True, version: str = "") -> Value:
        """A temporary of `dtype`'s compute type holding `expr`.

        `version` distinguishes loads of a buffer before and after a store to it.
        """
        text = f"static_cast<{compute_type(dtype)}>({expr})"
        if reuse and self.invariant(text):
            name = self.hoist.generate(text)
            self._invariant.add(name)
            self._canon.setdefault(name, self._canonical(text) + version)
            return Value(name, dtype)
        key = self._canonical(text) + version if reuse else f"#unique{self._count}"
        kept = self._from_row_cache(key, text, dtype) if reuse else None
        name = self.cse.generate(kept or text, reuse=reuse)
        self._canon.setdefault(name, key)
        if reuse and self.state.kind in ("inner", "reduce") and self.cse.buffer is self.state.body:
            self._row_values.setdefault(key, RowValue(name, dtype, self.state))
        return Value(name, dtype)

    def _canonical(self, text: str) -> str:
        """`text` with every known temporary replaced by its canonical id."""
        expanded = _IDENT.sub(lambda m: self._canon.get(m.group(0), m.group(0)), text)
        return f"#{self._intern.setdefault(expanded, len(self._intern))}"

    def _from_row_cache(self, key: str, text: str, dtype: torch.dtype) -> str | None:
        """A read of the row array holding `key`, when an earlier stage computed it."""
        src = self._row_values.get(key)
        usable = (
            self.row_cache
            and src is not None
            and src.state is not self.state
            and src.dtype == dtype
            and self.state.kind in ("inner", "reduce")
            and _expensive(text)
        )
        if not usable or src is None:
            return None
        array = self._row_stored.get(src.name)
        if array is None:
            array = self.fresh("row")
            self._row_stored[src.name] = array
            self.row_arrays.append((array, compute_type(dtype)))
            src.state.body.line(f"{array}[pd_rf] = {src.name};")
        return f"{array}[pd_rf]"

    def bump(self, name: str) -> None:
        """A store to buffer `name`: later loads of it are new values."""
        self._versions[name] = self._versions.get(name, 0) + 1
        if name in self.locals:
            self._canon[self.locals[name]] = f"{self.locals[name]}@{self._versions[name]}"

    def version(self, name: str) -> str:
        return f"@{name}#{self._versions.get(name, 0)}"

    def coerce(self, value: Any, dtype: torch.dtype) -> str:
        """`value` (a Value or Python scalar) as an expression of `dtype`'s compute type."""
        if not isinstance(value, Value):
            return literal(value, dtype)
        if compute_type(value.dtype) == compute_type(dtype):
            return value.name
        return f"static_cast<{compute_type(dtype)}>({value.name})"

    def convert(self, x: Value, dtype: torch.dtype) -> str:
        """`to_dtype` semantics: bool is != 0, 16-bit floats round (16-bit ones too), trunc to int."""
        if dtype == torch.bool:
            return f"static_cast<bool>({x})"
        ctype = compute_type(dtype)
        value = f"static_cast<{ctype}>({x})"
        if dtype.is_floating_point and not x.dtype.is_floating_point and x.dtype != torch.bool:
            # GCC (-fno-trapping-math) folds float -> int -> float into trunc(), -0.3 into -0.0
            value = f"({x} == 0 ? {ctype}(0) : {value})"
        if dtype in LOW_PRECISION:
            return f"{'pd_round_bf16' if dtype == torch.bfloat16 else 'pd_round_f16'}({value})"
        if x.dtype.is_floating_point and not dtype.is_floating_point:
            return f"static_cast<{ctype}>(static_cast<int64_t>({x}))"
        return value

    # indexing
    def index(self, expr: sympy.Expr, buffer: str | None = None) -> str:
        """C source of an index expression; checks indirect variables used against `buffer`."""
        expr = sympy.sympify(expr)
        self.index_exprs.append(expr)
        if self.flatten:
            expr = expr.xreplace(self.flatten)
        for sym in sorted(expr.free_symbols, key=str):
            ind = self._indirect.get(sym.name)
            if ind is not None and ind.check and self.check_indices:
                site = self.site(buffer or ind.var)
                check = (
                    f"{ind.var} = pd_check_index(pd_err, {site}, {ind.var}, {ind.raw}, {ind.size});"
                )
                if ind.hoisted:  # checked once per row, before the loops: they stay SIMD
                    if (ind.var, site) not in self._checked:
                        self._checked.add((ind.var, site))
                        self.hoist.buffer.line(check)
                    continue
                self.line(check)
                self.state.no_simd = True
        return str(self._printer.doprint(expr.xreplace(self._subs)))

    def indirect(self, x: Value, size: sympy.Expr, check: bool, wrap_neg: bool) -> sympy.Expr:
        var = self.fresh("ind")
        raw = f"{var}_raw"
        size_c = self.index(size)
        hoisted = self.invariant(f"{x} {size_c}")
        emit = self.hoist.buffer.line if hoisted else self.line
        emit(f"const int64_t {raw} = static_cast<int64_t>({x});")
        wrapped = f"({raw} < 0 ? {raw} + ({size_c}) : {raw})" if wrap_neg else raw
        emit(f"int64_t {var} = {wrapped};")
        self._indirect[var] = Indirect(var, raw, f"({size_c})", check, hoisted)
        if hoisted:
            self._invariant.update((var, raw))
        return sympy.Symbol(var, integer=True)

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        idx, size_c = self.index(expr), self.index(size)
        site = self.site(str(expr))
        conds = [c for c, on in ((f"({idx}) < 0", lower), (f"({idx}) >= ({size_c})", upper)) if on]
        if conds:
            cond = " || ".join(conds)
            self.line(f"if (PD_UNLIKELY({cond})) pd_report(pd_err, 1, {site}, {idx}, {size_c});")
            self.state.no_simd = True

    def device_assert(self, cond: Value, msg: str) -> None:
        site = self.site(msg)
        self.line(f"if (PD_UNLIKELY(!({cond}))) pd_report(pd_err, 2, {site}, 0, 0);")
        self.state.no_simd = True

    # memory
    def load(self, name: str, index: sympy.Expr) -> Value:
        buf = self.spec.buffer(name)
        if buf.role == "local":
            return Value(self.locals[name], buf.dtype)
        expr = sympy.sympify(index)
        self.load_exprs.append(expr)
        self.accesses[name] += 1
        index_c = self.index(expr, name)
        self._stream(name, expr, buf.dtype)
        return self.load_at(name, index_c, buf.dtype)

    def _stream(self, name: str, index: sympy.Expr, dtype: torch.dtype) -> None:
        """A reduce stage over one dim reading `name` contiguously along it (a row streamed from
        memory) reads it PREFETCH_BYTES ahead once per lane block: the hardware prefetcher alone
        leaves a single-core row sum at 0.95x of this (4096x4096 float32)."""
        if self.state.kind != "reduce" or len(self.spec.reduction_ranges) != 1:
            return
        (r0,) = index_vars("r", 1)
        expr = index.xreplace(self.flatten) if self.flatten else index
        if any(s.name in self._indirect for s in expr.free_symbols) or expr.diff(r0) != 1:
            return
        ahead = sympy.Symbol("pd_rb", integer=True) + PREFETCH_BYTES // dtype.itemsize
        offset = self._printer.doprint(expr.xreplace({r0: ahead}).xreplace(self._subs))
        address = f"{self.names[name]} + ({offset})"
        if address not in self.state.prefetch:
            self.state.prefetch.append(address)

    def load_at(self, name: str, index_c: str, dtype: torch.dtype) -> Value:
        buf = self.spec.buffer(name)
        expr = from_storage(f"{self.names[name]}[{index_c}]", buf.dtype)
        return self.value(expr, dtype, version=self.version(name))

    def store(self, name: str, index: sympy.Expr, value: Value, mode: StoreMode) -> None:
        buf = self.spec.buffer(name)
        self.bump(name)
        if buf.role == "local":
            self.row_cache_unsafe |= self.state.kind in ("inner", "reduce")
            self.line(f"{self.locals[name]} = {self.coerce(value, buf.dtype)};")
            return
        self.store_exprs.append(sympy.sympify(index))
        self.accesses[name] += 1
        target = f"{self.names[name]}[{self.index(index, name)}]"
        if mode is None and self._tile_store(buf.name, buf.role, index, target, value):
            return
        if mode == "atomic_add":
            self._atomic_add(target, value, buf.dtype)
        elif mode is None:
            self.line(f"{target} = {to_storage(self.coerce(value, buf.dtype), buf.dtype)};")
        else:
            raise UnsupportedOp("store", "cpp", f"store mode {mode!r}", self.spec.name)
        self.cse.invalidate()

    def _atomic_add(self, target: str, value: Value, dtype: torch.dtype) -> None:
        self.state.no_simd = True
        if dtype in LOW_PRECISION or dtype == torch.bool:
            new = to_storage(f"{from_storage(target, dtype)} + {self.coerce(value, dtype)}", dtype)
            self.line("#pragma omp critical(pd_atomic)")
            self.line(f"{target} = {new};")
        else:
            self.line("#pragma omp atomic")
            self.line(f"{target} += {self.coerce(value, dtype)};")

    def _tile_slot(self, role: str, index: sympy.Expr) -> str | None:
        """In a tiled kernel, the tile-array slot of a store to an output that steps through
        the SIMD dim with a stride and along the tiled dim by 1 (None for any other store: it
        stays a direct store)."""
        if self.tile is None or role != "out":
            return None
        inner, across, edge = self.tile
        index = sympy.sympify(index)
        xs = index_vars("x", len(self.spec.ranges))
        if not transposed(index, xs[inner], xs[across]):
            return None
        if any(s.name in self._indirect for s in index.free_symbols):
            return None
        return tile_slot(inner, across, edge)

    def _tile_store(
        self, name: str, role: str, index: sympy.Expr, target: str, value: Value
    ) -> bool:
        """A transposed store of a tiled kernel writes the tile array instead (contiguous in the
        SIMD loop); the tile is copied to `target` after it is computed."""
        slot = self._tile_slot(role, index)
        if slot is None:
            return False
        dtype = self.spec.buffer(name).dtype
        array = f"pd_tile{len(self.tile_stores)}"
        self.tile_stores.append(TileCopy(array, storage_type(dtype), target))
        self.line(f"{array}[{slot}] = {to_storage(self.coerce(value, dtype), dtype)};")
        self.cse.invalidate()
        return True

    def store_reduction(self, name: str, index: sympy.Expr, value: Value) -> None:
        buf = self.spec.buffer(name)
        post = self.state.post
        self.bump(name)
        if buf.role == "local":
            v = self.coerce(value, buf.dtype)
            post.line(f"{self.locals[name]} = {self.convert(Value(v, value.dtype), buf.dtype)};")
            return
        saved, self.cse.buffer = self.cse.buffer, post
        try:
            target = f"{self.names[name]}[{self.index(index, name)}]"
            post.line(f"{target} = {to_storage(self.coerce(value, buf.dtype), buf.dtype)};")
        finally:
            self.cse.buffer = saved

    def frexp(self, x: Value) -> tuple[Value, Value]:
        mant, expo = self.fresh("mant"), self.fresh("exp")
        self.line(f"int32_t {expo};")
        self.line(
            f"const auto {mant} = pd_frexp(static_cast<{compute_type(x.dtype)}>({x}), &{expo});"
        )
        return Value(mant, x.dtype), Value(expo, torch.int32)

    def bucketize(
        self,
        values: Value,
        boundaries: tuple[str, sympy.Expr, sympy.Expr, sympy.Expr],
        boundary_indices: Value,
        indexing_dtype: torch.dtype,
        right: bool,
        sorter: tuple[str, sympy.Expr] | None,
        sorter_indices: Value | None,
    ) -> Value:
        name, length, _numel, stride = boundaries
        bdtype = self.spec.buffer(name).dtype
        pos = "pd_i"
        if sorter is not None and sorter_indices is not None:
            sname, sstride = sorter
            pos = f"static_cast<int64_t>({self.names[sname]}[{sorter_indices} + pd_i * ({self.index(sstride)})])"
        elem = from_storage(
            f"{self.names[name]}[{boundary_indices} + {pos} * ({self.index(stride)})]", bdtype
        )
        right_c = "true" if right else "false"
        expr = (
            f"pd_bucketize({values}, {self.index(length)}, {right_c}, "
            f"[&](int64_t pd_i) {{ return {elem}; }})"
        )
        self.state.no_simd = True
        return self.value(expr, indexing_dtype)

    def masked(self, mask: Value, body: Callable[[], Any], other: Any) -> Any:
        sub = IndentedBuffer()
        saved = self.cse.buffer
        self.cse.buffer = sub
        try:
            with self.cse.scope():
                result = body()
        finally:
            self.cse.buffer = saved
        results = result if isinstance(result, tuple) else (result,)
        outs: list[Value] = []
        for r in results:
            if r is None:
                continue
            out = Value(self.fresh("masked"), r.dtype)
            self.line(f"{compute_type(r.dtype)} {out.name} = {self.coerce(other, r.dtype)};")
            outs.append(out)
        self.line(f"if ({mask}) {{")
        for text in sub.getvalue().splitlines():
            self.line(f"    {text}" if text else "")
        for out, r in zip(outs, (r for r in results if r is not None), strict=True):
            self.line(f"    {out.name} = {self.coerce(r, r.dtype)};")
        self.line("}")
        if result is None:
            return None
        return tuple(outs) if isinstance(result, tuple) else outs[0]

    def local_declarations(self) -> list[str]:
        """C declarations of the `local` buffers: one variable per outer point, zeroed."""
        return [
            f"{compute_type(self.spec.buffer(name).dtype)} {var}{{}};"
            for name, var in self.locals.items()
        ]

    def storage_decl(self, name: str) -> str:
        buf = self.spec.buffer(name)
        const = "const " if buf.role == "in" else ""
        return f"{const}{storage_type(buf.dtype)}* __restrict__ {self.names[name]}"
