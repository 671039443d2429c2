"""`StageEmitter`: the stage-specific ops: lane-parallel reductions, and scans and sorts over the
reduction dim (values gathered into per-row arrays, then read back by a second pass).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import torch

from polyduct.codegen import CSE, IndentedBuffer, Value
from polyduct.errors import UnsupportedOp
from polyduct.ops import ReductionType
from polyduct_cpp.ctypes_map import compute_type
from polyduct_cpp.emitter import ASSIGN, Emitter

_ACC: Final[dict[str, str]] = {
    "sum": "pd_acc_sum",
    "prod": "pd_acc_prod",
    "max": "pd_acc_max",
    "min": "pd_acc_min",
    "any": "pd_acc_any",
    "xor_sum": "pd_acc_xor_sum",
    "argmax": "pd_acc_argmax",
    "argmin": "pd_acc_argmin",
    "welford_reduce": "pd_acc_welford",
    "welford_combine": "pd_acc_welford",
    "online_softmax_reduce": "pd_acc_softmax",
}
_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "argmax": ("i",),
    "argmin": ("i",),
    "welford_reduce": ("mean", "m2", "weight"),
    "welford_combine": ("mean", "m2", "weight"),
    "online_softmax_reduce": ("m", "s"),
}


class StageEmitter(Emitter):
    """An `Emitter` that also knows how to emit reduce, scan and sort stages."""

    lanes: int = 16

    def _require(self, kind: str, op: str) -> None:
        if self.state.kind != kind:
            raise UnsupportedOp(op, "cpp", f"called in a {self.state.kind!r} stage", self.spec.name)

    def reduction(
        self, dtype: torch.dtype, reduction_type: ReductionType, value: Any
    ) -> Value | tuple[Value, ...]:
        self._require("reduce", "reduction")
        acc = self.fresh("acc")
        is_arg = reduction_type in ("argmax", "argmin")
        first = value[0] if isinstance(value, tuple) else value
        elem_dtype = first.dtype if is_arg else dtype
        ctype = compute_type(elem_dtype)
        self.state.accs.append((f"{_ACC[reduction_type]}<{ctype}, {self.lanes}>", acc))
        if reduction_type == "welford_combine":
            parts = ", ".join(self.coerce(v, elem_dtype) for v in value)
            self.line(f"{acc}.add3(pd_l, {parts});")
        else:
            # a masked add: Welford cannot share one reciprocal weight across the lanes
            masked = reduction_type == "welford_reduce" and self.cse.buffer is not self.state.body
            add = "add_masked" if masked else "add"
            self.line(f"{acc}.{add}(pd_l, {self.coerce(value, elem_dtype)}, pd_rf);")
        fields = _FIELDS.get(reduction_type, ("v",))
        outs = []
        for name in fields:
            out_dtype = torch.int64 if is_arg else dtype
            var = self.fresh("red")
            self.state.post.line(f"const {compute_type(out_dtype)} {var} = {acc}.{name}[0];")
            outs.append(Value(var, out_dtype))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _gather(
        self, kind: str, dtypes: tuple[torch.dtype, ...], values: tuple[Value, ...]
    ) -> list[str]:
        if self.state.arrays:
            raise UnsupportedOp(kind, "cpp", "more than one scan/sort in a stage", self.spec.name)
        arrays = []
        for dtype, v in zip(dtypes, values, strict=True):
            arr = self.fresh("sv")
            self.state.arrays.append((arr, compute_type(dtype)))
            self.state.gather.append(f"{arr}[pd_rf] = {self.coerce(v, dtype)};")
            arrays.append(arr)
        # From here on the body is the second pass, run after the scan/sort.
        self.cse.buffer = self.state.post
        return arrays

    def scan(
        self,
        dtypes: tuple[torch.dtype, ...],
        combine_fn: Callable[[tuple[Value, ...], tuple[Value, ...]], tuple[Value, ...]],
        values: tuple[Value, ...],
    ) -> tuple[Value, ...]:
        self._require("scan", "scan")
        arrays = self._gather("scan", dtypes, values)
        acc = tuple(Value(f"{a}_acc", d) for a, d in zip(arrays, dtypes, strict=True))
        cur = tuple(Value(f"{a}_cur", d) for a, d in zip(arrays, dtypes, strict=True))
        buf = IndentedBuffer()
        saved = self.cse
        self.cse = CSE(buf, assign=ASSIGN, prefix=f"{arrays[0]}_c")
        try:
            result = combine_fn(acc, cur)
        finally:
            self.cse = saved
        lines = [
            f"const {compute_type(c.dtype)} {c.name} = {a}[pd_rf];"
            for c, a in zip(cur, arrays, strict=True)
        ]
        lines += buf.getvalue().splitlines()
        lines += [
            f"{a.name} = {self.coerce(r, a.dtype)};" for a, r in zip(acc, result, strict=True)
        ]
        lines += [f"{arr}[pd_rf] = {a.name};" for arr, a in zip(arrays, acc, strict=True)]
        self.state.combine = [t for t in lines if t]
        return self._results(arrays, dtypes, "pd_rf")

    def sort(
        self, dtypes: tuple[torch.dtype, ...], values: tuple[Value, ...], descending: bool
    ) -> tuple[Value, ...]:
        self._require("sort", "sort")
        arrays = self._gather("sort", dtypes, values)
        self.state.sort_descending = descending
        return self._results(arrays, dtypes, "pd_perm[pd_rf]")

    def _results(
        self, arrays: list[str], dtypes: tuple[torch.dtype, ...], at: str
    ) -> tuple[Value, ...]:
        outs = []
        for arr, dtype in zip(arrays, dtypes, strict=True):
            var = f"{arr}_out"
            self.line(f"const {compute_type(dtype)} {var} = {arr}[{at}];")
            outs.append(Value(var, dtype))
        return tuple(outs)
