"""Ops that touch memory, indexes, masks and random numbers."""

from __future__ import annotations

from collections.abc import Callable

import sympy
import torch

from polyduct.codegen import Value
from polyduct.ops import StoreMode
from polyduct_triton.kernel_runtime import flag_slot
from polyduct_triton.prim_ops import TritonEmitter
from polyduct_triton.values import (
    LOW_PRECISION,
    TL_DTYPE,
    compute_tl,
)

from .context import Check

V = Value


class TritonMemoryOps(TritonEmitter):
    """Loads, stores, index values, bounds checks, masked bodies and Philox random numbers."""

    @staticmethod
    def _names(index: sympy.Expr) -> set[str]:
        """Names of the symbols `index` depends on (index variables, sizes, indirect values)."""
        return {s.name for s in sympy.sympify(index).free_symbols}

    def _mask_for(self, index: sympy.Expr, name: str) -> str:
        parts = [self.ctx.mask()]
        for sym in sorted(self._names(index)):  # sorted: the same source whatever the hash seed
            check = self.ctx.indirect.get(sym)
            if check is not None:
                if check.buffer == "?":
                    check.buffer = name
                parts.append(f"{sym}_ok")
        return " & ".join(parts)

    def _at(self, ptr: str, index: sympy.Expr, mask: str) -> str:
        """Pointer block shaped like `mask`. An index moving along each axis the outer and
        reduction masks span already is; one that may not (a constant, a weight every row of a
        reduction reads, an indirect or predicated access, a variable of a dim of size 1, which
        is the constant 0) is broadcast by zeros of the mask's shape, which Triton's front end
        would otherwise build and fold for every access."""
        idx = self.ctx.index(index)
        names = self._names(index)
        parts = set(mask.split(" & "))
        axes = [self.ctx.outer] + ([self.ctx.reduction] if "rmask" in parts else [])
        if parts <= {"xmask", "rmask"} and names <= self.ctx.outer | self.ctx.reduction | \
                self.ctx.sizes and all(names & axis & self.ctx.blocks for axis in axes):
            return f"{ptr} + ({idx})"
        return f"{ptr} + ({idx}) + tl.zeros_like(({mask}).to(tl.int32))"

    def load(self, name: str, index: sympy.Expr) -> V:
        buf = self.ctx.spec.buffer(name)
        if buf.role == "local":
            return V(self.ctx.locals[name], buf.dtype)
        ptr, mask = self.ctx.arg(name), self._mask_for(index, name)
        expr = f"tl.load({self._at(ptr, index, mask)}, {mask}, other=0{self._eviction(index)})"
        if buf.dtype == torch.bool:
            expr = f"({expr} != 0)"
        elif buf.dtype == torch.bfloat16 and self.ctx.interpret:  # int16 bits (launcher)
            expr = f"_bf16_value({expr})"
        elif buf.dtype in LOW_PRECISION:
            expr = f"{expr}.to(tl.float32)"
        return self._v(expr, buf.dtype)

    def _eviction(self, index: sympy.Expr) -> str:
        """Keep in cache what every program reads: an index that no outer variable (nor an
        indirect one, which may) moves, as a norm's weight is read by each row."""
        names = self._names(index)
        if names & self.ctx.outer or any(n in self.ctx.indirect for n in names):
            return ""
        return ", eviction_policy='evict_last'"

    def _stored(self, value: V, dtype: torch.dtype) -> str:
        if dtype == torch.bool:
            return f"({value} != 0).to(tl.int1)"
        if dtype == torch.bfloat16 and self.ctx.interpret:
            return f"_bf16_bits({self._cast(value, torch.float32)})"
        if value.dtype == torch.bool:
            return f"{value}.to(tl.int8).to({TL_DTYPE[dtype]})"
        return f"{value}.to({TL_DTYPE[dtype]})"

    def store(self, name: str, index: sympy.Expr, value: V, mode: StoreMode = None) -> None:
        buf = self.ctx.spec.buffer(name)
        if buf.role == "local":
            self.ctx.stage.loop.line(f"{self.ctx.locals[name]} = {value}")
            return
        ptr = self.ctx.arg(name)
        val, mask = self._stored(value, buf.dtype), self._mask_for(index, name)
        if mode == "atomic_add" and buf.dtype.itemsize < 4 and buf.dtype != torch.float16:
            val = self._cast(value, torch.float32 if buf.dtype == torch.bfloat16 else buf.dtype)
            width, bf16 = 8 * buf.dtype.itemsize, buf.dtype == torch.bfloat16
            at = self._at(ptr, index, mask)
            line = f"_atomic_add_narrow({at}, {val}, {mask}, {ptr}, {width}, {bf16})"
        else:
            fn = "tl.atomic_add" if mode == "atomic_add" else "tl.store"
            line = f"{fn}({self._at(ptr, index, mask)}, {val}, {mask})"
        self.ctx.stage.loop.line(line)
        self.ctx.cse.invalidate()

    def store_reduction(self, name: str, index: sympy.Expr, value: V) -> None:
        buf = self.ctx.spec.buffer(name)
        post = self.ctx.stage.post if self.ctx.in_loop else self.ctx.stage.loop
        if buf.role == "local":
            var = self.ctx.locals.setdefault(name, self.ctx.fresh("local"))
            post.line(f"{var} = {self._held(value, buf.dtype)}")
            return
        at = self._at(self.ctx.arg(name), index, "xmask")
        post.line(f"tl.store({at}, {self._stored(value, buf.dtype)}, xmask)")

    def _held(self, value: V, dtype: torch.dtype) -> str:
        if dtype == torch.bool:
            return f"({value} != 0)"
        return self._cast(value, dtype)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> V:
        idx = f"(tl.zeros([1, 1], tl.int64) + ({self.ctx.index(expr)}))"
        return self._v(self._cast(V(idx, torch.int64), dtype), dtype)

    def value_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> V:
        return self.index_expr(expr, dtype)

    def indirect_indexing(
        self, x: V, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        var = self.ctx.fresh("ind")
        size_s = self.ctx.index(size)
        wrapped = f"tl.where({x} < 0, {x} + ({size_s}), {x})" if wrap_neg else str(x)
        self.ctx.stage.loop.line(f"{var} = ({wrapped}).to(tl.int64)")
        ok = f"(({var} >= 0) & ({var} < ({size_s})))" if check else "True"
        self.ctx.stage.loop.line(f"{var}_ok = {ok}")
        slot = Check(len(self.ctx.checks), size_s)
        if check:
            self.ctx.checks.append(slot)
            self._report(slot, var, f"{var}_ok")
        self.ctx.indirect[var] = slot
        return sympy.Symbol(var, integer=True)

    def _report(self, check: Check, value: str, ok: str) -> None:
        """Record a failed check in the error buffer (`kernel_runtime.flag_slot`): word 0 is
        cleared, then [flag, index, size] of the check's slot are set."""
        bad, zero = self.ctx.fresh("bad"), self.ctx.fresh("zb")
        base = f"err_ptr + {flag_slot(check.slot)}"
        loop = self.ctx.stage.loop
        loop.line(f"{bad} = (({ok}) == 0) & {self.ctx.mask()}")
        # Pointer, value and mask must share one shape: broadcast all three to the widest.
        loop.line(f"{zero} = {bad}.to(tl.int64) * 0 + ({value}) * 0")
        loop.line(f"{bad} = {bad} & ({zero} == 0)")
        loop.line(f"tl.store(err_ptr + {zero}, {zero}, {bad})")
        loop.line(f"tl.store({base} + {zero}, {zero} + 1, {bad})")
        loop.line(f"tl.store({base} + 1 + {zero}, {zero} + ({value}), {bad})")
        loop.line(f"tl.store({base} + 2 + {zero}, {zero} + ({check.size}), {bad})")

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        value = self.ctx.index(expr)
        check = Check(len(self.ctx.checks), self.ctx.index(size), f"<{expr}>")
        self.ctx.checks.append(check)
        conds = ([f"(({value}) >= 0)"] if lower else []) + (
            [f"(({value}) < ({check.size}))"] if upper else []
        )
        self._report(check, value, " & ".join(conds) or "True")

    def masked(self, mask: V, body: Callable[[], V], other: V) -> V:
        self.ctx.masks.append(str(mask))
        try:
            with self.ctx.cse.scope():
                result = body()
        finally:
            self.ctx.masks.pop()
        if result is None:
            return result
        if not isinstance(other, Value):
            other = self._c(other, result.dtype)
        return self._v(f"tl.where({mask}, {result}, {self._held(other, result.dtype)})", result.dtype)

    def device_assert_async(self, cond: V, msg: str) -> None:
        # Reported through the error buffer (not tl.device_assert, which the interpreter and
        # non-debug GPU builds skip); the launcher raises KernelAssertError with `msg`.
        check = Check(len(self.ctx.checks), "0", "<assert>", message=msg)
        self.ctx.checks.append(check)
        self._report(check, "0", f"({cond}) != 0")

    def load_seed(self, name: str, offset: V) -> V:
        return self._v(f"tl.load({self.ctx.arg(name)} + ({offset}))", torch.int64)

    def rand(self, seed: V, offset: V) -> V:
        return self._v(f"tl.rand({seed}, ({offset}).to(tl.uint32))", torch.float32)

    def randn(self, seed: V, offset: V) -> V:
        return self._v(f"tl.randn({seed}, ({offset}).to(tl.uint32))", torch.float32)

    def randint64(self, seed: V, offset: V, low: V, high: V) -> V:
        return self._v(f"_randint64({seed}, ({offset}).to(tl.uint32), {low}, {high})", torch.int64)

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
        name, length, numel, stride = boundaries
        ln, nl, st = (self.ctx.index(e) for e in (length, numel, stride))
        srt = "None" if sorter is None else self.ctx.arg(sorter[0])
        sst = "0" if sorter is None else self.ctx.index(sorter[1])
        sidx = "0" if sorter_indices is None else str(sorter_indices)
        expr = (
            f"_bucketize({values}, {self.ctx.arg(name)}, {ln}, {nl}, {st}, "
            f"{boundary_indices}, {right}, {srt}, {sst}, {sidx}, {self.ctx.mask()}, "
            f"{self.ctx.spec.buffer(name).dtype == torch.bfloat16 and self.ctx.interpret})"
        )
        return self._v(f"{expr}.to({compute_tl(indexing_dtype)})", indexing_dtype)
