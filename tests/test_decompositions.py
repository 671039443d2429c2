"""polyduct's own decompositions, for ops some supported torch releases leave undecomposed."""

from __future__ import annotations

import pytest
import torch

from polyduct.frontend.decompositions import max_pool2d_backward


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
