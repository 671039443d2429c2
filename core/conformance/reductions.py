"""Probes for `reduction` (every reduction type), `store_reduction`, `scan` and `sort`.

Inputs are (ROWS, COLS) tensors reduced over COLS (odd sizes), contiguous and transposed.
f16/bf16 accumulate in float32 (docs/conventions.md), so their accumulator outputs are float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from polyduct.conformance.inputs import ALL, BOOL, FLOATS, INTS, as_layout, generate, seed_of
from polyduct.conformance.probe import NO_ACCESS, Access, BodyBase, Probe, access, out_like
from polyduct.conformance.special import SpecialCase
from polyduct.conformance.tolerance import EXACT, Tol
from polyduct.ops import OpHandler, ReductionType

ROWS, COLS = 7, 33
Idx = Sequence[sympy.Expr]
HALF = (torch.float16, torch.bfloat16)
_SUM_TOL = {
    torch.float64: Tol(ulps=8, atol=1e-12),
    torch.float32: Tol(ulps=8, atol=2e-5),
    torch.float16: Tol(ulps=1, atol=1e-2),
    torch.bfloat16: Tol(ulps=1, atol=6e-2),
}


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in HALF else dtype


@dataclass(frozen=True)
class ReduceBody(BodyBase):
    """reduction over r0 of load(a0)[x0, r0] (or of a (mean, m2, weight) tuple), then store."""

    rtype: ReductionType = "sum"
    dtype: torch.dtype = torch.float32
    src_dtype: torch.dtype = torch.float32
    args: tuple[Access, ...] = ()
    outs: int = 1

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        values = [ops.load(self.buf(a), a.index((x[0], r[0]))) for a in self.args]
        value = tuple(values) if len(values) > 1 else values[0]
        result = ops.reduction(self.dtype, self.src_dtype, self.rtype, value)
        results = result if self.outs > 1 else (result,)
        for k, v in enumerate(results):
            ops.store_reduction(self.buf(f"o{k}"), x[0], v)


def _xor_sum(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(x.shape[0], dtype=x.dtype)
    for j in range(x.shape[1]):
        acc = acc ^ x[:, j]
    return acc


def _welford(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    d = x.double()
    mean = d.mean(1)
    m2 = ((d - mean[:, None]) ** 2).sum(1)
    return mean, m2, torch.full_like(mean, x.shape[1])


def _combine(mean: torch.Tensor, m2: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    mean, m2, w = mean.double(), m2.double(), w.double()
    total = w.sum(1)
    grand = (mean * w).sum(1) / total
    return grand, (m2 + w * (mean - grand[:, None]) ** 2).sum(1), total


def _softmax(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m = x.double().amax(1)
    return m, torch.exp(x.double() - m[:, None]).sum(1)


def _ref(rtype: str, xs: list[torch.Tensor], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    x = xs[0]
    wide = torch.float64 if dtype in FLOATS else torch.int64
    exact = x.float() if dtype in HALF else x  # argmax/argmin on the float32 compute values
    match rtype:
        case "sum":
            return (x.to(wide).sum(1),)
        case "prod":
            return (x.to(wide).prod(1),)
        case "max":
            return (x.amax(1),)
        case "min":
            return (x.amin(1),)
        case "argmax":
            return (exact.argmax(1),)
        case "argmin":
            return (exact.argmin(1),)
        case "any":
            return (x.any(1),)
        case "xor_sum":
            return (_xor_sum(x),)
        case "welford_reduce":
            return _welford(x)
        case "welford_combine":
            return _combine(*xs)
        case _:
            return _softmax(x)


_GEN = {
    "sum": "unit",
    "prod": "unit",
    "online_softmax_reduce": "moderate",
    "welford_reduce": "moderate",
}
_DOMAINS: dict[str, tuple[torch.dtype, ...]] = {
    "sum": (*FLOATS, *INTS),
    "prod": (*FLOATS, *INTS),
    "max": ALL,
    "min": ALL,
    "argmax": (*FLOATS, *INTS),
    "argmin": (*FLOATS, *INTS),
    "any": BOOL,
    "xor_sum": INTS,
    "welford_reduce": FLOATS,
    "welford_combine": (torch.float32, torch.float64),
    "online_softmax_reduce": FLOATS,
}


def _inputs(rtype: str, dtype: torch.dtype) -> list[torch.Tensor]:
    shape = (ROWS, COLS)
    seed = seed_of("reduction", rtype, dtype)
    if rtype == "welford_combine":
        mean = generate("moderate", dtype, shape, seed).nan_to_num(0.0, 1.0, -1.0)
        m2 = generate("positive", dtype, shape, seed + 1).nan_to_num(0.0, 1.0, 1.0)
        return [mean, m2, torch.randint(1, 6, shape).to(dtype)]
    gen = _GEN.get(rtype, "small_int" if dtype in INTS else "any")
    x = generate(gen, dtype, shape, seed)
    if rtype == "prod" and dtype in FLOATS:
        x = x + 1.0
    if rtype in ("online_softmax_reduce", "welford_reduce"):
        x = x.nan_to_num(0.0, 3.0, -3.0)
    return [x]


def _out_dtypes(rtype: str, dtype: torch.dtype, n: int) -> list[torch.dtype]:
    if rtype in ("argmax", "argmin"):
        return [torch.int64]
    if rtype.startswith("welford") or rtype == "online_softmax_reduce":
        return [acc_dtype(dtype)] * n
    return [dtype]


def _reduction_probes(op: str, rtype: ReductionType, dtype: torch.dtype) -> list[Probe]:
    xs = _inputs(rtype, dtype)
    expected = _ref(rtype, xs, dtype)
    outs = _out_dtypes(rtype, dtype, len(expected))
    want = {f"o{k}": e.to(d) for k, (e, d) in enumerate(zip(expected, outs, strict=True))}
    exact = rtype in ("max", "min", "argmax", "argmin", "any", "xor_sum") or dtype in INTS
    tol = EXACT if exact else _SUM_TOL[dtype]
    if rtype.startswith("welford") or rtype == "online_softmax_reduce":
        tol = Tol(ulps=8, atol=1e-4, rtol=1e-5) if dtype != torch.float64 else Tol(rtol=1e-12)
    probes = []
    for layout in ("contiguous", "transposed"):
        inputs = {f"a{i}": as_layout(t, layout) for i, t in enumerate(xs)}
        body = ReduceBody(
            rtype=rtype,
            dtype=acc_dtype(dtype),
            src_dtype=dtype,
            args=tuple(access(n, t) for n, t in inputs.items()),
            outs=len(want),
        )
        outputs = {n: out_like((ROWS,), t.dtype) for n, t in want.items()}
        probes.append(
            Probe(
                op,
                dtype,
                "reduction",
                f"{rtype}:{layout}",
                (ROWS,),
                (("reduce", body),),
                inputs,
                outputs,
                want,
                tol,
                reduction_ranges=(COLS,),
            )
        )
    return probes


def _reduction(dtype: torch.dtype) -> list[Probe]:
    probes = []
    for rtype, domain in _DOMAINS.items():
        if dtype in domain:
            probes += _reduction_probes("reduction", rtype, dtype)  # type: ignore[arg-type]
    return probes


def _store_reduction(dtype: torch.dtype) -> list[Probe]:
    return _reduction_probes("store_reduction", "max" if dtype == torch.bool else "sum", dtype)


@dataclass(frozen=True)
class ScanBody(BodyBase):
    """Inclusive scan over r0 with `combine` ("add", "maximum", "mul", or "add+maximum" pairs)."""

    combine: str = "add"
    dtype: torch.dtype = torch.float32
    src: Access = NO_ACCESS
    dst: tuple[Access, ...] = ()

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        names = self.combine.split("+")

        def combine(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(getattr(ops, n)(u, v) for n, u, v in zip(names, a, b, strict=True))

        v = ops.load(self.buf(self.src), self.src.index((x[0], r[0])))
        results = ops.scan((self.dtype,) * len(names), combine, (v,) * len(names))
        for out, res in zip(self.dst, results, strict=True):
            ops.store(self.buf(out), out.index((x[0], r[0])), res)


def _scan_ref(name: str, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    wide = torch.float64 if dtype in FLOATS else torch.int64
    if name == "add":
        return x.to(wide).cumsum(1).to(dtype)
    if name == "mul":
        return x.to(wide).cumprod(1).to(dtype)
    return x.cummax(1).values


def _scan(dtype: torch.dtype) -> list[Probe]:
    probes = []
    for combine in ("add", "maximum", "mul", "add+maximum"):
        gen = "small_int" if dtype in INTS else "unit"
        x = generate(gen, dtype, (ROWS, COLS), seed_of("scan", combine, dtype))
        if combine == "mul" and dtype in FLOATS:
            x = x.nan_to_num(0.0) * 0.2 + 1.0
        want = {f"o{k}": _scan_ref(n, x, dtype) for k, n in enumerate(combine.split("+"))}
        tol = EXACT if dtype in INTS or combine == "maximum" else _SUM_TOL[dtype]
        for layout in ("contiguous", "transposed"):
            a = as_layout(x, layout)
            outputs = {n: out_like((ROWS, COLS), dtype, layout) for n in want}
            body = ScanBody(
                combine=combine,
                dtype=acc_dtype(dtype),
                src=access("a0", a),
                dst=tuple(access(n, o) for n, o in outputs.items()),
            )
            probes.append(
                Probe(
                    "scan",
                    dtype,
                    "scan",
                    f"{combine}:{layout}",
                    (ROWS,),
                    (("scan", body),),
                    {"a0": a},
                    outputs,
                    want,
                    tol,
                    reduction_ranges=(COLS,),
                )
            )
    return probes


@dataclass(frozen=True)
class SortBody(BodyBase):
    """Sort (value, original index) pairs over r0; store sorted values and indices."""

    dtype: torch.dtype = torch.float32
    descending: bool = False
    src: Access = NO_ACCESS

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        v = ops.load(self.buf(self.src), self.src.index((x[0], r[0])))
        i = ops.index_expr(r[0], torch.int64)
        values, idx = ops.sort((self.dtype, torch.int64), (v, i), True, self.descending)
        ops.store(self.buf("o0"), x[0] * COLS + r[0], values)
        ops.store(self.buf("o1"), x[0] * COLS + r[0], idx)


def _sort(dtype: torch.dtype) -> list[Probe]:
    probes = []
    for descending in (False, True):
        gen = "small_int" if dtype in INTS else "any"
        x = generate(gen, dtype, (ROWS, COLS), seed_of("sort", dtype))
        s = torch.sort(x, dim=1, stable=True, descending=descending)
        want = {"o0": s.values, "o1": s.indices}
        for layout in ("contiguous", "transposed"):
            a = as_layout(x, layout)
            outputs = {
                "o0": out_like((ROWS, COLS), dtype),
                "o1": out_like((ROWS, COLS), torch.int64),
            }
            body = SortBody(dtype=acc_dtype(dtype), descending=descending, src=access("a0", a))
            probes.append(
                Probe(
                    "sort",
                    dtype,
                    "scan",
                    f"descending={descending}:{layout}",
                    (ROWS,),
                    (("sort", body),),
                    {"a0": a},
                    outputs,
                    want,
                    reduction_ranges=(COLS,),
                )
            )
    return probes


_NUM = (*FLOATS, *INTS)
REDUCTIONS: tuple[SpecialCase, ...] = (
    SpecialCase("reduction", "reduction", ALL, _reduction),
    SpecialCase("store_reduction", "memory", ALL, _store_reduction),
    SpecialCase("scan", "scan", _NUM, _scan),
    SpecialCase("sort", "scan", ALL, _sort),
)
