"""torch.compile(backend="polyduct", options={"wrapper": "fx"}) against eager, per kernel backend."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch

from polyduct.plugins import PluginOptions, load

BACKENDS = load(PluginOptions()).kernel_backends.names()
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("polyduct.frontend.dynamo") is None,
    reason="the torch.compile frontend (polyduct.frontend.dynamo) is not installed",
)


def model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    h = torch.addmm(b, x, w)
    values, indices = torch.topk(torch.softmax(h, dim=-1), 2)
    return [torch.nn.functional.gelu(h) * 2 + 1, values, indices]


@pytest.mark.parametrize("kernels", BACKENDS)
def test_compiled_model_matches_eager(kernels: str) -> None:
    torch._dynamo.reset()
    graphs: list[Any] = []
    opts = {"kernels": kernels, "wrapper": "fx", "observer": graphs.append}
    compiled = torch.compile(model, backend="polyduct", options=opts, dynamic=True)
    w, b = torch.randn(8, 5), torch.randn(5)
    for rows in (3, 11):
        x = torch.randn(rows, 8)
        for got, want in zip(compiled(x, w, b), model(x, w, b), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert graphs and all(isinstance(g.fn, torch.fx.GraphModule) for g in graphs)
    code = graphs[0].fn.code
    print(code)
    assert "torch.empty_strided" in code and "polyduct_fx_kernels_" in code


def test_empty_tensors_with_any_strides_are_accepted() -> None:
    # The backward graph of an empty tensor's diagonal receives a tangent of strides (0, 0, 1)
    # where (4, 1, 1) was traced: no element is addressed, and the Python wrapper's assert does
    # not compare them. The FX graph's assert did (fuzz, cpp seed 77, program 352).
    def fn(a: torch.Tensor) -> torch.Tensor:
        return torch.cos(a.to(torch.float32)).squeeze(2).diagonal(0, 1, 2)

    a = torch.randn(1, 4, 0, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(fn, backend="polyduct", options={"wrapper": "fx"})
    out = compiled(a)
    out.sum().backward()
    assert out.shape == fn(a).shape and a.grad is not None and a.grad.shape == a.shape
