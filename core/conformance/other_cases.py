"""Case builders for the "other" ops: `constant`, `device_assert_async` and `masked`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from polyduct.conformance.inputs import ALL, FLOATS, INTS, SHAPE, generate, seed_of
from polyduct.conformance.probe import BodyBase, Probe
from polyduct.conformance.special import Idx, SpecialCase, _probe
from polyduct.conformance.tolerance import Tol
from polyduct.ops import OpHandler


@dataclass(frozen=True)
class ConstantBody(BodyBase):
    """out_k[x] = constant(values[k], dtype) for every k."""

    values: tuple[Any, ...] = ()
    dtype: torch.dtype = torch.float32

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        for k, value in enumerate(self.values):
            ops.store(self.buf(f"o{k}"), x[0], ops.constant(value, self.dtype))


def _constants(dtype: torch.dtype) -> list[Probe]:
    if dtype == torch.bool:
        values: tuple[Any, ...] = (True, False)
    elif dtype in FLOATS:
        fi = torch.finfo(dtype)
        values = (0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, fi.max, fi.tiny, 0.1)
    else:
        ii = torch.iinfo(dtype)
        values = tuple(v for v in (0, 1, -1, 100, ii.max, ii.min) if ii.min <= v <= ii.max)
    want = {f"o{k}": torch.full((5,), v, dtype=dtype) for k, v in enumerate(values)}
    body = ConstantBody(values=values, dtype=dtype)
    return [
        _probe(
            "constant",
            dtype,
            "other",
            "literals",
            body,
            {},
            want,
            ranges=(5,),
            tol=Tol(signed_zero=True),
        )
    ]


@dataclass(frozen=True)
class AssertBody(BodyBase):
    """device_assert_async(a[x] <= 100), then out[x] = a[x]."""

    dtype: torch.dtype = torch.float32

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        v = ops.load(self.buf("a0"), x[0])
        ops.device_assert_async(ops.le(v, ops.constant(100, self.dtype)), "a0 must be <= 100")
        ops.store(self.buf("o0"), x[0], v)


def _asserts(dtype: torch.dtype) -> list[Probe]:
    from polyduct.errors import KernelAssertError

    x = torch.arange(31).to(dtype)
    body = AssertBody(dtype=dtype)
    bad = x.clone()
    bad[17] = 101
    return [
        _probe(
            "device_assert_async", dtype, "other", "holds", body, {"a0": x}, {"o0": x}, ranges=(31,)
        ),
        _probe(
            "device_assert_async",
            dtype,
            "other",
            "fails",
            body,
            {"a0": bad},
            {"o0": bad},
            ranges=(31,),
            expect_error=KernelAssertError,
        ),
    ]


@dataclass(frozen=True)
class MaskedBody(BodyBase):
    """out[x0, x1] = a[x0, x1] if x1 < width else other, with the load predicated by `masked`."""

    width: int = 0
    other: Any = 0
    dtype: torch.dtype = torch.float32

    def __call__(self, ops: OpHandler[Any], x: Idx, r: Idx) -> None:
        mask = ops.lt(ops.index_expr(x[1], torch.int64), ops.constant(self.width, torch.int64))

        def body() -> Any:
            return ops.load(self.buf("a0"), x[0] * self.width + x[1])

        ops.store(self.buf("o0"), x[0] * SHAPE[1] + x[1], ops.masked(mask, body, self.other))


def _masked(dtype: torch.dtype) -> list[Probe]:
    width = SHAPE[1] - 7
    a = generate("any", dtype, (SHAPE[0], width), seed_of("masked", dtype))
    others: tuple[Any, ...] = (False,) if dtype == torch.bool else (0, 3)
    if dtype in FLOATS:
        others = (0.0, -math.inf)
    probes = []
    for other in others:
        want = torch.full(SHAPE, other, dtype=dtype)
        want[:, :width] = a
        body = MaskedBody(width=width, other=other, dtype=dtype)
        probes.append(
            _probe("masked", dtype, "other", f"other={other}", body, {"a0": a}, {"o0": want})
        )
    return probes


_NUMERIC = (*FLOATS, *INTS)
OTHER: tuple[SpecialCase, ...] = (
    SpecialCase("constant", "other", ALL, _constants),
    SpecialCase("device_assert_async", "other", _NUMERIC, _asserts),
    SpecialCase("masked", "other", ALL, _masked),
)
