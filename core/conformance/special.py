"""Case builders for ops whose arguments are not all tensors: casts, memory, indexing, constants.

Each `SpecialCase` names its op, category, domain and a builder `dtype -> [Probe]`. Reductions,
scans, sorts and random ops live in `polyduct.conformance.reductions` and `.randomness`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from polyduct.conformance.inputs import (
    ALL,
    FLOATS,
    INDEX,
    INTS,
    SHAPE,
    as_layout,
    generate,
    seed_of,
)
from polyduct.conformance.probe import (
    NO_ACCESS,
    Access,
    BodyBase,
    OpBody,
    Probe,
    access,
    dtype_name,
    out_like,
)
from polyduct.conformance.tolerance import EXACT, Tol
from polyduct.errors import KernelIndexError
from polyduct.ops import OpHandler

Idx = Sequence[sympy.Expr]


@dataclass(frozen=True)
class SpecialCase:
    """An op with its own probe builder."""

    op: str
    category: str
    domain: tuple[torch.dtype, ...]
    build: Callable[[torch.dtype], list[Probe]]


def _probe(
    op: str,
    dtype: torch.dtype,
    category: str,
    variant: str,
    body: BodyBase,
    inputs: dict[str, torch.Tensor],
    want: dict[str, torch.Tensor],
    **kw: Any,
) -> Probe:
    ranges = kw.pop("ranges", SHAPE)
    outputs = kw.pop("outputs", None) or {
        n: out_like(tuple(t.shape), t.dtype)
        for n, t in want.items()
        if n not in kw.get("inouts", ())
    }
    return Probe(
        op, dtype, category, variant, ranges, (("outer", body),), inputs, outputs, want, **kw
    )


def _cast_input(src: torch.dtype, dst: torch.dtype) -> torch.Tensor:
    seed = seed_of("to_dtype", src, dst)
    if src in FLOATS and dst in INTS:
        x = generate("to_int_range", src, SHAPE, seed)
        return x.abs() if dst == torch.uint8 else x
    return generate("any", src, SHAPE, seed)


def _to_dtype(dtype: torch.dtype) -> list[Probe]:
    probes = []
    for dst in ALL:
        x = as_layout(_cast_input(dtype, dst), "transposed")
        want = {"o0": x.to(dst)}
        body = OpBody(
            op="to_dtype",
            args=(access("a0", x),),
            outs=(Access("o0", (27, 1)),),
            params=(dst,),
            kwargs=(("src_dtype", dtype),),
        )
        tol = Tol(ulps=1) if dst in FLOATS and dtype in FLOATS else EXACT
        probes.append(
            _probe(
                "to_dtype", dtype, "dtype", f"to_{dtype_name(dst)}", body, {"a0": x}, want, tol=tol
            )
        )
    if dtype in (torch.float16, torch.bfloat16):
        probes.append(_round_computed(dtype))
    return probes


@dataclass(frozen=True)
class RoundComputedBody(BodyBase):
    """o0[x] = to_dtype(a0[x] * a0[x], dtype) * a1[x]: a 16-bit value computed by an op is held
    unrounded, and `to_dtype` to its own dtype rounds it (how the lowering rounds an op's result
    as eager does, docs/conventions.md)."""

    dtype: torch.dtype = torch.float16

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        a = ops.load(self.buf("a0"), x[0])
        square = ops.to_dtype(ops.mul(a, a), self.dtype, src_dtype=self.dtype)
        ops.store(self.buf("o0"), x[0], ops.mul(square, ops.load(self.buf("a1"), x[0])))


def _round_computed(dtype: torch.dtype) -> Probe:
    seed = seed_of("to_dtype", dtype, "computed")
    # squares that overflow the dtype (inf when rounded, finite float32 otherwise), then halved
    big = 300.0 if dtype == torch.float16 else 1.5e19
    a = generate("any", dtype, (64,), seed).nan_to_num(0.0, 1.0, -1.0)
    a[:16] = torch.linspace(0.8, 1.2, 16).to(dtype) * big
    b = torch.full((64,), 0.5, dtype=dtype)
    b[48:] = generate("any", dtype, (16,), seed + 1).nan_to_num(0.0, 2.0, -2.0)
    want = {"o0": (a * a) * b}
    return _probe(
        "to_dtype", dtype, "dtype", "round_computed", RoundComputedBody(dtype=dtype),
        {"a0": a, "a1": b}, want, ranges=(64,), tol=EXACT,
    )


_BITCAST = {
    torch.float32: (torch.int32,),
    torch.int32: (torch.float32,),
    torch.float64: (torch.int64,),
    torch.int64: (torch.float64,),
    torch.float16: (torch.int16, torch.bfloat16),
    torch.bfloat16: (torch.int16, torch.float16),
    torch.int16: (torch.float16, torch.bfloat16),
    torch.int8: (torch.uint8,),
    torch.uint8: (torch.int8,),
}


def _bitcast(dtype: torch.dtype) -> list[Probe]:
    probes = []
    for dst in _BITCAST[dtype]:
        x = generate("any", dtype, SHAPE, seed_of("bitcast", dtype, dst))
        body = OpBody(
            op="to_dtype_bitcast",
            args=(access("a0", x),),
            outs=(Access("o0", (27, 1)),),
            params=(dst, dtype),
        )
        probes.append(
            _probe(
                "to_dtype_bitcast",
                dtype,
                "dtype",
                f"to_{dtype_name(dst)}",
                body,
                {"a0": x},
                {"o0": x.view(dst)},
            )
        )
    return probes


@dataclass(frozen=True)
class CopyBody(BodyBase):
    """out[x] = load(src)[x]: exercises `load` and `store` addressing on strided layouts."""

    src: Access = NO_ACCESS
    dst: Access = NO_ACCESS

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        self.store(ops, self.dst, x, self.load(ops, self.src, x))


def _copies(op: str, dtype: torch.dtype) -> list[Probe]:
    probes = []
    pairs = (
        (("sliced", "contiguous"), ("transposed", "contiguous"))
        if op == "load"
        else (("contiguous", "transposed"), ("sliced", "transposed"))
    )
    for src_layout, dst_layout in pairs:
        x = as_layout(generate("any", dtype, SHAPE, seed_of(op, dtype)), src_layout)
        out = out_like(SHAPE, dtype, dst_layout)
        body = CopyBody(src=access("a0", x), dst=access("o0", out))
        probes.append(
            _probe(
                op,
                dtype,
                "memory",
                f"{src_layout}->{dst_layout}",
                body,
                {"a0": x},
                {"o0": x.clone()},
                outputs={"o0": out},
            )
        )
    return probes


@dataclass(frozen=True)
class ScatterAddBody(BodyBase):
    """acc[idx[x]] += val[x] with `store(..., mode="atomic_add")` and duplicate indices."""

    size: int = 0

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        i = ops.indirect_indexing(ops.load(self.buf("idx"), x[0]), sympy.Integer(self.size))
        ops.store(self.buf("acc"), i, ops.load(self.buf("val"), x[0]), mode="atomic_add")


def _store(dtype: torch.dtype) -> list[Probe]:
    probes = _copies("store", dtype)
    if dtype == torch.bool:
        return probes
    n, size = 101, 13
    gen = "small_int" if dtype in INTS else "unit"
    val = generate(gen, dtype, (n,), seed_of("scatter", dtype)).nan_to_num(0.0, 0.0, 0.0)
    idx = torch.randint(0, size, (n,), generator=torch.Generator().manual_seed(5))
    acc = generate(gen, dtype, (size,), 7).nan_to_num(0.0, 0.0, 0.0)
    want = (
        acc.to(torch.float64 if dtype in FLOATS else torch.int64)
        .index_add(0, idx, val.to(torch.float64 if dtype in FLOATS else torch.int64))
        .to(dtype)
    )
    tol = Tol(ulps=8, atol=4e-2, rtol=1e-2) if dtype in FLOATS else EXACT
    probes.append(
        _probe(
            "store",
            dtype,
            "memory",
            "atomic_add",
            ScatterAddBody(size=size),
            {"idx": idx, "val": val, "acc": acc},
            {"acc": want},
            ranges=(n,),
            inouts=("acc",),
            outputs={},
            tol=tol,
        )
    )
    return probes


@dataclass(frozen=True)
class GatherBody(BodyBase):
    """out[x] = data[idx[x]] through `indirect_indexing` (wrap negatives, bounds checked)."""

    size: int = 0
    explicit_check: bool = False

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        size = sympy.Integer(self.size)
        v = ops.load(self.buf("idx"), x[0])
        if self.explicit_check:
            i = ops.indirect_indexing(v, size, check=False, wrap_neg=False)
            ops.check_bounds(i, size, True, True)
        else:
            i = ops.indirect_indexing(v, size, check=True, wrap_neg=True)
        ops.store(self.buf("o0"), x[0], ops.load(self.buf("data"), i))


def _gathers(op: str, dtype: torch.dtype) -> list[Probe]:
    n, size = 64, 23
    gen = torch.Generator().manual_seed(seed_of(op, dtype))
    low = 0 if op == "check_bounds" else -size
    idx = torch.randint(low, size, (n,), generator=gen, dtype=torch.int64)
    data = torch.randn(size, generator=gen)
    body = GatherBody(size=size, explicit_check=op == "check_bounds")
    probes = [
        _probe(
            op,
            dtype,
            "indexing",
            "in_bounds",
            body,
            {"idx": idx.to(dtype), "data": data},
            {"o0": data[idx]},
            ranges=(n,),
        )
    ]
    for bad in (size, -size - 1):
        if op == "check_bounds" and bad < 0:
            bad = -1
        wrong = idx.clone()
        wrong[n // 2] = bad
        probes.append(
            _probe(
                op,
                dtype,
                "indexing",
                f"out_of_bounds_{bad}",
                body,
                {"idx": wrong.to(dtype), "data": data},
                {"o0": data[idx]},
                ranges=(n,),
                expect_error=KernelIndexError,
            )
        )
    return probes


@dataclass(frozen=True)
class ExprBody(BodyBase):
    """out[x] = index_expr / value_expr of an affine expression of the indices."""

    op: str = ""
    dtype: torch.dtype = torch.int64
    coeffs: tuple[int, int, int] = (0, 0, 0)

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        a, b, c = self.coeffs
        expr = x[0] * a + x[1] * b + c
        ops.store(self.buf("o0"), x[0] * SHAPE[1] + x[1], getattr(ops, self.op)(expr, self.dtype))


def _exprs(op: str, dtype: torch.dtype) -> list[Probe]:
    coeffs = (3, 1, 5) if op == "value_expr" else (SHAPE[1], 3, 11)
    rows = torch.arange(SHAPE[0]).reshape(-1, 1)
    cols = torch.arange(SHAPE[1]).reshape(1, -1)
    want = (rows * coeffs[0] + cols * coeffs[1] + coeffs[2]).to(dtype)
    body = ExprBody(op=op, dtype=dtype, coeffs=coeffs)
    return [_probe(op, dtype, "indexing", "affine", body, {}, {"o0": want})]


@dataclass(frozen=True)
class BucketizeBody(BodyBase):
    """out[x] = bucketize(values[x]) in a 1-d boundaries buffer, optionally through a sorter."""

    length: int = 0
    index_dtype: torch.dtype = torch.int64
    right: bool = False
    sorter: bool = False

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        n = sympy.Integer(self.length)
        zero = ops.constant(0, torch.int64)
        bounds = (self.buf("bounds"), n, n, sympy.Integer(1))
        sorter = (self.buf("sorter"), sympy.Integer(1)) if self.sorter else None
        v = ops.bucketize(
            ops.load(self.buf("values"), x[0]),
            bounds,
            zero,
            self.index_dtype,
            self.right,
            sorter,
            zero if self.sorter else None,
        )
        ops.store(self.buf("o0"), x[0], v)


def _bucketize(dtype: torch.dtype) -> list[Probe]:
    gen = "small_int" if dtype in INTS else "moderate"
    values = generate(gen, dtype, (97,), seed_of("bucketize", dtype)).nan_to_num(0.0)
    bounds = torch.sort(generate(gen, dtype, (9,), 3).nan_to_num(0.0)).values
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    probes = []
    for right in (False, True):
        for index_dtype in INDEX:
            for sorted_ in (False, True):
                b = bounds[perm] if sorted_ else bounds
                sorter = torch.argsort(b, stable=True) if sorted_ else None
                want = torch.searchsorted(
                    b, values, right=right, sorter=sorter, out_int32=index_dtype == torch.int32
                )
                inputs = {"values": values, "bounds": b}
                if sorter is not None:
                    inputs["sorter"] = sorter
                body = BucketizeBody(length=9, index_dtype=index_dtype, right=right, sorter=sorted_)
                variant = f"right={right},{dtype_name(index_dtype)}" + (",sorter" * sorted_)
                probes.append(
                    _probe(
                        "bucketize",
                        dtype,
                        "indexing",
                        variant,
                        body,
                        inputs,
                        {"o0": want},
                        ranges=(97,),
                    )
                )
    return probes


def _load(dtype: torch.dtype) -> list[Probe]:
    return _copies("load", dtype)


def _gather(dtype: torch.dtype) -> list[Probe]:
    return _gathers("indirect_indexing", dtype)


def _check_bounds(dtype: torch.dtype) -> list[Probe]:
    return _gathers("check_bounds", dtype)


def _index_expr(dtype: torch.dtype) -> list[Probe]:
    return _exprs("index_expr", dtype)


def _value_expr(dtype: torch.dtype) -> list[Probe]:
    return _exprs("value_expr", dtype)


_NUMERIC = (*FLOATS, *INTS)
BASIC: tuple[SpecialCase, ...] = (
    SpecialCase("to_dtype", "dtype", ALL, _to_dtype),
    SpecialCase("to_dtype_bitcast", "dtype", tuple(_BITCAST), _bitcast),
    SpecialCase("load", "memory", ALL, _load),
    SpecialCase("store", "memory", ALL, _store),
    SpecialCase("bucketize", "indexing", _NUMERIC, _bucketize),
    SpecialCase("check_bounds", "indexing", INDEX, _check_bounds),
    SpecialCase("index_expr", "indexing", INDEX, _index_expr),
    SpecialCase("indirect_indexing", "indexing", INDEX, _gather),
    SpecialCase("value_expr", "indexing", _NUMERIC, _value_expr),
)
