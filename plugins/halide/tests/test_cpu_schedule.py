"""The default CPU schedule: how reductions are vectorised, and that vector lanes keep torch's
NaN, tie and exactness rules."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import halide as hl
import pytest
import sympy
import torch

from polyduct.cache import import_module_file
from polyduct.indexing import index_vars
from polyduct.kernel import KernelBuffer, KernelSpec, Stage
from polyduct_halide import cpu
from polyduct_halide.backend import HalideBackend
from polyduct_halide.cpu import LANES, ROWS, vectorisation

ROWS_N, COLS_N = 5, 37  # 37: four vectors of 8 and a tail of 5
(X0, X1), (R0,) = index_vars("x", 2), index_vars("r", 1)


def test_vectorisation_follows_the_load_strides() -> None:
    assert vectorisation([R0 + COLS_N * X0], [X0], R0) == LANES  # along the row
    assert vectorisation([R0 + COLS_N * X0, X0], [X0], R0) == LANES  # a per-row value: broadcast
    assert vectorisation([ROWS_N * R0 + X0], [X0], R0) == ROWS  # transposed: across rows
    assert vectorisation([ROWS_N * R0 + 3 * X0], [X0], R0) == ""  # strided both ways: serial
    middle = 7 * COLS_N * X0 + 7 * R0 + X1  # x.sum(1) of a (n, COLS_N, 7) tensor
    assert vectorisation([middle], [X0, X1], R0) == f"{ROWS}1"


def _spec(
    name: str, rtype: str, out_dtype: torch.dtype, transposed: bool, rows: int = ROWS_N
) -> KernelSpec:
    index = rows * R0 + X0 if transposed else R0 + COLS_N * X0

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", index)
        ops.store_reduction("out", x[0], ops.reduction(out_dtype, value.dtype, rtype, value))

    bufs = (
        KernelBuffer("a", torch.float32, "in", sympy.Integer(rows * COLS_N)),
        KernelBuffer("out", out_dtype, "out", sympy.Integer(rows)),
    )
    return KernelSpec(name, (rows,), (COLS_N,), (Stage("reduce", body),), bufs)


def _rows_with_nan_and_ties() -> torch.Tensor:
    a = torch.randn(ROWS_N, COLS_N)
    a[0, 35] = float("nan")  # in the tail
    a[1, 3] = a[1, 11] = a[1, 36] = 9.0  # a tie in three lanes: the first index wins
    a[2, 9] = a[2, 2] = -9.0  # ties for the minimum, the later one in a lower lane
    a[3, :] = float("-inf")  # no finite value
    a[4, 8] = float("nan")  # NaN in lane 0 of the second vector
    a[4, 30] = float("nan")
    return a


@pytest.mark.parametrize("transposed", [False, True], ids=["rows", "columns"])
@pytest.mark.parametrize("rtype", ["max", "min", "argmax", "argmin"])
def test_vector_lanes_keep_nan_and_tie_rules(rtype: str, transposed: bool) -> None:
    out_dtype = torch.int64 if rtype.startswith("arg") else torch.float32
    spec = _spec(f"vec_{rtype}_{transposed}", rtype, out_dtype, transposed)
    a = _rows_with_nan_and_ties()
    src = a.t().contiguous().t() if transposed else a  # same values, column-major memory
    out = torch.empty(ROWS_N, dtype=out_dtype)
    backend = HalideBackend()
    backend.load([backend.codegen(spec)])[spec.name](src, out)
    want = {"max": a.amax, "min": a.amin, "argmax": a.argmax, "argmin": a.argmin}[rtype](1)
    torch.testing.assert_close(out, want, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("transposed", [False, True], ids=["rows", "columns"])
def test_reductions_are_vectorised(transposed: bool, tmp_path: Any) -> None:
    # 70 rows: two full vectors of 32 outputs side by side (fewer would not fill one)
    spec = _spec(f"vec_sum_{transposed}", "sum", torch.float32, transposed, rows=70)
    path = tmp_path / "pipeline.py"
    path.write_text(HalideBackend().codegen(spec).source)
    module = import_module_file(path, f"vec_sum_{transposed}")
    target = hl.get_host_target().with_feature(hl.TargetFeature.StrictFloat)
    pipeline, arguments = module.build(target)
    stmt = tmp_path / "kernel.stmt"
    pipeline.compile_to_lowered_stmt(str(stmt), arguments, hl.StmtOutputFormat.Text, target)
    lanes = "x32" if transposed else "x8"
    assert f"float32{lanes}" in stmt.read_text()


@pytest.mark.parametrize(
    ("iterations", "work", "per_task"),
    [(64, 64, 256), (1024, 1024, 32), ((1 << 20) // 8, 8, 4096), (10, 0, 16384)],
    ids=["64x64-rows", "1024x1024-rows", "1M-vectors", "no-work"],
)
def test_parallel_tasks_are_not_smaller_than_min_work(
    iterations: int, work: int, per_task: int
) -> None:
    """About `TASKS` tasks, but each gets at least `MIN_TASK_WORK` elements: a 64x64 kernel runs
    as one task (64 rows of 64 per task: 0.066 -> 0.037 ms for a 64x64 softmax, 2 threads)."""
    assert hl.evaluate(cpu._task(iterations, work)) == per_task


_HEAVY_PAD = """
import torch
import polyduct
def fn(a):
    return torch.nn.functional.pad(torch.remainder(a, a), (2, 0), mode="circular")
a = torch.randn(16, 7, dtype=torch.float64).t()
got = torch.compile(fn, backend="polyduct", options={"kernels": "halide"}, dynamic=True)(a)
torch.testing.assert_close(got, fn(a), equal_nan=True)
"""


def test_a_kernel_with_float64_fmod_compiles_unpartitioned(tmp_path: Any) -> None:
    """A float64 remainder (`hlfmod`, thousands of IR nodes) in both branches of a circular
    pad: Halide's loop partitioning of the vectorised store ran for over ten minutes (halide
    seed 10923, program 2970). Such kernels are scheduled with no loop partitioned, and compile
    in seconds. Run in a process of its own, so that a hang is a failure, not a stuck suite."""
    env = {**os.environ, "POLYDUCT_CACHE_DIR": str(tmp_path)}
    try:
        done = subprocess.run([sys.executable, "-c", _HEAVY_PAD], env=env, timeout=240,
                              capture_output=True, text=True, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("the kernel did not compile within 240 s")
    assert done.returncode == 0, done.stderr[-3000:]
