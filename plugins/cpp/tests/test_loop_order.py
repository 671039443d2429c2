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


def _channel_sums(batch: int, channels: int, inner: tuple[int, ...]) -> KernelSpec:
    """out[c] = sum over (n, *inner) of a[n, c, *inner]: BatchNorm's backward sums, the reduction
    dims (batch, height, width) around the kept channel."""
    plane = 1
    for size in inner:
        plane *= size

    def body(ops, x, r):  # type: ignore[no-untyped-def]
        offset, step = r[0] * channels * plane + x[0] * plane, plane
        for var, size in zip(r[1:], inner, strict=True):
            step //= size
            offset += var * step
        ops.store_reduction("acc", x[0], ops.reduction(torch.float32, torch.float32, "sum",
                                                       ops.load("a", offset)))

    def write(ops, x, r):  # type: ignore[no-untyped-def]
        ops.store("out", x[0], ops.load("acc", x[0]))

    return spec(
        "channel_sums",
        [channels],
        [batch, *inner],
        [("reduce", body), ("outer", write)],
        [
            buf("a", torch.float32, "in", batch * channels * plane),
            buf("acc", torch.float32, "local", channels),
            buf("out", torch.float32, "out", channels),
        ],
    )


@pytest.mark.parametrize("inner", [(32, 32), (3, 16), (4, 5)])
def test_reduction_over_several_dims_steps_its_last_dim_with_the_lane(
    tmp_path: Path, inner: tuple[int, int]
) -> None:
    # ResNet's BatchNorm backward split every lane's flat reduction index with a division and a
    # modulo per dim (`r2 = pd_rf % 32`, `r1 = pd_rf / 32 % 32`): no contiguous vector loads, a
    # third of the training step's generated code. When the last dim holds whole lane blocks,
    # a block's coordinates are computed once and the last one steps with the lane.
    be = backend(tmp_path)
    source = be.codegen(_channel_sums(2, 3, inner)).source
    whole = inner[-1] % 16 == 0
    assert ("const int64_t r2 = pd_rb_r2 + pd_l;" in source) == whole
    kernel = compile_one(be, _channel_sums(2, 3, inner))
    a = torch.randn(2, 3, *inner)
    a[1, 2, 0, 1] = float("nan")
    out = torch.empty(3)
    kernel(a, out)
    torch.testing.assert_close(out, a.sum((0, 2, 3)), equal_nan=True, rtol=1e-5, atol=1e-5)


def test_bool_loads_are_bytes_compared_with_zero(tmp_path: Path) -> None:
    # BatchNorm's ReLU backward masks the gradient with a saved bool tensor. GCC did not
    # vectorise a loop loading `bool`s (a 1-bit mask type to it): the masked per-channel sums
    # ran 3x slower than with a byte load compared with 0, two thirds of a small CNN's step.
    def body(ops, x, r):  # type: ignore[no-untyped-def]
        at = r[0] * 64 + x[0] * 16 + r[1]
        value = ops.where(ops.load("m", at), ops.constant(0.0, torch.float32), ops.load("g", at))
        ops.store_reduction("acc", x[0], ops.reduction(torch.float32, torch.float32, "sum", value))

    def write(ops, x, r):  # type: ignore[no-untyped-def]
        ops.store("out", x[0], ops.load("acc", x[0]))

    s = spec("masked_sums", [4], [3, 16], [("reduce", body), ("outer", write)], [
        buf("m", torch.bool, "in", 192), buf("g", torch.float32, "in", 192),
        buf("acc", torch.float32, "local", 4), buf("out", torch.float32, "out", 4)])
    be = backend(tmp_path)
    assert "reinterpret_cast<const uint8_t*>(&in_ptr0[" in be.codegen(s).source
    m, g = torch.rand(3, 4, 16) > 0.5, torch.randn(3, 4, 16)
    out = torch.empty(4)
    compile_one(be, s)(m, g, out)
    torch.testing.assert_close(out, torch.where(m, 0.0, g).sum((0, 2)), rtol=1e-5, atol=1e-5)
