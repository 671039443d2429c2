"""Memory, indexing, reduction, scan, sort, masking and random ops: they record into a KernelTrace."""

from __future__ import annotations

from collections.abc import Callable

import sympy
import torch

from polyduct.codegen import Value
from polyduct.indexing import index_vars
from polyduct.ops import ReductionType, StoreMode
from polyduct_halide.cpu import vectorisation
from polyduct_halide.hlreduce import REDUCTIONS
from polyduct_halide.trace import CHECK_MAGIC, Check, Collective, KernelTrace, Reduction
from polyduct_halide.values import Emitter, dtype_name, literal


def func_ref(func: str, n_outer: int, element: int, size: int, extra: str = "") -> str:
    """Source of `func[x0, ..., extra][element]` inside a stage function."""
    args = [f"x{i}" for i in range(n_outer)] + ([extra] if extra else [])
    call = f"{func}[{', '.join(args)}]" if args else f"{func}[()]"
    return f"_m.ex({call}[{element}])" if size > 1 else f"_m.ex({call})"


def _dt(dtype: torch.dtype) -> str:
    return f'"{dtype_name(dtype)}"'


class HalideStructuralOps:
    """Ops that touch buffers or the iteration space; needs a `t` KernelTrace."""

    t: KernelTrace

    @property
    def em(self) -> Emitter:
        return self.t.stage.em

    def _index(self, index: sympy.Expr, buffer: str, extent: str) -> str:
        code = self.t.expr(index)
        names = sorted(s.name for s in sympy.sympify(index).free_symbols)
        indirect = [n for n in names if n in self.t.indirect]
        mask = self.t.mask()
        if not indirect and mask is None:
            return f"hl.unsafe_promise_clamped({code}, 0, {extent} - 1)"
        out = f"hl.clamp({code}, 0, {extent} - 1)"
        for name in indirect:
            raw, cond, size, check = self.t.indirect[name]
            if not check:
                continue
            cid = self.t.add_check(Check(buffer))
            full = cond if mask is None else f"hl.logical_not({mask}) | ({cond})"
            out = (
                f"_rt.require(target, {full}, {out}, hl.i32({CHECK_MAGIC}), hl.i32({cid}), "
                f"hl.cast(hl.Int(64), {raw}), hl.cast(hl.Int(64), {size}))"
            )
        return self.em.emit(out, torch.int32).name

    def load(self, name: str, index: sympy.Expr) -> Value:
        buf = self.t.spec.buffer(name)
        if buf.role == "local":
            func, element, size = self.t.locals[name].split("|")
            ref = func_ref(func, len(self.t.spec.ranges), int(element), int(size))
            return self.em.emit(ref, buf.dtype)
        arg = self.t.names[name]
        self.t.used_args.add(arg)
        self.t.stage.loads.append(sympy.sympify(index))
        func = f"{arg}_out"
        if any(func in st.stores for st in self.t.stages):
            # What an earlier member stored into a buffer that held data before the kernel:
            # read from its output Func, so that Halide realises that output first (from the
            # input it would read the data from before the kernel, where another output is
            # realised before it: `x.unfold(...).neg_()` then read; halide seed 9103, 8586).
            idx = self._index(index, name, f"{func}.output_buffer().dim(0).extent()")
            return self.em.emit(f"_m.decode({func}[{idx}], {_dt(buf.dtype)})", buf.dtype)
        idx = self._index(index, name, f"{arg}.dim(0).extent()")
        return self.em.emit(f"_m.load({arg}, {idx}, {_dt(buf.dtype)})", buf.dtype)

    def store(self, name: str, index: sympy.Expr, value: Value, mode: StoreMode = None) -> None:
        buf = self.t.spec.buffer(name)
        func = f"{self.t.names[name]}_out"
        idx = self._index(index, name, f"{func}.output_buffer().dim(0).extent()")
        val = self.t.guard(value).name
        atomic = mode == "atomic_add"
        if atomic:
            val = f"_m.decode({func}[{idx}], {_dt(buf.dtype)}) + {val}"
        encoded = f"_m.encode({val}, {_dt(buf.dtype)})"
        if self.t.mask() is not None:  # a masked store leaves memory as it is
            encoded = f"hl.select({self.t.mask()}, {encoded}, {func}[{idx}])"
        self.em.lines.append(f"S.append(({func}, {idx}, {encoded}, {atomic}))")
        self.t.stage.stores.append(func)

    def store_reduction(self, name: str, index: sympy.Expr, value: Value) -> None:
        func, element, size = value.name.lstrip("@").split("|")
        buf = self.t.spec.buffer(name)
        if buf.role == "local":
            self.t.locals[name] = value.name.lstrip("@")
            return
        ref = func_ref(func, len(self.t.spec.ranges), int(element), int(size))
        self.t.stage.reduction_stores.append((self.t.names[name], index, ref, buf.dtype))

    def reduction(
        self,
        dtype: torch.dtype,
        src_dtype: torch.dtype,
        reduction_type: ReductionType,
        value: Value | tuple[Value, ...],
    ) -> Value | tuple[Value, ...]:
        values = list(value) if isinstance(value, tuple) else [value]
        name = self.t.fresh("red")
        codes = [self.t.guard(v).name for v in values]
        spec = self.t.spec
        outer = index_vars("x", len(spec.ranges))
        inner = index_vars("r", len(spec.reduction_ranges))[-1:]
        vector = vectorisation(self.t.stage.loads, outer, inner[0] if inner else None)
        self.t.stage.reductions.append(
            Reduction(name, list(self.em.lines), codes, reduction_type, dtype, vector)
        )
        out_dtype = torch.int64 if reduction_type in ("argmax", "argmin") else dtype
        results = tuple(
            Value(f"@{name}[{o}]|0|1", out_dtype) for o in range(REDUCTIONS[reduction_type][1])
        )
        return results if len(results) > 1 else results[0]

    def _collective(self, kind: str, values: tuple[Value, ...], **extra: object) -> Collective:
        name = self.t.fresh(kind)
        col = Collective(name, kind, list(self.em.lines), [v.name for v in values])
        for key, val in extra.items():
            setattr(col, key, val)
        self.t.stage.collectives.append(col)
        return col

    def _results(self, col: Collective, dtypes: tuple[torch.dtype, ...]) -> tuple[Value, ...]:
        pos = (
            "_rt.flat(["
            + ", ".join(f"r{i}" for i in range(len(self.t.spec.reduction_ranges)))
            + "], RR)"
        )
        n = len(dtypes)
        nx = len(self.t.spec.ranges)
        return tuple(
            self.em.emit(func_ref(col.name, nx, j, n, pos), d) for j, d in enumerate(dtypes)
        )

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[Value, ...], tuple[Value, ...]], tuple[Value, ...]],
        values: tuple[Value, ...],
    ) -> tuple[Value, ...]:
        stage = self.t.stage
        outer, sub = stage.em, Emitter(self.t.counter)
        left = tuple(Value(f"a[{i}]", d) for i, d in enumerate(dtypes))
        right = tuple(Value(f"b[{i}]", d) for i, d in enumerate(dtypes))
        stage.em = sub
        try:
            combined = combine_fn(left, right)
        finally:
            stage.em = outer
        body = [*sub.lines, f"return ({', '.join(v.name for v in combined)},)"]
        col = self._collective("scan", values, combine=body)
        return self._results(col, dtypes)

    def sort(
        self,
        dtypes: tuple[torch.dtype, ...],
        values: tuple[Value, ...],
        stable: bool,
        descending: bool,
    ) -> tuple[Value, ...]:
        # Rank counting breaks ties by position, so every sort is stable.
        col = self._collective("sort", values, descending=descending)
        return self._results(col, dtypes)

    def masked(self, mask: Value, body: Callable[[], Value], other: Value) -> Value:
        self.t.masks.append(mask.name)
        try:
            result = body()
        finally:
            self.t.masks.pop()
        if not isinstance(other, Value):
            other = self.em.emit(literal(other, result.dtype), result.dtype)
        return self.em.emit(f"hl.select({mask}, {result}, {other})", result.dtype)

    def indirect_indexing(
        self, x: Value, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        sz = self.em.emit(f"hl.cast({x}.type(), {self.t.expr(size)})", x.dtype).name
        wrapped = x.name
        if wrap_neg and x.dtype not in (torch.uint8, torch.bool):
            wrapped = self.em.emit(f"hl.select({x} < 0, {x} + {sz}, {x})", x.dtype).name
        cond = self.em.emit(f"({wrapped} >= 0) & ({wrapped} < {sz})", torch.bool).name
        name = self.t.fresh("ind")
        self.em.lines.append(f"{name}_raw = {wrapped}")
        self.em.lines.append(f"{name} = hl.cast(hl.Int(32), hl.clamp({wrapped}, 0, {sz} - 1))")
        self.t.add_indirect(name, (x.name, cond, sz, check))
        return sympy.Symbol(name, integer=True)

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        idx, sz = self.t.expr(expr, raw=True), self.t.expr(size)
        parts = ([f"({idx} >= 0)"] if lower else []) + ([f"({idx} < {sz})"] if upper else [])
        if not parts:
            return
        cid = self.t.add_check(Check("<check_bounds>"))
        cond = " & ".join(parts)
        mask = self.t.mask()
        if mask is not None:
            cond = f"hl.logical_not({mask}) | ({cond})"
        args = f"hl.cast(hl.Int(64), {idx}), hl.cast(hl.Int(64), {sz})"
        self.t.pending.append((cond, cid, args))

    def device_assert_async(self, cond: Value, msg: str) -> None:
        cid = self.t.add_check(Check("", message=msg))
        self.t.pending.append((cond.name, cid, "hl.i64(-1), hl.i64(-1)"))

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Value:
        return self.em.emit(f"_m.convert({self.t.expr(expr)}, {_dt(dtype)})", dtype)

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Value:
        return self.index_expr(expr, dtype)

    def constant(self, value: bool | float, dtype: torch.dtype) -> Value:
        return self.em.emit(literal(value, dtype), dtype)

    def load_seed(self, name: str, offset: Value) -> Value:
        arg = self.t.names[name]
        self.t.used_args.add(arg)
        buf = self.t.spec.buffer(name)
        idx = f"hl.clamp(hl.cast(hl.Int(32), {offset}), 0, {arg}.dim(0).extent() - 1)"
        value = f"_m.load({arg}, {idx}, {_dt(buf.dtype)})"
        return self.em.emit(f"hl.cast(hl.Int(64), {value})", torch.int64)

    def rand(self, seed: Value, offset: Value) -> Value:
        return self.em.emit(f"_m.rand({seed}, {offset})", torch.float32)

    def randn(self, seed: Value, offset: Value) -> Value:
        return self.em.emit(f"_m.randn({seed}, {offset})", torch.float32)

    def randint64(self, seed: Value, offset: Value, low: Value, high: Value) -> Value:
        return self.em.emit(f"_m.randint64({seed}, {offset}, {low}, {high})", torch.int64)

    def bucketize(
        self,
        values: Value,
        boundaries: tuple[str, sympy.Expr, sympy.Expr, sympy.Expr],
        boundary_indices: Value,
        indexing_dtype: torch.dtype,
        right: bool,
        sorter: tuple[str, sympy.Expr] | None = None,
        sorter_indices: Value | None = None,
    ) -> Value:
        name, length, numel, stride = boundaries
        barg = self.t.names[name]
        self.t.used_args.add(barg)
        bdt = _dt(self.t.spec.buffer(name).dtype)
        steps = str(int(length)) if sympy.sympify(length).is_Integer else "None"
        parts = [f"{barg}, {bdt}", *(self.t.expr(e) for e in (length, numel, stride)), steps]
        sort_part = "None, None, None"
        if sorter is not None:
            sarg = self.t.names[sorter[0]]
            self.t.used_args.add(sarg)
            sdt = _dt(self.t.spec.buffer(sorter[0]).dtype)
            sort_part = f"({sarg}, {sdt}), {self.t.expr(sorter[1])}, {sorter_indices}"
        call = (
            f"_m.bucketize({values}, {', '.join(parts)}, {boundary_indices}, {right}, "
            f"{sort_part}, {_dt(indexing_dtype)})"
        )
        return self.em.emit(call, indexing_dtype)
