"""Normalisations, MLP, attention, CNN: compiled with polyduct and compared with eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from .helpers import assert_same, check, compile_fn, kernels_of

LOW = [torch.float32, torch.bfloat16]


def _tol(dtype: torch.dtype) -> float:
    return 1e-4 if dtype == torch.float32 else 3e-2


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_softmax(backends: tuple[str, str], device: str, dtype: torch.dtype) -> None:
    x = torch.randn(9, 37, dtype=dtype, device=device)
    graphs = check(lambda x: torch.softmax(x, -1), backends, x, atol=_tol(dtype), rtol=_tol(dtype))
    assert kernels_of(graphs) <= 2


def test_log_softmax(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(5, 3, 17, device=device)
    x[0, 0, 0] = float("-inf")
    graphs = check(lambda x: torch.log_softmax(x, -1), backends, x)
    assert kernels_of(graphs) <= 2


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_layernorm(backends: tuple[str, str], device: str, dtype: torch.dtype) -> None:
    x, w, b = (
        torch.randn(6, 64, dtype=dtype, device=device),
        torch.randn(64, dtype=dtype, device=device),
        torch.randn(64, dtype=dtype, device=device),
    )
    fn = lambda x, w, b: F.layer_norm(x, (64,), w, b)
    graphs = check(fn, backends, x, w, b, atol=_tol(dtype), rtol=_tol(dtype))
    assert kernels_of(graphs) <= 2


def test_rmsnorm(backends: tuple[str, str], device: str) -> None:
    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    graphs = check(
        rms, backends, torch.randn(10, 48, device=device), torch.randn(48, device=device)
    )
    assert kernels_of(graphs) <= 2


def test_reductions(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(7, 19, device=device)
    x[2, 3] = float("nan")

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mx = x.max(1)
        return (
            x.sum(0),
            x.amin(1),
            x.argmax(1),
            mx.values,
            mx.indices,
            x.mean(),
            torch.var_mean(x, 1),
            x.std(0),
            (x > 0).any(1),
            (x > -5).all(),
            x.logsumexp(1),
        )

    check(fn, backends, x)
    check(
        lambda a: (a.sum(), a.prod(1), a.max(0).indices),
        backends,
        torch.randint(-3, 4, (5, 6), device=device),
    )


def test_gelu_mlp(backends: tuple[str, str], device: str) -> None:
    mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16)).to(device)
    with torch.no_grad():
        graphs = check(mlp, backends, torch.randn(8, 32, device=device), atol=1e-4)
    assert any("aten.mm.default" in g.report.ops() for g in graphs)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = torch.bmm(q, k.transpose(1, 2)) / q.shape[-1] ** 0.5
    return torch.bmm(torch.softmax(scores, -1), v)


def test_attention_block(backends: tuple[str, str], device: str) -> None:
    q, k, v = (torch.randn(2, 10, 16, device=device) for _ in range(3))
    graphs = check(attention, backends, q, k, v, atol=1e-4)
    assert any("aten.bmm.default" in g.report.ops() for g in graphs)


def test_small_cnn(backends: tuple[str, str], device: str) -> None:
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 4, 3),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    ).to(device)
    with torch.no_grad():
        graphs = check(net, backends, torch.randn(2, 3, 12, 12, device=device), atol=1e-4)
    # the convolutions are extern calls; relu + max pool, and relu + average pool, fuse; on the
    # CPU both convolutions run channels-last, the image and both weights copied so (3 kernels)
    assert [op for g in graphs for op in g.report.ops()] == ["aten.convolution.default"]
    assert kernels_of(graphs) == (5 if device == "cpu" else 2)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_batch_norm(backends: tuple[str, str], device: str, training: bool) -> None:
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(4).to(device).train(training)
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()
        bn.bias.normal_()
    twin = nn.BatchNorm2d(4).to(device).train(training)
    twin.load_state_dict(bn.state_dict())
    x = torch.randn(2, 4, 5, 5, device=device)
    compiled, graphs = compile_fn(bn, backends)
    with torch.no_grad():
        assert_same(compiled(x), twin(x), atol=1e-5)
    assert_same(bn.running_mean, twin.running_mean)  # updated in place in train mode
    assert_same(bn.running_var, twin.running_var)
    assert not [op for g in graphs for op in g.report.ops()]
