"""Cross-stage reuse of expensive row values (the row cache) and the Welford reciprocal weight."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import backend, buf, compile_one, spec

from polyduct.indexing import size_symbol

INF, NAN = float("inf"), float("nan")


def _softmax_spec(cols: object, transposed_rows: int = 0):  # type: ignore[no-untyped-def]
    """softmax over dim 1 of a (rows, cols) input; with `transposed_rows` the input is read as
    the transpose of a (cols, rows) tensor (a strided view)."""

    def at(xs, rs):  # type: ignore[no-untyped-def]
        if transposed_rows:
            return rs[0] * transposed_rows + xs[0]
        return xs[0] * cols + rs[0]

    def mx(ops, xs, rs):  # type: ignore[no-untyped-def]
        red = ops.reduction(torch.float32, torch.float32, "max", ops.load("x", at(xs, rs)))
        ops.store_reduction("m", xs[0], red)

    def exp_shifted(ops, xs, rs):  # type: ignore[no-untyped-def]
        return ops.exp(ops.sub(ops.load("x", at(xs, rs)), ops.load("m", xs[0])))

    def sm(ops, xs, rs):  # type: ignore[no-untyped-def]
        e = exp_shifted(ops, xs, rs)
        ops.store_reduction("s", xs[0], ops.reduction(torch.float32, torch.float32, "sum", e))

    def norm(ops, xs, rs):  # type: ignore[no-untyped-def]
        e = exp_shifted(ops, xs, rs)
        ops.store("out", xs[0] * cols + rs[0], ops.truediv(e, ops.load("s", xs[0])))

    return [("reduce", mx), ("reduce", sm), ("inner", norm)]


def _edge_rows(rows: int, cols: int) -> torch.Tensor:
    x = torch.randn(rows, cols) * 4
    x[0, cols - 1] = NAN
    x[1, :] = -INF
    x[2, cols // 2] = INF
    x[3, :] = 0.0
    return x


def test_softmax_keeps_exp_for_the_last_stage(tmp_path: Path) -> None:
    rows, cols = 7, 301
    x, out = _edge_rows(rows, cols), torch.empty(rows, cols)
    bufs = [
        buf("x", x, "in"),
        buf("m", torch.float32, "local", rows),
        buf("s", torch.float32, "local", rows),
        buf("out", out, "out"),
    ]
    be = backend(tmp_path)
    s = spec("softmax", [rows], [cols], _softmax_spec(cols), bufs)
    source = be.codegen(s).source
    assert source.count("std::exp") == 2  # one in the reduce stage (and its tail), none after
    assert "alignas(64) float pd_row" in source
    compile_one(be, s)(x, out)
    torch.testing.assert_close(out, torch.softmax(x, 1), equal_nan=True)


@pytest.mark.parametrize("cols", [5, 64, 300])
def test_symbolic_row_length_chooses_at_run_time(tmp_path: Path, cols: int) -> None:
    s0 = size_symbol("s0")
    rows = 6
    x = _edge_rows(rows, cols)
    base = x.t().contiguous()  # read transposed: a row of the softmax is a column of `base`
    out = torch.empty(rows, cols)
    bufs = [
        buf("x", torch.float32, "in", 6 * s0),
        buf("m", torch.float32, "local", rows),
        buf("s", torch.float32, "local", rows),
        buf("out", torch.float32, "out", 6 * s0),
    ]
    be = backend(tmp_path, row_cache_limit=64)
    s = spec("softmax_dyn", [rows], [s0], _softmax_spec(s0, transposed_rows=rows), bufs, [s0])
    source = be.codegen(s).source
    assert "if (pd_rnumel <= 64) {" in source
    assert "pd_array<float> pd_row" in source
    compile_one(be, s)(base, out, cols)
    torch.testing.assert_close(out, torch.softmax(x, 1), equal_nan=True)


def test_no_reuse_across_a_store_to_the_loaded_buffer(tmp_path: Path) -> None:
    rows, cols = 3, 40
    x = torch.randn(rows, cols)
    want_sum = torch.exp(x).sum(1)
    total, out = torch.empty(rows), torch.empty(rows, cols)

    def first(ops, xs, rs):  # type: ignore[no-untyped-def]
        e = ops.exp(ops.load("x", xs[0] * cols + rs[0]))
        ops.store_reduction("t", xs[0], ops.reduction(torch.float32, torch.float32, "sum", e))

    def overwrite(ops, xs, rs):  # type: ignore[no-untyped-def]
        ops.store("x", xs[0] * cols + rs[0], ops.constant(0.0, torch.float32))

    def last(ops, xs, rs):  # type: ignore[no-untyped-def]
        ops.store("out", xs[0] * cols + rs[0], ops.exp(ops.load("x", xs[0] * cols + rs[0])))

    bufs = [buf("x", x, "inout"), buf("t", total, "out"), buf("out", out, "out")]
    stages = [("reduce", first), ("inner", overwrite), ("inner", last)]
    be = backend(tmp_path)
    s = spec("overwrite", [rows], [cols], stages, bufs)
    assert "pd_row" not in be.codegen(s).source
    compile_one(be, s)(x, total, out)
    torch.testing.assert_close(total, want_sum)
    torch.testing.assert_close(out, torch.ones(rows, cols))


def test_local_stored_inside_a_row_loop_disables_reuse(tmp_path: Path) -> None:
    rows, cols = 2, 20
    x, out, total = torch.randn(rows, cols), torch.empty(rows, cols), torch.empty(rows)

    def first(ops, xs, rs):  # type: ignore[no-untyped-def]
        e = ops.exp(ops.add(ops.load("x", xs[0] * cols + rs[0]), ops.load("c", xs[0])))
        ops.store_reduction("t", xs[0], ops.reduction(torch.float32, torch.float32, "sum", e))

    def carry(ops, xs, rs):  # type: ignore[no-untyped-def]
        # reads the local before writing it: from the second element on, the value it reads
        # is the previous element's, not the one the first stage saw
        e = ops.exp(ops.add(ops.load("x", xs[0] * cols + rs[0]), ops.load("c", xs[0])))
        ops.store("out", xs[0] * cols + rs[0], e)
        ops.store("c", xs[0], ops.load("x", xs[0] * cols + rs[0]))

    bufs = [
        buf("x", x, "in"),
        buf("c", torch.float32, "local", rows),
        buf("t", total, "out"),
        buf("out", out, "out"),
    ]
    be = backend(tmp_path)
    s = spec("carry", [rows], [cols], [("reduce", first), ("inner", carry)], bufs)
    assert "pd_row" not in be.codegen(s).source
    compile_one(be, s)(x, total, out)
    prev = torch.cat([torch.zeros(rows, 1), x[:, :-1]], 1)
    torch.testing.assert_close(out, torch.exp(x + prev))
    torch.testing.assert_close(total, torch.exp(x).sum(1))


def test_masked_welford_lanes_keep_their_own_weights(tmp_path: Path) -> None:
    rows, cols = 3, 100
    x = torch.randn(rows, cols, dtype=torch.float64) + 3
    outs = [torch.empty(rows, dtype=torch.float64) for _ in range(3)]

    def body(ops, xs, rs):  # type: ignore[no-untyped-def]
        r = ops.index_expr(rs[0], torch.int64)
        keep = ops.ne(ops.mod(r, ops.constant(3, torch.int64)), ops.constant(0, torch.int64))

        def add() -> None:
            v = ops.load("x", xs[0] * cols + rs[0])
            res = ops.reduction(torch.float64, torch.float64, "welford_reduce", v)
            for i, value in enumerate(res):
                ops.store_reduction(f"o{i}", xs[0], value)

        ops.masked(keep, add, None)

    bufs = [buf("x", x, "in")] + [buf(f"o{i}", o, "out") for i, o in enumerate(outs)]
    be = backend(tmp_path)
    s = spec("masked_welford", [rows], [cols], [("reduce", body)], bufs)
    assert "add_masked" in be.codegen(s).source
    compile_one(be, s)(x, *outs)
    kept = x[:, torch.arange(cols) % 3 != 0]
    mean, m2, weight = outs
    torch.testing.assert_close(weight, torch.full((rows,), float(kept.shape[1]), dtype=x.dtype))
    torch.testing.assert_close(mean, kept.mean(1))
    torch.testing.assert_close(m2 / weight, kept.var(1, unbiased=False))
