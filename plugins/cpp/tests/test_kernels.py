"""C++ backend kernels from hand-built specs, checked against torch eager."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy
import torch
from helpers import backend, buf, compile_one, spec

from polyduct.indexing import size_symbol

NAN = float("nan")


def test_pointwise_strided_broadcast_and_size_args(tmp_path: Path) -> None:
    s0 = size_symbol("s0")

    def body(ops, x, r):  # a is a transposed view, b broadcasts along rows
        a = ops.load("a", x[0] + x[1] * 5)
        b = ops.load("b", x[1])
        ops.store("out", x[0] * s0 + x[1], ops.mul(ops.sigmoid(a), ops.add(b, a)))

    base = torch.randn(s := 7, 5)
    a = base.t()
    b = torch.randn(s, dtype=torch.float32)
    out = torch.empty(5, s)
    k = compile_one(
        backend(tmp_path),
        spec(
            "pw",
            [5, s0],
            [],
            [("outer", body)],
            [buf("a", base, "in"), buf("b", b, "in"), buf("out", out, "out")],
            [s0],
        ),
    )
    k(base, b, out, s)
    torch.testing.assert_close(out, torch.sigmoid(a) * (b + a))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8])
def test_small_dtypes_round_and_wrap(tmp_path: Path, dtype: torch.dtype) -> None:
    def body(ops, x, r):
        v = ops.load("a", x[0])
        ops.store("out", x[0], ops.add(ops.mul(v, v), v))

    a = (torch.randn(100) * 20).to(dtype)
    out = torch.empty_like(a)
    k = compile_one(
        backend(tmp_path),
        spec("small", [100], [], [("outer", body)], [buf("a", a, "in"), buf("out", out, "out")]),
    )
    k(a, out)
    want = (a.float() * a.float() + a.float()).to(dtype) if dtype.is_floating_point else a * a + a
    torch.testing.assert_close(out, want, equal_nan=True)


def _reduce(tmp_path: Path, rtype: str, x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    rows, cols = x.shape
    nout = 3 if rtype.startswith("welford") else 2 if rtype == "online_softmax_reduce" else 1
    outs = [torch.empty(rows, dtype=out_dtype) for _ in range(nout)]

    def body(ops, xs, rs):
        v = ops.load("x", xs[0] * cols + rs[0])
        res = ops.reduction(out_dtype, x.dtype, rtype, v)
        for i, value in enumerate(res if isinstance(res, tuple) else (res,)):
            ops.store_reduction(f"o{i}", xs[0], value)

    bufs = [buf("x", x, "in")] + [buf(f"o{i}", o, "out") for i, o in enumerate(outs)]
    k = compile_one(backend(tmp_path), spec("red", [rows], [cols], [("reduce", body)], bufs))
    k(x, *outs)
    return torch.stack(outs)


@pytest.mark.parametrize("rtype", ["sum", "prod", "max", "min", "argmax", "argmin"])
def test_float_reductions_with_nan_and_ties(tmp_path: Path, rtype: str) -> None:
    x = torch.randn(6, 37)
    x[1, 5] = NAN
    x[1, 20] = NAN
    x[2, :] = 1.0  # ties: first index wins
    x[3, 30] = float("inf")
    x[4, 3] = -float("inf")
    if rtype == "prod":
        x = x.abs() * 0.5 + 0.75
    out_dtype = torch.int64 if rtype.startswith("arg") else torch.float32
    got = _reduce(tmp_path, rtype, x, out_dtype)[0]
    want = {
        "sum": x.sum(1),
        "prod": x.prod(1),
        "max": x.amax(1),
        "min": x.amin(1),
        "argmax": x.argmax(1),
        "argmin": x.argmin(1),
    }[rtype]
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)


def test_integer_any_and_xor_reductions(tmp_path: Path) -> None:
    x = torch.randint(-100, 100, (5, 33), dtype=torch.int32)
    got = _reduce(tmp_path, "xor_sum", x, torch.int32)[0]
    want = x[:, 0].clone()
    for j in range(1, 33):
        want ^= x[:, j]
    assert torch.equal(got, want)
    b = torch.zeros(4, 19, dtype=torch.bool)
    b[1, 18] = True
    assert _reduce(tmp_path, "any", b, torch.bool)[0].tolist() == [False, True, False, False]


def test_welford_and_online_softmax(tmp_path: Path) -> None:
    x = torch.randn(3, 101, dtype=torch.float64)
    mean, m2, weight = _reduce(tmp_path, "welford_reduce", x, torch.float64)
    torch.testing.assert_close(mean, x.mean(1))
    torch.testing.assert_close(m2 / weight, x.var(1, unbiased=False))
    mx, s = _reduce(tmp_path, "online_softmax_reduce", x, torch.float64)
    torch.testing.assert_close(mx, x.amax(1))
    torch.testing.assert_close(s, torch.exp(x - x.amax(1, keepdim=True)).sum(1))


def test_softmax_with_local_buffers(tmp_path: Path) -> None:
    rows, cols = 9, 300
    x, out = torch.randn(rows, cols), torch.empty(rows, cols)

    def mx(ops, xs, rs):
        red = ops.reduction(
            torch.float32, torch.float32, "max", ops.load("x", xs[0] * cols + rs[0])
        )
        ops.store_reduction("m", xs[0], red)

    def sm(ops, xs, rs):
        e = ops.exp(ops.sub(ops.load("x", xs[0] * cols + rs[0]), ops.load("m", xs[0])))
        ops.store_reduction("s", xs[0], ops.reduction(torch.float32, torch.float32, "sum", e))

    def norm(ops, xs, rs):
        e = ops.exp(ops.sub(ops.load("x", xs[0] * cols + rs[0]), ops.load("m", xs[0])))
        ops.store("out", xs[0] * cols + rs[0], ops.truediv(e, ops.load("s", xs[0])))

    bufs = [
        buf("x", x, "in"),
        buf("m", torch.float32, "local", rows),
        buf("s", torch.float32, "local", rows),
        buf("out", out, "out"),
    ]
    k = compile_one(
        backend(tmp_path),
        spec("softmax", [rows], [cols], [("reduce", mx), ("reduce", sm), ("inner", norm)], bufs),
    )
    k(x, out)
    torch.testing.assert_close(out, torch.softmax(x, 1))


def test_scan_cumsum_and_sort_with_nan(tmp_path: Path) -> None:
    rows, cols = 4, 23
    x = torch.randn(rows, cols)
    x[0, 3] = NAN
    cs, sv, si = (
        torch.empty_like(x),
        torch.empty_like(x),
        torch.empty(rows, cols, dtype=torch.int64),
    )

    def scan(ops, xs, rs):
        v = ops.load("x", xs[0] * cols + rs[0])
        (res,) = ops.scan((torch.float32,), lambda a, b: (ops.add(a[0], b[0]),), (v,))
        ops.store("cs", xs[0] * cols + rs[0], res)

    def sort(ops, xs, rs):
        v = ops.load("x", xs[0] * cols + rs[0])
        i = ops.index_expr(rs[0], torch.int64)
        sv_, si_ = ops.sort((torch.float32, torch.int64), (v, i), True, True)
        ops.store("sv", xs[0] * cols + rs[0], sv_)
        ops.store("si", xs[0] * cols + rs[0], si_)

    be = backend(tmp_path)
    bufs = [buf("x", x, "in"), buf("cs", cs, "out")]
    compile_one(be, spec("scan", [rows], [cols], [("scan", scan)], bufs))(x, cs)
    torch.testing.assert_close(cs, torch.cumsum(x, 1), equal_nan=True)
    bufs = [buf("x", x, "in"), buf("sv", sv, "out"), buf("si", si, "out")]
    compile_one(be, spec("sort", [rows], [cols], [("sort", sort)], bufs))(x, sv, si)
    want_v, want_i = torch.sort(x, stable=True, dim=1, descending=True)
    torch.testing.assert_close(sv, want_v, equal_nan=True)
    assert torch.equal(si, want_i)


def test_masked_load_and_indirect_gather(tmp_path: Path) -> None:
    table, idx = torch.randn(10), torch.tensor([3, -1, 9, 0, 5])
    out = torch.empty(5)

    def body(ops, x, r):
        i = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(10))
        mask = ops.lt(ops.index_expr(x[0], torch.int64), ops.constant(4, torch.int64))
        v = ops.masked(mask, lambda: ops.load("table", i), -1.0)
        ops.store("out", x[0], v)

    k = compile_one(
        backend(tmp_path),
        spec(
            "gather",
            [5],
            [],
            [("outer", body)],
            [buf("table", table, "in"), buf("idx", idx, "in"), buf("out", out, "out")],
        ),
    )
    k(table, idx, out)
    want = table[idx]
    want[4] = -1.0
    torch.testing.assert_close(out, want)


def test_full_reduction_split_across_threads(tmp_path: Path) -> None:
    x = torch.randn(1 << 18, dtype=torch.float64)
    x[123457] = 1e3
    total, arg = torch.empty(1, dtype=torch.float64), torch.empty(1, dtype=torch.int64)

    def body(ops, xs, rs):
        v = ops.load("x", rs[0])
        ops.store_reduction("t", 0, ops.reduction(torch.float64, torch.float64, "sum", v))
        ops.store_reduction("a", 0, ops.reduction(torch.int64, torch.float64, "argmax", v))

    bufs = [buf("x", x, "in"), buf("t", total, "out"), buf("a", arg, "out")]
    k = compile_one(
        backend(tmp_path, parallel_threshold=1024),
        spec("full", [], [x.numel()], [("reduce", body)], bufs),
    )
    k(x, total, arg)
    torch.testing.assert_close(total[0], x.sum())
    assert arg.item() == 123457


def test_contiguous_outer_dims_flatten_into_one_loop(tmp_path: Path) -> None:
    s0 = size_symbol("s0")

    def body(ops, x, r):
        flat = x[0] * 5 * s0 + x[1] * s0 + x[2]
        ops.store("out", 2 * flat, ops.neg(ops.load("a", flat)))

    a, out = torch.randn(3, 5, 7), torch.zeros(3 * 5 * 7 * 2)
    be = backend(tmp_path)
    s = spec(
        "flat3",
        [3, 5, s0],
        [],
        [("outer", body)],
        [buf("a", a, "in"), buf("out", out, "out")],
        [s0],
    )
    assert "for (int64_t x2 = pd_lo; x2 < pd_hi" in be.codegen(s).source
    compile_one(be, s)(a, out, 7)
    torch.testing.assert_close(out[::2], -a.reshape(-1))
    assert not out[1::2].any()
