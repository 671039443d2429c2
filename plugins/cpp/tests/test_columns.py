"""Column reductions (`x.sum(0)` of a row-major tensor): one SIMD lane per output, compared with
eager on random values with NaN, infinities, signed zeros, ties and integer extremes, at sizes
with a partial last block and through strided views."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

INF, NAN = float("inf"), float("nan")


def _compiled(fn: Callable[..., Any], **kw: Any) -> tuple[Callable[..., Any], list[Any]]:
    torch._dynamo.reset()
    graphs: list[Any] = []
    opts = {"kernels": "cpp", "observer": graphs.append}
    return torch.compile(fn, backend="polyduct", options=opts, **kw), graphs


def _by_columns(graphs: list[Any]) -> bool:
    return any("pd_xmain" in s.source for g in graphs for s in g.sources.values())


def _spiked(x: torch.Tensor) -> torch.Tensor:
    """`x` with NaN, infinities, signed zeros and repeated values in some columns."""
    x = x.clone()
    x[3, 0], x[7, 1] = NAN, INF
    x[5, 2], x[9, 2] = -INF, INF  # inf - inf in a sum: NaN
    x[:, 3] = 0.0
    x[::2, 4] = -0.0
    x[:, 5] = 1.5  # an all-ties column
    x[2, 6] = x[11, 6] = x[:, 6].max() + 1  # a tie for argmax
    return x


@pytest.mark.parametrize("cols", [64, 67, 130])
@pytest.mark.parametrize(
    "name",
    ["sum", "amax", "amin", "mean", "prod", "argmax", "argmin", "var_mean", "logsumexp"],
)
def test_column_reduction_matches_eager(name: str, cols: int) -> None:
    fns: dict[str, Callable[[torch.Tensor], Any]] = {
        "sum": lambda x: x.sum(0),
        "amax": lambda x: x.amax(0),
        "amin": lambda x: x.amin(0),
        "mean": lambda x: x.mean(0) * 2 + 1,  # an epilogue after the reduction
        "prod": lambda x: (x * 0.01 + 1).prod(0),
        "argmax": lambda x: x.argmax(0),
        "argmin": lambda x: x.argmin(0),
        "var_mean": lambda x: torch.var_mean(x, 0),
        "logsumexp": lambda x: torch.logsumexp(x, 0),  # two reductions: stays on rows
    }
    fn = fns[name]
    x = _spiked(torch.randn(300, cols, generator=torch.Generator().manual_seed(cols)))
    compiled, graphs = _compiled(fn)
    torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert _by_columns(graphs) == (name != "logsumexp")


def test_integer_columns_and_extremes() -> None:
    x = torch.randint(-1000, 1000, (257, 70), generator=torch.Generator().manual_seed(1))
    x[0, :4] = torch.iinfo(torch.int64).max
    x[1, 4:8] = torch.iinfo(torch.int64).min
    for fn in (lambda t: t.sum(0), lambda t: t.amax(0), lambda t: t.argmin(0)):
        compiled, graphs = _compiled(fn)
        assert torch.equal(compiled(x), fn(x))
        assert _by_columns(graphs)


def test_multi_dim_and_strided_view_inputs() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 50, 96, generator=g)
    base = torch.randn(200, 2 * 96, generator=g)

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a.amax((0, 1)), b[:, ::2].sum(0)  # b's view: a row stride of 192, column stride 2

    compiled, graphs = _compiled(fn)
    for got, want in zip(compiled(x, base), fn(x, base), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert _by_columns(graphs)


def test_bias_gradient_fuses_into_one_column_kernel() -> None:
    g = torch.Generator().manual_seed(3)
    grad, z = torch.randn(513, 96, generator=g), torch.randn(513, 96, generator=g)

    def fn(gr: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return (gr * torch.sigmoid(x)).sum(0)

    compiled, graphs = _compiled(fn)
    torch.testing.assert_close(compiled(grad, z), fn(grad, z), rtol=1e-5, atol=1e-5)
    assert _by_columns(graphs)


def test_dynamic_sizes_take_the_column_path_with_a_tail() -> None:
    compiled, graphs = _compiled(lambda t: t.sum(0), dynamic=True)
    for rows, cols in ((40, 70), (9, 131), (33, 5)):  # 5 columns: all in the row loop's tail
        x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows))
        torch.testing.assert_close(compiled(x), x.sum(0), rtol=1e-5, atol=1e-5)
    assert len(graphs) == 1 and _by_columns(graphs)


def test_long_columns_keep_eager_accuracy() -> None:
    # 20,000 float32 values per column: summed in chunks, the error stays near eager's
    x = torch.rand(20000, 64, generator=torch.Generator().manual_seed(4))
    compiled, _ = _compiled(lambda t: t.sum(0))
    exact = x.double().sum(0)
    err = (compiled(x).double() - exact).abs().max().item()
    eager_err = (x.sum(0).double() - exact).abs().max().item()
    assert err <= max(4 * eager_err, 1e-3), (err, eager_err)


@pytest.mark.parametrize(
    "layout",
    ["tokens", "channels_last"],  # Swin's patch embedding; ConvNeXt's permute before its norm
)
@pytest.mark.parametrize("hw", [(16, 16), (5, 19)])  # 19: a partial last block in every row
def test_layer_norm_over_nchw_channels_runs_by_columns(layout: str, hw: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 40, *hw, generator=g)
    x[0, :, 1, 2] = NAN  # one position's channels: its whole output row is NaN
    x[1, 3, 0, 0], x[2, :, 2, 3] = INF, -0.0
    x[2, :, 4, 1] = 7.0  # constant channels: variance 0
    w, b = torch.randn(40, generator=g), torch.randn(40, generator=g)

    def fn(t: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        v = t.flatten(2).transpose(1, 2) if layout == "tokens" else t.permute(0, 2, 3, 1)
        return torch.nn.functional.layer_norm(v, (t.shape[1],), w, b)

    compiled, graphs = _compiled(fn)
    torch.testing.assert_close(compiled(x, w, b), fn(x, w, b), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert _by_columns(graphs)


def test_reduction_over_a_middle_dim_under_dynamic_sizes() -> None:
    # outputs (batch, positions), reduced over the channels between them; sizes change per call
    def fn(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = t.mean(1, keepdim=True)
        return t.amax(1), (t - mean) / (t.var(1, keepdim=True) + 1).sqrt()

    compiled, graphs = _compiled(fn, dynamic=True)
    for shape in ((2, 24, 70), (3, 5, 33), (1, 300, 8), (4, 7, 3)):  # 3 positions: tail only
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[2]))
        for got, want in zip(compiled(x), fn(x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert graphs and all(_by_columns([g]) for g in graphs)  # a batch of 1 recompiles


def test_trailing_dims_too_short_for_a_block_run_as_one() -> None:
    # 4x5 and 33x7 positions: neither last dim fills a block of lanes, the products do
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(5, 64, 4, 5, generator=g), torch.randn(8, 64, 33, 7, generator=g)
    for x in (a, b):
        compiled, graphs = _compiled(lambda t: torch.var_mean(t, 1))
        for got, want in zip(compiled(x), torch.var_mean(x, 1), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        (source,) = [s.source for gr in graphs for s in gr.sources.values()]
        assert "pd_ncol = pd_n1 * pd_n2;" in source


def test_a_broadcast_along_the_last_dim_keeps_the_dims_apart() -> None:
    g = torch.Generator().manual_seed(7)
    b, bias = torch.randn(8, 64, 33, 7, generator=g), torch.randn(64, 33, 1, generator=g)
    compiled, graphs = _compiled(lambda t, c: (t + c).amax(1))
    torch.testing.assert_close(compiled(b, bias), (b + bias).amax(1))
    assert not _by_columns(graphs)  # 7 positions per row of the bias: too few for a block
