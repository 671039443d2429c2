"""Triton backend kernels from hand-built KernelSpecs, checked against torch eager."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sympy
import torch
from kernels import buf, cuda_source, run, spec

from polyduct.cache import import_module_file
from polyduct.errors import KernelAssertError, KernelIndexError
from polyduct.indexing import size_symbol

NAN, INF = float("nan"), float("inf")


def test_pointwise_strided_view_and_size_arg(tmp_path: Path) -> None:
    s0 = size_symbol("s0")
    base = torch.randn(6, 5)
    b, out = torch.randn(6), torch.empty(5, 6)

    def body(ops: Any, x: Any, r: Any) -> None:  # a = base.t(): strided read
        a = ops.load("a", x[0] + x[1] * 5)
        ops.store("out", x[0] * s0 + x[1], ops.mul(ops.tanh(a), ops.add(ops.load("b", x[1]), a)))

    bufs = [buf("a", base, "in"), buf("b", b, "in"), buf("out", out, "out")]
    run(tmp_path, spec("pw", [5, s0], [], [("outer", body)], bufs, [s0]), base, b, out, 6)
    a = base.t()
    torch.testing.assert_close(out, torch.tanh(a) * (b + a))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.uint8])
def test_small_dtypes_round_and_wrap(tmp_path: Path, dtype: torch.dtype) -> None:
    a = (torch.randn(300) * 30).to(dtype)
    out = torch.empty_like(a)

    def body(ops: Any, x: Any, r: Any) -> None:
        v = ops.load("a", x[0])
        ops.store("out", x[0], ops.add(ops.mul(v, v), v))

    run(tmp_path, spec("small", [300], [], [("outer", body)],
                       [buf("a", a, "in"), buf("out", out, "out")]), a, out)
    want = (a.float() * a.float() + a.float()).to(dtype) if dtype.is_floating_point else a * a + a
    torch.testing.assert_close(out, want, equal_nan=True)


def _reduce(tmp: Path, rtype: str, x: torch.Tensor, out_dtype: torch.dtype) -> list[torch.Tensor]:
    rows, cols = x.shape
    n = 3 if rtype == "welford_reduce" else 2 if rtype == "online_softmax_reduce" else 1
    outs = [torch.empty(rows, dtype=out_dtype) for _ in range(n)]

    def body(ops: Any, xs: Any, rs: Any) -> None:
        res = ops.reduction(out_dtype, x.dtype, rtype, ops.load("x", xs[0] * cols + rs[0]))
        for i, value in enumerate(res if isinstance(res, tuple) else (res,)):
            ops.store_reduction(f"o{i}", xs[0], value)

    bufs = [buf("x", x, "in")] + [buf(f"o{i}", o, "out") for i, o in enumerate(outs)]
    run(tmp, spec("red", [rows], [cols], [("reduce", body)], bufs), x, *outs)
    return outs


# Rows of 5000 take two RBLOCK chunks under the interpreter (4096 each): the special values sit
# where only the merge of a chunk into the loop-carried accumulator sees them.
LONG = 5000


@pytest.mark.parametrize("rtype", ["sum", "prod", "max", "min", "argmax", "argmin"])
def test_float_reductions_merge_nan_inf_and_ties_across_chunks(tmp_path: Path, rtype: str) -> None:
    x = torch.randn(6, LONG)
    x[1, 4500] = NAN  # NaN in the second chunk only
    x[2, :] = 2.0  # all tied: first index
    x[3, 4200], x[4, 40] = INF, -INF
    x[5, 100] = x[5, 4300] = 9.0  # tied extreme in both chunks: the first-chunk index wins
    x[5, 2000] = x[5, 4400] = -9.0
    if rtype == "prod":
        x = x.abs() * 1e-3 + 1.0
    out_dtype = torch.int64 if rtype.startswith("arg") else torch.float32
    (got,) = _reduce(tmp_path, rtype, x, out_dtype)
    want = getattr(x, {"max": "amax", "min": "amin"}.get(rtype, rtype))(1)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rtype", ["max", "min"])
def test_gpu_max_min_reduce_nan_in_one_combine(tmp_path: Path, rtype: str) -> None:
    """The CUDA flavour of a float max/min reduces each row with one NaN-propagating combine
    (the interpreter's flavour keeps numpy reductions beside a NaN flag). Its source, run here
    under the interpreter on blocks small enough for the interpreter's element-wise combine,
    gives torch's rows: NaN in either pass of a looped row, infinities, signed zeros."""
    def body(ops: Any, x: Any, r: Any) -> None:
        v = ops.reduction(torch.float32, torch.float32, rtype, ops.load("a", x[0] * 16 + r[0]))
        ops.store_reduction("o", x[0], v)

    s = spec(f"gpu_{rtype}", [6], [16], [("reduce", body)],
             [buf("a", torch.float32, "in", 96), buf("o", torch.float32, "out", 6)])
    source = cuda_source(tmp_path, s)
    assert f"tl.reduce(lanes1, 1, _{rtype}_nan_combine, keep_dims=True)" in source
    assert "tl.max((lanes1 != lanes1)" not in source
    path = tmp_path / f"gpu_{rtype}.py"
    path.write_text(source)
    module = import_module_file(path, f"gpu_{rtype}_flavour")
    x = torch.randn(6, 16)
    x[0, 3] = NAN  # first half of the row
    x[1, 12] = NAN  # second half
    x[2, 5], x[3, 9] = INF, -INF
    x[4] = 0.0
    x[4, ::2] = -0.0
    x[5, :] = NAN
    want = getattr(x, "a" + rtype)(1)
    for rblock, persistent in ((16, True), (8, False)):
        out = torch.full((6,), 7.0)
        module._kernel[(3,)](x, out, 6, 16, XBLOCK=2, RBLOCK=rblock, IDX64=False,
                             PERSISTENT=persistent)
        torch.testing.assert_close(out, want, equal_nan=True, rtol=0, atol=0)


def test_static_sizes_that_blocks_tile_take_constant_masks(tmp_path: Path) -> None:
    """A kernel of static sizes decides per config whether its blocks tile them: then its masks
    are the constant True (Triton drops them), else lanes are tested. Both give the answer, on
    blocks that tile the sizes and on ragged ones, persistent and looped; a kernel with size
    arguments always tests lanes."""
    for cols in (32, 48):

        def body(ops: Any, xs: Any, rs: Any, cols: int = cols) -> None:
            ops.store_reduction("o", xs[0], ops.reduction(
                torch.float32, torch.float32, "sum", ops.load("a", xs[0] * cols + rs[0])))

        s = spec(f"tiles{cols}", [6], [cols], [("reduce", body)],
                 [buf("a", torch.float32, "in", 6 * cols), buf("o", torch.float32, "out", 6)])
        source = cuda_source(tmp_path, s)
        assert "if 6 % XBLOCK == 0:" in source and f"if {cols} % RBLOCK == 0:" in source
        path = tmp_path / f"tiles{cols}.py"
        path.write_text(source)
        module = import_module_file(path, f"tiles{cols}_flavour")
        x = torch.randn(6, cols)
        for xblock, rblock in ((2, 16), (4, 16), (2, 32), (2, 64)):
            out = torch.full((6,), NAN)
            module._kernel[(-(-6 // xblock),)](x, out, 6, cols, XBLOCK=xblock, RBLOCK=rblock,
                                               IDX64=False, PERSISTENT=rblock >= cols)
            torch.testing.assert_close(out, x.sum(1), rtol=1e-6, atol=1e-5)
    n = size_symbol("s0")
    dynamic = spec("ragged", [n], [48], [("reduce", body)],
                   [buf("a", torch.float32, "in", 48 * n), buf("o", torch.float32, "out", n)],
                   size_args=[n])
    assert "% XBLOCK == 0:" not in cuda_source(tmp_path, dynamic)


def test_integer_xor_any_and_long_rows(tmp_path: Path) -> None:
    x = torch.randint(-1000, 1000, (3, 5000), dtype=torch.int32)  # > one RBLOCK chunk
    (s,) = _reduce(tmp_path, "sum", x, torch.int32)
    assert torch.equal(s, x.sum(1, dtype=torch.int32))
    (xo,) = _reduce(tmp_path, "xor_sum", x[:, :40].contiguous(), torch.int32)
    want = x[:, 0].clone()
    for j in range(1, 40):
        want ^= x[:, j]
    assert torch.equal(xo, want)
    b = torch.zeros(4, 9, dtype=torch.bool)
    b[2, 8] = True
    assert _reduce(tmp_path, "any", b, torch.bool)[0].tolist() == [False, False, True, False]


def test_welford_and_online_softmax_merge_across_chunks(tmp_path: Path) -> None:
    x = torch.randn(3, LONG, dtype=torch.float64) * 3.0 + 100.0
    x[1, 4900] = 140.0  # the running max changes in the second chunk
    mean, m2, weight = _reduce(tmp_path, "welford_reduce", x, torch.float64)
    torch.testing.assert_close(mean, x.mean(1))
    torch.testing.assert_close(m2 / weight, x.var(1, unbiased=False))
    mx, s = _reduce(tmp_path, "online_softmax_reduce", x, torch.float64)
    torch.testing.assert_close(mx, x.amax(1))
    torch.testing.assert_close(s, torch.exp(x - x.amax(1, keepdim=True)).sum(1))


def test_softmax_three_stages_with_local_buffers(tmp_path: Path) -> None:
    rows, cols = 5, 130
    x, out = torch.randn(rows, cols), torch.empty(rows, cols)

    def at(ops: Any, xs: Any, rs: Any) -> Any:
        return ops.load("x", xs[0] * cols + rs[0])

    def mx(ops: Any, xs: Any, rs: Any) -> None:
        ops.store_reduction("m", xs[0], ops.reduction(torch.float32, torch.float32, "max",
                                                      at(ops, xs, rs)))

    def sm(ops: Any, xs: Any, rs: Any) -> None:
        e = ops.exp(ops.sub(at(ops, xs, rs), ops.load("m", xs[0])))
        ops.store_reduction("s", xs[0], ops.reduction(torch.float32, torch.float32, "sum", e))

    def norm(ops: Any, xs: Any, rs: Any) -> None:
        e = ops.exp(ops.sub(at(ops, xs, rs), ops.load("m", xs[0])))
        ops.store("out", xs[0] * cols + rs[0], ops.truediv(e, ops.load("s", xs[0])))

    bufs = [buf("x", x, "in"), buf("m", torch.float32, "local", rows),
            buf("s", torch.float32, "local", rows), buf("out", out, "out")]
    stages = [("reduce", mx), ("reduce", sm), ("inner", norm)]
    run(tmp_path, spec("softmax", [rows], [cols], stages, bufs), x, out)
    torch.testing.assert_close(out, torch.softmax(x, 1))


def test_looped_stages_carry_cache_hints(tmp_path: Path) -> None:
    """A row that a later stage loads again is kept in cache by the first (evict_last) and let
    go by the last (evict_first); a weight every row reads is kept (evict_last) in both paths.
    Rows of LONG elements loop under the interpreter, so the hinted loads are the ones run."""
    rows = 3
    x, w, out = torch.randn(rows, LONG), torch.randn(LONG), torch.empty(rows, LONG)

    def total(ops: Any, xs: Any, rs: Any) -> None:
        v = ops.load("x", xs[0] * LONG + rs[0])
        ops.store_reduction("s", xs[0], ops.reduction(torch.float32, torch.float32, "sum", v))

    def scale(ops: Any, xs: Any, rs: Any) -> None:
        v = ops.mul(ops.load("x", xs[0] * LONG + rs[0]), ops.load("w", rs[0]))
        ops.store("out", xs[0] * LONG + rs[0], ops.truediv(v, ops.load("s", xs[0])))

    bufs = [buf("x", x, "in"), buf("w", w, "in"), buf("s", torch.float32, "local", rows),
            buf("out", out, "out")]
    src = run(tmp_path, spec("scale", [rows], [LONG], [("reduce", total), ("inner", scale)],
                             bufs), x, w, out)
    torch.testing.assert_close(out, x * w / x.sum(1, keepdim=True), rtol=1e-4, atol=1e-4)
    looped = src[src.index("\n    else:\n", src.index("if PERSISTENT:")):]
    row = "in_ptr0 + (r0 + 5000*x0)"
    assert looped.count(row) == 2
    first, last = (line for line in looped.splitlines() if row in line)
    assert "evict_last" in first and "evict_first" in last
    weight = [line for line in src.splitlines() if "tl.load(in_ptr1" in line]
    assert len(weight) == 2 and all("evict_last" in line for line in weight)
    # Pointers take the mask's shape: the row's index already has it, the weight's (moving
    # along r only) is broadcast over x by zeros.
    rows_at = [line for line in src.splitlines() if row in line]
    assert len(rows_at) == 3 and not any("zeros_like" in line for line in rows_at)
    assert all("+ tl.zeros_like((xmask & rmask)" in line for line in weight)


def test_scan_and_stable_sort_with_nan(tmp_path: Path) -> None:
    rows, cols = 3, 21
    x = torch.randn(rows, cols)
    x[0, 4], x[2, :6] = NAN, 0.5
    cs, sv = torch.empty_like(x), torch.empty_like(x)
    si = torch.empty(rows, cols, dtype=torch.int64)

    def scan(ops: Any, xs: Any, rs: Any) -> None:
        v = ops.load("x", xs[0] * cols + rs[0])
        (res,) = ops.scan((torch.float32,), lambda a, b: (ops.add(a[0], b[0]),), (v,))
        ops.store("cs", xs[0] * cols + rs[0], res)

    def sort(ops: Any, xs: Any, rs: Any) -> None:
        v = ops.load("x", xs[0] * cols + rs[0])
        i = ops.index_expr(rs[0], torch.int64)
        s_v, s_i = ops.sort((torch.float32, torch.int64), (v, i), True, False)
        ops.store("sv", xs[0] * cols + rs[0], s_v)
        ops.store("si", xs[0] * cols + rs[0], s_i)

    run(tmp_path, spec("scan", [rows], [cols], [("scan", scan)],
                       [buf("x", x, "in"), buf("cs", cs, "out")]), x, cs)
    torch.testing.assert_close(cs, torch.cumsum(x, 1), equal_nan=True)
    bufs = [buf("x", x, "in"), buf("sv", sv, "out"), buf("si", si, "out")]
    run(tmp_path, spec("sort", [rows], [cols], [("sort", sort)], bufs), x, sv, si)
    want_v, want_i = torch.sort(x, dim=1, stable=True)
    torch.testing.assert_close(sv, want_v, equal_nan=True)
    assert torch.equal(si, want_i)


def _gather(tmp: Path, idx: torch.Tensor) -> torch.Tensor:
    table, out = torch.randn(10), torch.empty(idx.numel())

    def body(ops: Any, x: Any, r: Any) -> None:
        i = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(10))
        keep = ops.lt(ops.index_expr(x[0], torch.int64), ops.constant(4, torch.int64))
        ops.store("out", x[0], ops.masked(keep, lambda: ops.load("table", i), -1.0))

    bufs = [buf("table", table, "in"), buf("idx", idx, "in"), buf("out", out, "out")]
    run(tmp, spec("gather", [idx.numel()], [], [("outer", body)], bufs), table, idx, out)
    want = table[idx.clamp(-10, 9)]
    want[4:] = -1.0
    torch.testing.assert_close(out, want)
    return out


def test_masked_indirect_gather_and_bounds_error(tmp_path: Path) -> None:
    _gather(tmp_path, torch.tensor([3, -1, 9, 0, 5, 2]))
    with pytest.raises(KernelIndexError) as info:
        _gather(tmp_path, torch.tensor([3, 10, 9, 0, 5, 2]))
    err = info.value
    assert (err.kernel, err.buffer, err.index, err.size) == ("gather", "table", 10, 10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.int16, torch.bfloat16])
def test_atomic_add_with_duplicate_indices(tmp_path: Path, dtype: torch.dtype) -> None:
    idx = torch.tensor([0, 1, 1, 3, 3, 3, 2, 0, 1, 3, 3])
    src = torch.arange(1, 12).to(dtype)
    out = torch.full((5,), 2).to(dtype)
    want = out.clone().index_put_((idx,), src, accumulate=True)

    def body(ops: Any, x: Any, r: Any) -> None:
        i = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(5))
        ops.store("out", i, ops.load("src", x[0]), "atomic_add")

    bufs = [buf("idx", idx, "in"), buf("src", src, "in"), buf("out", out, "inout")]
    run(tmp_path, spec("scatter", [11], [], [("outer", body)], bufs), idx, src, out)
    assert torch.equal(out, want)


def test_full_reduction_to_scalar_and_device_assert(tmp_path: Path) -> None:
    x, total = torch.randn(3000, dtype=torch.float64), torch.empty(1, dtype=torch.float64)

    def body(ops: Any, xs: Any, rs: Any) -> None:
        v = ops.load("x", rs[0])
        ops.device_assert_async(ops.eq(v, v), "x has a NaN")
        ops.store_reduction("t", 0, ops.reduction(torch.float64, torch.float64, "sum", v))

    s = spec("full", [], [3000], [("reduce", body)], [buf("x", x, "in"), buf("t", total, "out")])
    run(tmp_path, s, x, total)
    torch.testing.assert_close(total[0], x.sum())
    x[1234] = NAN
    with pytest.raises(KernelAssertError, match="x has a NaN"):
        run(tmp_path, s, x, total)
