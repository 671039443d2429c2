"""Reductions whose lanes fold as vectors (sum, prod, max, min, xor_sum): every lane count, NaN
in any lane or only in the tail, integer lanes, and one row split across threads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import backend, buf, compile_one, spec

NAN, INF = float("nan"), float("inf")


def _reduce(
    tmp_path: Path, rtype: str, x: torch.Tensor, lanes: int, **options: object
) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype)

    def body(ops, xs, rs):  # type: ignore[no-untyped-def]
        v = ops.load("x", xs[0] * cols + rs[0])
        ops.store_reduction("o", xs[0], ops.reduction(x.dtype, x.dtype, rtype, v))

    be = backend(tmp_path, simd_lanes=lanes, **options)
    bufs = [buf("x", x, "in"), buf("o", out, "out")]
    compile_one(be, spec("fold", [rows], [cols], [("reduce", body)], bufs))(x, out)
    return out


def _want(rtype: str, x: torch.Tensor) -> torch.Tensor:
    if rtype == "xor_sum":
        acc = x[:, 0].clone()
        for j in range(1, x.shape[1]):
            acc ^= x[:, j]
        return acc
    return {"sum": x.sum(1), "prod": x.prod(1), "max": x.amax(1), "min": x.amin(1)}[rtype]


@pytest.mark.parametrize("lanes", [1, 8, 16, 64])
@pytest.mark.parametrize("rtype", ["sum", "max", "min"])
def test_float_fold_every_lane_count(tmp_path: Path, rtype: str, lanes: int) -> None:
    x = torch.randn(7, 203, dtype=torch.float64)
    x[0, 17] = NAN  # a NaN in a middle lane
    x[1, 202] = NAN  # a NaN only in the tail
    x[2, 3] = INF
    x[3, 100] = -INF
    x[4, :] = -0.0
    got = _reduce(tmp_path, rtype, x, lanes)
    torch.testing.assert_close(got, _want(rtype, x), equal_nan=True)


@pytest.mark.parametrize("rtype", ["max", "min", "sum", "xor_sum"])
def test_integer_fold(tmp_path: Path, rtype: str) -> None:
    info = torch.iinfo(torch.int64)
    x = torch.randint(-1000, 1000, (5, 77), dtype=torch.int64)
    x[0, 40] = info.max
    x[1, 76] = info.min
    got = _reduce(tmp_path, rtype, x, 16)
    assert torch.equal(got, _want(rtype, x))


@pytest.mark.parametrize("rtype", ["max", "min", "prod"])
def test_one_row_split_across_threads_keeps_nan(tmp_path: Path, rtype: str) -> None:
    x = torch.rand(1, 1 << 16, dtype=torch.float32) * 0.01 + 0.995
    x[0, 50000] = NAN  # in the second thread's half
    got = _reduce(tmp_path, rtype, x, 16, parallel_threshold=1024)
    assert torch.isnan(got).all()
    x[0, 50000] = 2.0
    got = _reduce(tmp_path, rtype, x, 16, parallel_threshold=1024)
    torch.testing.assert_close(got, _want(rtype, x), rtol=1e-4, atol=0)
