"""Reductions, scans and sorts over the reduction dims of a Triton kernel.

Reductions run one block of RBLOCK elements per loop iteration. Sums, maxima and minima keep one
accumulator per lane of the block: each loop iteration folds its elements in lane by lane, and the
lanes are reduced to one value per row once, after the loop (one reduction across warps per row
rather than one per iteration). The other reductions reduce each block to one value per row with
Triton's builtins (tl.sum/tl.max/tl.min, which the interpreter maps to numpy) and combine it into a
loop-carried accumulator. When the reduction fits one block the loop runs once (persistent). NaN
and first-index rules follow docs/conventions.md.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from polyduct.codegen import Value
from polyduct.ops import ReductionType
from polyduct_triton.prim_ops import TritonEmitter
from polyduct_triton.values import (
    TL_DTYPE,
    compute_tl,
    is_float,
    literal,
    type_max,
    type_min,
)

V = Value
_FULL = "[XBLOCK, RBLOCK]"


class TritonReduceOps(TritonEmitter):
    """`reduction`, `scan` and `sort` for Triton kernels."""

    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: ReductionType, value: V
    ) -> V | tuple[V, ...]:
        table: dict[str, Callable[..., V | tuple[V, ...]]] = {
            "sum": self._red_sum,
            "prod": self._red_prod,
            "xor_sum": self._red_xor,
            "any": self._red_any,
            "max": self._red_max,
            "min": self._red_min,
            "argmax": self._red_argmax,
            "argmin": self._red_argmin,
            "welford_reduce": self._red_welford,
            "welford_combine": self._red_welford_combine,
            "online_softmax_reduce": self._red_softmax,
        }
        return table[reduction_type](dtype, value)

    def _acc(self, init: str, tl_type: str) -> str:
        self.ctx.block_merges = True
        name = self.ctx.fresh("acc")
        self.ctx.stage.pre.line(f"{name} = tl.full([XBLOCK, 1], {init}, {tl_type})")
        return name

    def _lanes(self, init: str, tl_type: str) -> str:
        """A per-lane accumulator: one value per element of the block, folded across lanes in
        the stage's post section."""
        name = self.ctx.fresh("lanes")
        self.ctx.stage.pre.line(f"{name} = tl.full({_FULL}, {init}, {tl_type})")
        return name

    def _full(self, value: V, dtype: torch.dtype, other: str) -> str:
        """`value` as `dtype`, broadcast over the block, with `other` in masked-off lanes."""
        cast = self._cast(value, dtype) if value.dtype != dtype else str(value)
        mask = self.ctx.mask()
        return self._v(f"tl.where({mask}, tl.broadcast_to({cast}, {_FULL}), {other})", dtype).name

    def _line(self, text: str) -> None:
        self.ctx.stage.loop.line(text)

    def _red_sum(self, dtype: torch.dtype, value: V) -> V:
        tl_type = compute_tl(dtype)
        lanes = self._lanes("0", tl_type)
        vals = self._full(value, dtype, "0")
        self._line(f"{lanes} = {lanes} + {vals}")
        return self._post_value(f"tl.sum({lanes}, 1, keep_dims=True).to({tl_type})", dtype)

    def _red_combine(self, dtype: torch.dtype, value: V, ident: str, fn: str, op: str) -> V:
        tl_type = compute_tl(dtype)
        acc = self._acc(ident, tl_type)
        vals = self._full(value, dtype, ident)
        self._line(f"{acc} = {acc} {op} tl.reduce({vals}, 1, {fn}, keep_dims=True).to({tl_type})")
        return V(acc, dtype)

    def _red_prod(self, dtype: torch.dtype, value: V) -> V:
        if dtype == torch.bool:
            return self._red_bool(value, "tl.min", "1")
        return self._red_combine(dtype, value, "1", "_prod_combine", "*")

    def _red_xor(self, dtype: torch.dtype, value: V) -> V:
        return self._red_combine(dtype, value, "0", "_xor_combine", "^")

    def _red_bool(self, value: V, fn: str, init: str) -> V:
        acc = self._acc(init, "tl.int8")
        vals = self._full(V(f"({value} != 0).to(tl.int8)", torch.int8), torch.int8, init)
        both = "tl.maximum" if fn == "tl.max" else "tl.minimum"
        self._line(f"{acc} = {both}({acc}, {fn}({vals}, 1, keep_dims=True).to(tl.int8))")
        return self._post_value(f"({acc} != 0)", torch.bool)

    def _red_any(self, dtype: torch.dtype, value: V) -> V:
        acc = self._acc("0", "tl.int8")
        vals = self._full(V(f"({value} != 0).to(tl.int8)", torch.int8), torch.int8, "0")
        self._line(f"{acc} = tl.maximum({acc}, tl.max({vals}, 1, keep_dims=True).to(tl.int8))")
        return self._post_value(f"({acc} != 0)", dtype)

    def _post_value(self, expr: str, dtype: torch.dtype) -> V:
        name = self.ctx.fresh("red")
        self.ctx.stage.post.line(f"{name} = {expr}")
        return V(name, dtype)

    def _block_extreme(self, vals: str, dtype: torch.dtype, big: bool) -> tuple[str, str]:
        """Row-wise max (big) or min of `vals`, NaN if the row has a NaN; and the NaN flag."""
        fn, fill = ("tl.max", type_min(dtype)) if big else ("tl.min", type_max(dtype))
        fill_s = f"tl.full([1, 1], {literal(fill, dtype)}, {compute_tl(dtype)})"
        if not is_float(dtype):
            # Compiled tl.max/tl.min widen 8/16-bit integers to int32: narrow back.
            ext = f"{fn}({vals}, 1, keep_dims=True).to({compute_tl(dtype)})"
            return self._v(ext, dtype).name, "False"
        isn = self._v(f"(({vals} != {vals}) & {self.ctx.mask()})", torch.bool).name
        ext = self._v(f"{fn}(tl.where({isn}, {fill_s}, {vals}), 1, keep_dims=True)", dtype).name
        has = self._v(f"(tl.max({isn}.to(tl.int8), 1, keep_dims=True) > 0)", torch.bool).name
        return self._v(f"tl.where({has}, float(\"nan\"), {ext})", dtype).name, isn

    def _red_extreme(self, dtype: torch.dtype, value: V, big: bool) -> V:
        if dtype == torch.bool:
            return self._red_bool(value, "tl.max" if big else "tl.min", "0" if big else "1")
        tl_type = compute_tl(dtype)
        fill = literal(type_min(dtype) if big else type_max(dtype), dtype)
        lanes = self._lanes(fill, tl_type)
        vals = self._full(value, dtype, f"tl.full([1, 1], {fill}, {tl_type})")
        which = "max" if big else "min"
        nan = ", propagate_nan=tl.PropagateNan.ALL" if is_float(dtype) else ""
        self._line(f"{lanes} = tl.{which}imum({lanes}, {vals}{nan})")  # a NaN lane stays NaN
        # Compiled tl.max/tl.min skip NaN and widen 8/16-bit integers to int32.
        row = f"tl.{which}({lanes}, 1, keep_dims=True).to({tl_type})"
        if is_float(dtype) and not self.ctx.interpret:
            # One reduction across warps with a NaN-propagating combine (a NaN flag reduced
            # beside the row cost a second: 336 -> 312 SASS instructions, 5 -> 3 barriers, in
            # float32 softmax's kernel for sm_90).
            row = f"tl.reduce({lanes}, 1, _{which}_nan_combine, keep_dims=True)"
        elif is_float(dtype):
            # The interpreter runs a Python combine element by element: numpy reductions here
            # (tl.max is numpy's nanmax), with the NaN flag beside them.
            has_nan = f"tl.max(({lanes} != {lanes}).to(tl.int8), 1, keep_dims=True) > 0"
            row = f"tl.where({has_nan}, float(\"nan\"), {row})"
        return self._post_value(row, dtype)

    def _red_max(self, dtype: torch.dtype, value: V) -> V:
        return self._red_extreme(dtype, value, True)

    def _red_min(self, dtype: torch.dtype, value: V) -> V:
        return self._red_extreme(dtype, value, False)

    def _red_arg(self, value: V, big: bool) -> V:
        src = torch.int8 if value.dtype == torch.bool else value.dtype
        fill = literal(type_min(src) if big else type_max(src), src)
        aval = self._acc(fill, compute_tl(src))
        aidx = self._acc(str(2**63 - 1), "tl.int64")
        vals = self._full(value, src, f"tl.full([1, 1], {fill}, {compute_tl(src)})")
        blk, isn = self._block_extreme(vals, src, big)
        hit = f"({vals} == {blk})"
        if is_float(src):
            hit = f"tl.where({blk} != {blk}, {isn}, {hit})"
        ridx = f"tl.broadcast_to(rindex.to(tl.int64), {_FULL})"
        hit_idx = f"tl.where({hit} & {self.ctx.mask()}, {ridx}, {2**63 - 1})"
        bidx = self._v(f"tl.min({hit_idx}, 1, keep_dims=True)", torch.int64).name
        cmp = ">" if big else "<"
        take = f"({blk} {cmp} {aval}) | (({blk} == {aval}) & ({bidx} < {aidx}))"
        if is_float(src):
            take += f" | (({blk} != {blk}) & ({aval} == {aval}))"
        self._line(f"{aidx}, {aval} = tl.where({take}, {bidx}, {aidx}), "
                   f"tl.where({take}, {blk}, {aval})")
        return V(aidx, torch.int64)

    def _red_argmax(self, dtype: torch.dtype, value: V) -> V:
        return self._red_arg(value, True)

    def _red_argmin(self, dtype: torch.dtype, value: V) -> V:
        return self._red_arg(value, False)

    def _welford_merge(self, acc: tuple[str, str, str], blk: tuple[str, str, str]) -> None:
        (am, a2, aw), (bm, b2, bw) = acc, blk
        self._line(f"_n = {aw} + {bw}")
        self._line("_ns = tl.where(_n == 0, 1.0, _n)")
        self._line(f"_d = {bm} - {am}")
        # weights before products, so an empty accumulator or a mean near the range's end
        # adds 0 rather than inf * 0
        self._line(f"{am}, {a2}, {aw} = {am} + _d * ({bw} / _ns), "
                   f"{a2} + {b2} + _d * ({aw} * ({bw} / _ns)) * _d, _n")

    def _welford_accs(self, dtype: torch.dtype) -> tuple[str, str, str]:
        tl_type = compute_tl(dtype)
        return self._acc("0", tl_type), self._acc("0", tl_type), self._acc("0", tl_type)

    def _red_welford(self, dtype: torch.dtype, value: V) -> tuple[V, V, V]:
        accs = self._welford_accs(dtype)
        vals = self._full(value, dtype, "0")
        cnt = self._block_count(dtype)
        safe = f"tl.where({cnt} == 0, 1, {cnt})"
        total = self._v(f"tl.sum({vals}, 1, keep_dims=True)", dtype).name
        # A sum past the dtype's range whose mean is in range (eager's Welford never overflows
        # there) is summed again scaled by 2**-32, which rounds as the unscaled sum would.
        scaled = self._v(f"tl.sum({vals} * {2.0**-32!r}, 1, keep_dims=True) / {safe} * {2.0**32!r}",
                         dtype).name
        overflowed = f"(tl.abs({total}) == float(\"inf\")) & (tl.abs({scaled}) < float(\"inf\"))"
        mean = self._v(f"tl.where({overflowed}, {scaled}, {total} / {safe})", dtype)
        dev = f"tl.where({self.ctx.mask()}, {vals} - {mean}, 0)"
        m2 = self._v(f"tl.sum({dev} * {dev}, 1, keep_dims=True)", dtype).name
        self._welford_merge(accs, (mean.name, m2, cnt))
        return V(accs[0], dtype), V(accs[1], dtype), V(accs[2], dtype)

    def _block_count(self, dtype: torch.dtype) -> str:
        """Elements of this block of a row: rmask is a prefix of the block, so the count is
        closed-form (one reduction fewer than summing ones); under extra predicates, a sum."""
        if self.ctx.masks or not self.ctx.in_loop:
            w = self._full(self._c(1, dtype), dtype, "0")
            return self._v(f"tl.sum({w}, 1, keep_dims=True)", dtype).name
        live = "tl.maximum(tl.minimum(rnumel - roffset, RBLOCK), 0)"
        return self._v(f"tl.full([XBLOCK, 1], 0, {compute_tl(dtype)}) + {live}", dtype).name

    def _red_welford_combine(self, dtype: torch.dtype, value: tuple[V, V, V]) -> tuple[V, V, V]:
        accs = self._welford_accs(dtype)
        mean_v, m2_v, w_v = (self._full(v, dtype, "0") for v in value)
        cnt = self._v(f"tl.sum({w_v}, 1, keep_dims=True)", dtype).name
        safe = f"tl.where({cnt} == 0, 1, {cnt})"
        mean = self._v(f"tl.sum({w_v} * {mean_v}, 1, keep_dims=True) / {safe}", dtype).name
        dev = f"({mean_v} - {mean})"
        m2 = self._v(f"tl.sum({m2_v} + {w_v} * {dev} * {dev}, 1, keep_dims=True)", dtype).name
        self._welford_merge(accs, (mean, m2, cnt))
        return V(accs[0], dtype), V(accs[1], dtype), V(accs[2], dtype)

    def _red_softmax(self, dtype: torch.dtype, value: V) -> tuple[V, V]:
        tl_type = compute_tl(dtype)
        amax, asum = self._acc('float("-inf")', tl_type), self._acc("0", tl_type)
        vals = self._full(value, dtype, 'float("-inf")')
        bmax, _ = self._block_extreme(vals, dtype, True)
        bsub = f"tl.where({bmax} == float(\"-inf\"), 0.0, {bmax})"
        bsum = self._v(f"tl.sum(tl.exp({vals} - {bsub}), 1, keep_dims=True)", dtype).name
        self._line(f"_m = tl.where(({bmax} > {amax}) | ({bmax} != {bmax}), {bmax}, {amax})")
        self._line("_ms = tl.where(_m == float(\"-inf\"), 0.0, _m)")
        self._line(f"{asum} = {asum} * tl.exp({amax} - _ms) + {bsum} * tl.exp({bmax} - _ms)")
        self._line(f"{amax} = _m")
        return V(amax, dtype), V(asum, dtype)

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[V, ...], tuple[V, ...]], tuple[V, ...]],
        values: tuple[V, ...],
    ) -> tuple[V, ...]:
        helper = self._trace_combine(dtypes, combine_fn)
        full = [f"tl.broadcast_to({v}, {_FULL})" for v in values]
        result = self.ctx.fresh("scan")
        args = ", ".join(full) + ","
        self._line(f"{result} = tl.associative_scan(({args}), 1, {helper})")
        return tuple(V(f"{result}[{i}]", d) for i, d in enumerate(dtypes))

    def _trace_combine(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[V, ...], tuple[V, ...]], tuple[V, ...]],
    ) -> str:
        from polyduct.codegen import CSE, IndentedBuffer

        name = self.ctx.fresh("_combine")
        buf = IndentedBuffer()
        saved, saved_shape = self.ctx.cse, self.ctx.const_shape
        self.ctx.cse, self.ctx.const_shape = CSE(buf, prefix="c"), "[]"
        try:
            a = tuple(V(f"a{i}", d) for i, d in enumerate(dtypes))
            b = tuple(V(f"b{i}", d) for i, d in enumerate(dtypes))
            out = combine_fn(a, b)
        finally:
            self.ctx.cse, self.ctx.const_shape = saved, saved_shape
        params = ", ".join([v.name for v in a] + [v.name for v in b])
        lines = [f"@triton.jit\ndef {name}({params}):"]
        lines += [f"    {line}" for line in buf.getvalue().splitlines() if line]
        lines.append(f"    return {', '.join(str(v) for v in out)},")
        self.ctx.helpers.append("\n".join(lines))
        return name

    def sort(
        self,
        dtypes: tuple[torch.dtype, ...],
        values: tuple[V, ...],
        stable: bool,
        descending: bool,
    ) -> tuple[V, ...]:
        # Rank sort: every lane counts the lanes that sort before it (NaN largest, ties by
        # position, so the result is stable), then each output slot gathers the lane of its rank.
        key = values[0]
        k = self._v(f"tl.broadcast_to({self._as_sort_key(key)}, {_FULL})", key.dtype).name
        rank = self.ctx.fresh("rank")
        self._line(f"{rank} = _sort_rank({k}, rmask, {descending}, {is_float(key.dtype)})")
        out = []
        for value, dtype in zip(values, dtypes, strict=True):
            full = self._v(f"tl.broadcast_to({value}, {_FULL})", value.dtype).name
            out.append(self._v(self._gather(full, value.dtype, rank, dtype), dtype))
        return tuple(out)

    def _as_sort_key(self, key: V) -> str:
        return f"{key}.to(tl.int8)" if key.dtype == torch.bool else str(key)

    def _gather(self, full: str, src: torch.dtype, rank: str, dtype: torch.dtype) -> str:
        if src == torch.bool:
            return f"(_rank_gather({full}.to(tl.int8), {rank}) != 0)"
        if is_float(src):
            bits = "tl.int64" if src == torch.float64 else "tl.int32"
            ftype = compute_tl(src)
            inner = f"_rank_gather({full}.to({bits}, bitcast=True), {rank})"
            return f"{inner}.to({bits}).to({ftype}, bitcast=True)"
        return f"_rank_gather({full}, {rank}).to({TL_DTYPE[src]})"
