"""Bugs `polyduct fuzz` found in what the scheduler fuses, checked on every CPU backend."""

from __future__ import annotations

import pytest
import torch

ALL_BACKENDS = ("reference", "cpp", "triton", "halide")


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_accumulating_scatter_into_a_dim_of_size_one(backend: str) -> None:
    # An index into a dim of size 1 can only be 0, so the store index of `index_put(...,
    # accumulate=True)` simplified to a plain one and the scatter was fused with the add that
    # reads its result: the buffer was taken for a value of the kernel alone, its earlier
    # contents lost (KeyError: "kernel 'kernel2' has no buffer 'buf3'"; halide seed 9403,
    # programs 2399, 3280 and 8345: the backward of `index_select` of an `unfold`).
    def fn(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        first = torch.ops.aten.index_put(torch.zeros(17, 1, 1), [None, None, p], t[:, :1], True)
        zero = torch.zeros(1, dtype=torch.int64)
        rows = torch.ops.aten.index_put(torch.zeros(17, 1), [None, zero], first.view(17, 1), True)
        return rows + 1

    p, t = torch.tensor([0]), torch.randn(17, 17, 1)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    torch.testing.assert_close(compiled(p, t), fn(p, t))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_gradient_of_index_select_of_an_unfold(backend: str) -> None:
    def fn(a0: torch.Tensor, i1: torch.Tensor) -> torch.Tensor:
        return torch.lerp(a0, torch.index_select(a0.unfold(1, 1, 1), 2, i1), 0.25)

    a, i = torch.randn(17, 1), torch.tensor([0])
    a1, a2 = a.clone().requires_grad_(), a.clone().requires_grad_()
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    compiled(a1, i).sum().backward()
    fn(a2, i).sum().backward()
    torch.testing.assert_close(a1.grad, a2.grad)
