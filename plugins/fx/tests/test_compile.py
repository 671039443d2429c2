"""torch.compile(backend="polyduct", options={"wrapper": "fx"}) against eager, per kernel backend."""

from __future__ import annotations

import importlib.util

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
    opts = {"kernels": kernels, "wrapper": "fx"}
    compiled = torch.compile(model, backend="polyduct", options=opts, dynamic=True)
    w, b = torch.randn(8, 5), torch.randn(5)
    for rows in (3, 11):
        x = torch.randn(rows, 8)
        for got, want in zip(compiled(x, w, b), model(x, w, b), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
