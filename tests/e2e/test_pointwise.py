"""Pointwise programs: one fused kernel, edge values, dtypes, views, in-place, extern fallback."""

from __future__ import annotations

import logging
import re

import pytest
import torch

from polyduct.wrapper.ir import Allocate, Reuse

from .helpers import check, compile_fn, kernels_of, skip_unless_inplace

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(torch.relu(x * 2 - y) + 1).exp() / (y.abs() + 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pointwise_chain_is_one_kernel(
    backends: tuple[str, str], device: str, dtype: torch.dtype
) -> None:
    x, y = (
        torch.randn(7, 33, dtype=dtype, device=device),
        torch.randn(33, dtype=dtype, device=device),
    )
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    graphs = check(chain, backends, x, y, atol=tol, rtol=tol)
    assert kernels_of(graphs) == 1


def test_edge_values(backends: tuple[str, str], device: str) -> None:
    x = torch.tensor(
        [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -3.5, 7.0], device=device
    )
    check(
        lambda a: (
            torch.where(a > 0, a.sqrt(), -a),
            a.isnan(),
            a.clamp(-1, 1),
            torch.maximum(a, a.flip(0)),
        ),
        backends,
        x,
    )


def test_int64_and_bool(backends: tuple[str, str], device: str) -> None:
    a = torch.tensor([torch.iinfo(torch.int64).max, -5, 7, 0, -1, 3], device=device)
    b = torch.tensor([3, 2, -2, 1, 5, 7], device=device)

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return a + b, a // b, a % b, (a > b) & (b > 0), a * 2.5, a ^ b

    check(fn, backends, a, b)


def test_strided_views(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(6, 10, device=device)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = x.t() * 2
        return t, x[1::2, 3:].sin(), x.unsqueeze(0).expand(3, 6, 10) + 1, x.reshape(60).cos()

    check(fn, backends, x)
    check(fn, backends, torch.randn(10, 6, device=device).t())


def test_in_place_user_op(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + 1

    x = torch.randn(5, 5, device=device)
    x_eager = x.clone()
    compiled, _ = compile_fn(fn, backends)
    got = compiled(x)
    want = fn(x_eager)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x, x_eager)


def test_output_aliases_input(backends: tuple[str, str], device: str) -> None:
    check(lambda x: (x.view(4, 3), x.t(), x + 1), backends, torch.randn(3, 4, device=device))


def test_no_lowering_falls_back_to_extern(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(4, 5, device=device).abs() + 0.5
    i = torch.randint(-50, 50, (4, 5), device=device)

    def fn(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # gcd has no lowering (no loop in the op set); median's lowering is absent too
        return torch.gcd(i, i.flip(0)) * 2, torch.special.entr(x.median(1).values) + 1

    graphs = check(fn, backends, x, i)
    fallbacks = [op for g in graphs for op in g.report.ops()]
    assert fallbacks == ["aten.gcd.default", "aten.median.dim"]
    assert "aten.gcd.default: no lowering" in "\n".join(str(g.report) for g in graphs)


def test_thousand_adds_compile(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        for _ in range(1000):
            x = x + 1
        return x

    graphs = check(fn, backends, torch.randn(5, 3, device=device))
    assert kernels_of(graphs) == 1
    allocs = [ln for g in graphs for ln in g.program.lines if isinstance(ln, Allocate)]
    assert len(allocs) == 1  # the intermediates of the chain stay inside the kernel


def test_inplace_reuse_of_dying_buffer(backends: tuple[str, str], device: str) -> None:
    skip_unless_inplace(backends)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.cumsum(0) * 2 + 1).sin()

    graphs = check(fn, backends, torch.randn(5, 3, device=device))
    lines = graphs[0].program.lines
    assert kernels_of(graphs) == 2
    assert sum(isinstance(ln, Allocate) for ln in lines) == 1
    assert [ln.old for ln in lines if isinstance(ln, Reuse)] == ["buf0"]
    assert sorted(graphs[0].specs[1].arg_names().values()) == ["in_out_ptr0"]


def test_no_inplace_when_input_lives_on(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.cumsum(0)
        return y * 2, y.flip(0) + y  # y is an output; flip reads another element

    graphs = check(fn, backends, torch.randn(5, 3, device=device))
    assert not [ln for g in graphs for ln in g.program.lines if isinstance(ln, Reuse)]


def test_fallbacks_are_logged(
    backends: tuple[str, str], device: str, caplog: pytest.LogCaptureFixture
) -> None:
    i = torch.randint(-50, 50, (4, 5), device=device)
    with caplog.at_level(logging.INFO, logger="polyduct.frontend"):
        check(lambda i: torch.gcd(i, i.flip(0)) + 1, backends, i)
    want = r"inference graph 0: \d+ kernels; extern calls:\naten.gcd.default: no lowering"
    assert re.search(want, caplog.text), caplog.text
