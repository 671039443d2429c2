"""polyduct's own decompositions: for ops some supported torch releases leave undecomposed, and
where polyduct's form is preferred (softmax)."""

from __future__ import annotations

import pytest
import torch

from polyduct.lowering.decompositions import max_pool2d_backward, softmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    ("shape", "kernel", "stride", "padding", "ceil"),
    [((2, 3, 11, 13), 3, 2, 1, False), ((3, 9, 7), 2, 1, 0, True), ((1, 2, 8, 8), 2, 2, 0, False)],
)
def test_max_pool2d_backward_matches_aten(
    dtype: torch.dtype, shape: tuple[int, ...], kernel: int, stride: int, padding: int, ceil: bool
) -> None:
    gen = torch.Generator().manual_seed(len(shape) * 31 + kernel)
    x = torch.randn(shape, generator=gen).to(dtype)
    x.view(-1)[::5] = x.view(-1)[0]  # ties: the first maximum of a window wins
    out, indices = torch.ops.aten.max_pool2d_with_indices(x, kernel, stride, padding, 1, ceil)
    grad = torch.randn(out.shape, generator=gen).to(dtype)
    args = (grad, x, [kernel] * 2, [stride] * 2, [padding] * 2, [1, 1], ceil, indices)
    # bfloat16 is checked against the float32 gradient rounded once (aten adds overlapping
    # windows' contributions in bfloat16, rounding at every step; this adds them in float32)
    wide = (grad.float(), x.float(), *args[2:]) if dtype == torch.bfloat16 else args
    expected = torch.ops.aten.max_pool2d_with_indices_backward(*wide).to(dtype)
    got = max_pool2d_backward(*args)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("dtype", "half_to_float"),
    [
        (torch.float32, False),
        (torch.float64, False),
        (torch.bfloat16, False),
        (torch.float16, False),
        (torch.float16, True),
    ],
)
@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_matches_aten(dtype: torch.dtype, half_to_float: bool, dim: int) -> None:
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(7, 33, generator=gen) * 4).to(dtype)
    x[1] = float("-inf")  # an all -inf row: NaN, as in eager
    x[2, 5] = float("inf")
    x[3, 7] = float("nan")
    x[4] = 0.0
    # half_to_float (a float32 result from half input) exists on CUDA only: compare with the
    # float32 softmax of the same values there
    wide = x.float() if half_to_float else x
    expected = torch.ops.aten._softmax(wide, dim, False)
    got = softmax(x, dim, half_to_float)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.is_contiguous()
    tol = 1e-2 if expected.dtype in (torch.float16, torch.bfloat16) else 1e-6
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol, equal_nan=True)
    assert torch.equal(got.isnan(), expected.isnan())


def test_softmax_of_an_empty_tensor() -> None:
    x = torch.empty(0, 5)
    assert softmax(x, -1, False).shape == (0, 5)
