"""Scans, sort/topk, indexing, random ops, torch.export and option validation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from polyduct.errors import InputMismatch, UnknownName
from polyduct.frontend.export import compile_exported

from .helpers import assert_same, check, compile_fn


def test_cumsum_cumprod(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(4, 9, device=device)
    check(lambda x: (x.cumsum(1), x.cumprod(0), torch.logcumsumexp(x, 1)), backends, x)
    check(lambda x: x.cumsum(0), backends, torch.randint(-5, 5, (11,), device=device))


def test_topk_and_sort(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(5, 12, device=device)
    check(lambda x: (torch.topk(x, 3, dim=1), torch.sort(x, dim=1, stable=True)), backends, x)


def test_gather_scatter(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(6, 8, device=device)
    idx = torch.randint(0, 8, (6, 3), device=device)

    def fn(x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        g = torch.gather(x, 1, idx)
        ones = torch.ones(6, 3, device=x.device)
        s = torch.zeros(6, 8, device=x.device).scatter_add(1, idx, ones)
        return g * 2, s + 1, x[idx[:, 0] % 6], x.index_select(1, idx[0])

    check(fn, backends, x, idx)


def test_dropout_reproducible_with_seed(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, 0.5, training=True) + 1

    compiled, _ = compile_fn(fn, backends)
    x = torch.randn(64, 16, device=device)
    torch.manual_seed(123)
    first = compiled(x)
    torch.manual_seed(123)
    second = compiled(x)
    assert_same(first, second, atol=0, rtol=0)
    kept = (first - 1) != 0
    assert 0.3 < kept.float().mean().item() < 0.7
    torch.testing.assert_close((first - 1)[kept], (x * 2)[kept])


def test_torch_export(backends: tuple[str, str], device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.ReLU())
    model = model.to(device)
    x = torch.randn(3, 8, device=device)
    exported = torch.export.export(model, (x,))
    kernels, wrapper = backends
    run = compile_exported(exported, {"kernels": kernels, "wrapper": wrapper})
    with torch.no_grad():
        assert_same(run(x), model(x), atol=1e-5)


def test_export_without_parameters_or_mutations(backends: tuple[str, str], device: str) -> None:
    """The direct call path: user inputs in, one output out (NaN, inf and -0 among the inputs)."""

    class Rowwise(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x, -1) * x.amax(-1, keepdim=True)

    x = torch.randn(5, 33, device=device)
    x[0, 3], x[1, 4], x[2, 5], x[3, 6] = float("nan"), float("inf"), -0.0, float("-inf")
    kernels, wrapper = backends
    run = compile_exported(
        torch.export.export(Rowwise(), (x,)), {"kernels": kernels, "wrapper": wrapper}
    )
    assert_same(run(x), Rowwise()(x))
    y = torch.randn(5, 33, device=device).t().contiguous().t()  # column-major: not as exported
    with pytest.raises(InputMismatch, match="arg_0.*stride"):
        run(y)


def test_unknown_backend_lists_installed(device: str) -> None:
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x + 1, backend="polyduct", options={"kernels": "no-such"})
    with pytest.raises(Exception, match="unknown kernel backend 'no-such'; installed: .*reference"):
        fn(torch.randn(3, device=device))
    with pytest.raises(UnknownName):
        from polyduct import plugins
        from polyduct.frontend.options import FrontendOptions

        FrontendOptions(kernels="no-such").validate(plugins.load())


def test_torch_export_input_mutation_and_overrides(backends: tuple[str, str], device: str) -> None:
    from polyduct.overrides import OpOverride, Scope

    class Mutates(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            x.add_(y)
            return torch.softmax(x, 1) * 2

    x, y = torch.randn(3, 5, device=device), torch.randn(3, 5, device=device)
    exported = torch.export.export(Mutates(), (x.clone(), y))
    kernels, wrapper = backends
    scope = Scope(ops=(OpOverride("aten._softmax", extern=True),))
    run = compile_exported(exported, {"kernels": kernels, "wrapper": wrapper, "overrides": scope})
    mine = x.clone()
    assert_same(run(mine, y), torch.softmax(x + y, 1) * 2)
    assert_same(mine, x + y)
    assert "aten._softmax.default" in run.compiled.report.ops()
