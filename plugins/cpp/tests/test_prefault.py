"""Large fresh outputs are faulted in ahead of the loops (`pd_prefault`), with unchanged results."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy
import torch
from helpers import backend, buf, compile_one, spec

from polyduct.kernel import KernelSpec

ROWS, COLS = 512, 1024  # 2 MiB of float32: over the 1 MiB threshold


def _scale_spec(rows: int | sympy.Expr, cols: int, name: str = "scale") -> KernelSpec:
    def body(ops, x, r):  # type: ignore[no-untyped-def]
        index = x[0] * cols + x[1]
        ops.store("out", index, ops.mul(ops.load("src", index), ops.constant(2.0, torch.float32)))

    numel = rows * cols
    return spec(
        name,
        [rows, cols],
        [],
        [("outer", body)],
        [buf("src", torch.float32, "in", numel), buf("out", torch.float32, "out", numel)],
        size_args=[rows] if isinstance(rows, sympy.Symbol) else [],
    )


def test_only_large_or_symbolic_outputs_are_prefaulted(tmp_path: Path) -> None:
    be = backend(tmp_path)
    assert "pd_prefault(out_ptr0" in be.codegen(_scale_spec(ROWS, COLS)).source
    assert "pd_prefault(" not in be.codegen(_scale_spec(8, COLS, "small")).source
    rows = sympy.Symbol("s0", integer=True, positive=True)
    assert "pd_prefault(out_ptr0" in be.codegen(_scale_spec(rows, COLS, "dynamic")).source


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["fresh", "resident", "offset view"])
def test_prefaulted_outputs_hold_the_results(tmp_path: Path, threads: int, layout: str) -> None:
    kernel = compile_one(backend(tmp_path, parallel_threshold=1024), _scale_spec(ROWS, COLS))
    src = torch.randn(ROWS, COLS)
    if layout == "fresh":
        out = torch.empty(ROWS, COLS)
    elif layout == "resident":
        out = torch.full((ROWS, COLS), float("nan"))
    else:  # starts mid-page: only whole pages inside the buffer are faulted in ahead
        storage = torch.full((ROWS * COLS + 37,), -1.0)
        out = storage[37:].view(ROWS, COLS)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        kernel(src, out)
    finally:
        torch.set_num_threads(previous)
    torch.testing.assert_close(out, src * 2)
    if layout == "offset view":
        assert (storage[:37] == -1.0).all()
