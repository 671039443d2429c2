"""CPU convolutions run channels-last where their weights are cheap to give that layout
(`polyduct.lowering.layouts`): MobileNet-style blocks of 1x1 and depthwise convolutions."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from .helpers import check, compile_fn


@pytest.fixture(autouse=True)
def _cpu_only(device: str) -> None:
    if device != "cpu":
        pytest.skip("the channels-last plan is for oneDNN's CPU convolutions")


def _weights(*shapes: tuple[int, ...]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=gen) / s[1] ** 0.5 for s in shapes]


def _inverted_residual(x: torch.Tensor, w: list[torch.Tensor]) -> torch.Tensor:
    expand, depthwise, project = w
    h = F.relu6(F.conv2d(x, expand))
    h = F.silu(F.conv2d(h, depthwise, padding=1, groups=depthwise.shape[0]))
    return x + F.conv2d(h, project)


def _sources(graphs: list[Any]) -> str:
    """The graphs' wrapper sources, sizes and strides written as tuples (the FX wrapper's
    are lists)."""
    return "\n".join(g.source for g in graphs).replace("[", "(").replace("]", ")")


def test_depthwise_block_computes_channels_last(backends: tuple[str, str]) -> None:
    """The depthwise convolution's input is computed with channels-last strides (so oneDNN
    reorders nothing) and the results match eager's, edge values included."""
    w = _weights((24, 8, 1, 1), (24, 1, 3, 3), (8, 24, 1, 1))
    x = torch.randn(2, 8, 13, 11)
    x[0, 0, 0, 0], x[1, 3, 5, 5], x[0, 5, 2] = float("nan"), float("inf"), -0.0
    graphs = check(lambda t: _inverted_residual(t, w).sum(dim=(2, 3)), backends, x, atol=1e-4)
    # (2, 24, 13, 11) channels-last: strides (13 * 11 * 24, 1, 11 * 24, 24)
    assert "(3432, 1, 264, 24)" in _sources(graphs)


def test_returned_convolution_keeps_eager_strides(backends: tuple[str, str]) -> None:
    """A convolution result the graph returns (a training forward saves it) keeps eager's
    strides: the plan leaves such a convolution alone."""
    w = _weights((24, 8, 1, 1), (24, 1, 3, 3), (8, 24, 1, 1))

    def fn(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu6(F.conv2d(t, w[0]))
        return h, F.conv2d(h, w[1], padding=1, groups=24)

    x = torch.randn(2, 8, 9, 7)
    compiled, _ = compile_fn(fn, backends)
    for got, want in zip(compiled(x), fn(x), strict=True):
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def _conv_bn_pool(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    h = F.relu(F.conv2d(x, w, padding=1) * scale.view(1, -1, 1, 1) + 0.1)
    return F.conv2d(F.max_pool2d(h, 2), w.new_ones(4, 16, 1, 1)).mean(dim=(2, 3))


def test_a_graph_input_read_several_times_is_copied_channels_last(
    backends: tuple[str, str],
) -> None:
    """The small CNN's first 3x3 convolution (stride 1) reads each input pixel nine times: its
    image is copied channels-last; the normalised, activated map its max pool reads is stored
    channels-last too (it was row-major between two channels-last values)."""
    w, scale = _weights((16, 3, 3, 3))[0], torch.rand(16) + 0.5
    x = torch.randn(2, 3, 12, 10)
    x[1, 2, 3, 4] = float("nan")
    graphs = check(lambda t: _conv_bn_pool(t, w, scale), backends, x, atol=1e-4)
    source = _sources(graphs)
    assert "(360, 1, 30, 3)" in source  # the image, (2, 3, 12, 10) channels-last
    assert "(1920, 1, 160, 16)" in source  # the pooled map, (2, 16, 12, 10) channels-last
    assert "(1920, 120, 10, 1)" not in source


def test_dense_convolutions_stay_nchw(backends: tuple[str, str]) -> None:
    """3x3 convolutions over few pixels would copy more weight elements than they compute:
    the plan declines, and no channels-last buffer is made."""
    w = _weights((64, 32, 3, 3), (64, 64, 3, 3))

    def fn(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.relu(F.conv2d(t.relu(), w[0], padding=1)), w[1], padding=1)

    graphs = check(fn, backends, torch.randn(2, 32, 4, 4), atol=1e-4)
    assert "(1024, 1, 256, 64)" not in _sources(graphs)


def test_as_strided_reads_eager_layout(backends: tuple[str, str]) -> None:
    """`as_strided` addresses storage as eager lays it out, also when a value feeding a
    channels-last convolution was stored channels-last."""
    w = _weights((16, 8, 1, 1), (16, 1, 3, 3))

    def fn(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.conv2d(t, w[0]).relu()
        y = F.conv2d(h, w[1], padding=1, groups=16)
        return y.sum(), torch.as_strided(h, (4, 5), (7, 3), 2).cos()

    check(fn, backends, torch.randn(2, 8, 6, 5), atol=1e-4)


@pytest.mark.parametrize("layout", ["channels_last", "eager"])
def test_conv_layout_option_overrides_the_cost_rule(backends: tuple[str, str], layout: str) -> None:
    """`conv_layout="channels_last"` plans the dense convolutions the cost rule declines, and
    `"eager"` plans not even the cheap depthwise block; both give eager's results."""
    dense = _weights((64, 32, 3, 3), (64, 64, 3, 3))
    cheap = _weights((24, 8, 1, 1), (24, 1, 3, 3), (8, 24, 1, 1))

    def fn(t: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.conv2d(F.relu(F.conv2d(t.relu(), dense[0], padding=1)), dense[1], padding=1)
        return h.sin(), _inverted_residual(u, cheap).sum(dim=(2, 3))

    x, u = torch.randn(2, 32, 4, 4), torch.randn(2, 8, 13, 11)
    x[1, 2, 3, 0], u[0, 1, 2, 3] = float("nan"), float("-inf")
    compiled, graphs = compile_fn(fn, backends, {"conv_layout": layout})
    for got, want in zip(compiled(x, u), fn(x, u), strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, equal_nan=True)
    sources = _sources(graphs)
    planned = "(1024, 1, 256, 64)" in sources, "(3432, 1, 264, 24)" in sources
    assert planned == ((True, True) if layout == "channels_last" else (False, False))


def test_conv_layout_option_is_checked() -> None:
    with pytest.raises(Exception, match="conv_layout"):
        torch.compile(lambda t: t + 1, backend="polyduct", options={"conv_layout": "nhwc"})(
            torch.ones(2)
        )
