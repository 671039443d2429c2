"""Pointwise kernels put the SIMD loop on the dimension their loads step through contiguously."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy
import torch
from helpers import backend, buf, compile_one, spec

from polyduct.indexing import index_vars
from polyduct.kernel import KernelSpec
from polyduct_cpp.codegen import _inner_dim

X0, X1, X2 = index_vars("x", 3)
S0 = sympy.Symbol("s0", integer=True, positive=True)


def test_inner_dim_is_last_unless_loads_are_transposed() -> None:
    assert _inner_dim([X0 * 8 + X1], 2) == 1  # contiguous
    assert _inner_dim([X1], 2) == 1  # broadcast along x0
    assert _inner_dim([X0 + 5 * X1], 2) == 0  # transposed
    assert _inner_dim([X0 + S0 * X1], 2) == 0  # transposed, symbolic stride
    assert _inner_dim([X0 + 5 * X1, 3 * X0 + X1, 3 * X0 + X1], 2) == 1  # most loads contiguous
    assert _inner_dim([X0 * 6 + X1 + 2 * X2], 3) == 1
    assert _inner_dim([], 2) == 1


def _transposed_gelu_grad(rows: int | sympy.Symbol, cols: int) -> KernelSpec:
    """out[i, j] = g[j, i] * gelu'(z[j, i]): both inputs are read transposed."""

    def body(ops, x, r):  # type: ignore[no-untyped-def]
        src = x[0] + rows * x[1]
        z = ops.load("z", src)
        cdf = ops.mul(
            ops.add(
                ops.erf(ops.mul(z, ops.constant(0.7071067811865476, torch.float32))),
                ops.constant(1.0, torch.float32),
            ),
            ops.constant(0.5, torch.float32),
        )
        pdf = ops.mul(
            ops.exp(ops.mul(ops.mul(z, z), ops.constant(-0.5, torch.float32))),
            ops.constant(0.3989422804014327, torch.float32),
        )
        ops.store(
            "out", x[0] * cols + x[1], ops.mul(ops.load("g", src), ops.add(cdf, ops.mul(z, pdf)))
        )

    numel = rows * cols
    return spec(
        "gelu_grad_t",
        [rows, cols],
        [],
        [("outer", body)],
        [
            buf("g", torch.float32, "in", numel),
            buf("z", torch.float32, "in", numel),
            buf("out", torch.float32, "out", numel),
        ],
        size_args=[rows] if isinstance(rows, sympy.Symbol) else [],
    )


def _reference(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    cdf = 0.5 * (1 + torch.erf(z * 0.7071067811865476))
    pdf = torch.exp(-0.5 * z * z) * 0.3989422804014327
    return (g * (cdf + z * pdf)).t()


@pytest.mark.parametrize("rows, cols", [(256, 64), (17, 5), (2, 9)])
def test_transposed_pointwise_runs_with_swapped_loops(tmp_path: Path, rows: int, cols: int) -> None:
    be = backend(tmp_path, parallel_threshold=512)
    source = be.codegen(_transposed_gelu_grad(rows, cols)).source
    # the SIMD loop runs over x0 (contiguous loads), within tiles: the transposed store goes
    # through a tile array (test_tiles.py)
    assert "for (int64_t x0 = pd_ib; x0 < pd_ie; ++x0)" in source and "pd_tile0[" in source
    kernel = compile_one(be, _transposed_gelu_grad(rows, cols))
    g, z = torch.randn(cols, rows), torch.randn(cols, rows)
    z[0, 0] = float("nan")
    out = torch.empty(rows, cols)
    kernel(g, z, out)
    torch.testing.assert_close(out, _reference(g, z), equal_nan=True)


def test_transposed_pointwise_with_a_size_symbol(tmp_path: Path) -> None:
    kernel = compile_one(backend(tmp_path), _transposed_gelu_grad(S0, 6))
    for rows in (3, 40):
        g, z = torch.randn(6, rows), torch.randn(6, rows)
        out = torch.empty(rows, 6)
        kernel(g, z, out, rows)
        torch.testing.assert_close(out, _reference(g, z))
