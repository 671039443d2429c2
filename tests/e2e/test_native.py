"""Ops lowered natively (polyduct kernels, no extern calls), checked against eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from polyduct.errors import KernelIndexError
from polyduct.pipeline import CompiledGraph

from .helpers import assert_same, check, compile_fn, kernels_of, on, skip_on_cuda


def _edgy(*shape: int, device: str, seed: int = 0) -> torch.Tensor:
    """Random floats with NaN, +-inf and +-0 planted in them, on `device`."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    flat = x.view(-1)
    edges = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0])
    flat[: min(5, flat.numel())] = edges[: min(5, flat.numel())]
    return (x[torch.randperm(x.shape[0], generator=g)] if x.dim() else x).to(device)


def native(graphs: list[CompiledGraph], kernels: int | None = None) -> None:
    """No op of `graphs` ran as an extern call (and, if given, the kernel count)."""
    fallbacks = [op for g in graphs for op in g.report.ops()]
    assert not fallbacks, f"extern fallbacks: {fallbacks}"
    if kernels is not None:
        assert kernels_of(graphs) == kernels


def test_cat_native(backends: tuple[str, str], device: str) -> None:
    x, y = _edgy(4, 9, device=device), _edgy(4, 3, device=device, seed=1)

    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        return torch.cat([x, y * 2, x[:, :2]], 1) + 1, torch.cat([x.t(), y.t()], 0)

    native(check(fn, backends, x, y), kernels=2)
    ints = torch.tensor(
        [torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).min, 0, -1], device=device
    )
    native(check(lambda a: torch.cat([a, a.flip(0)]), backends, ints))


def test_constant_pad_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(5, 7, device=device)
    native(check(lambda a: F.pad(a, (1, 2, 0, 3), value=-2.5), backends, x), kernels=1)
    native(check(lambda a: F.pad(a, (-1, 2, 2, -2)), backends, x), kernels=1)
    native(
        check(
            lambda a: F.pad(a, (3, 0)), backends, torch.arange(5, dtype=torch.int32, device=device)
        )
    )


def test_factories_native(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> Any:
        at = x.device
        ones, zeros = torch.ones(4, 9, device=at), torch.zeros(4, 9, dtype=torch.int32, device=at)
        full = torch.full((4, 9), -3.5, device=at)
        steps = torch.arange(3, 30, 3, device=at)
        return x + ones + full, zeros + torch.arange(9, dtype=torch.int32, device=at), steps

    native(check(fn, backends, _edgy(4, 9, device=device)))
    native(
        check(
            lambda x: x * torch.arange(0.5, 4.0, 0.25, device=x.device)[:9],
            backends,
            torch.randn(9, device=device),
        )
    )


def test_copy_native(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty(4, 6, dtype=torch.float64, device=x.device)
        out.copy_(x * y)
        return out + 1

    x, y = _edgy(4, 6, device=device), torch.randn(6, device=device)
    graphs = check(fn, backends, x, y)
    assert kernels_of(graphs) >= 1
    assert "aten.copy.default" not in [op for g in graphs for op in g.report.ops()]


def test_native_dropout_reproducible(backends: tuple[str, str], device: str) -> None:
    compiled, graphs = compile_fn(lambda a: F.dropout(a, 0.3, training=True) * 2, backends)
    x = torch.randn(128, 33, device=device)
    torch.manual_seed(7)
    first = compiled(x)
    torch.manual_seed(7)
    assert_same(compiled(x), first, atol=0, rtol=0)
    native(graphs)
    kept = first != 0
    assert 0.62 < kept.float().mean().item() < 0.78
    torch.testing.assert_close(first[kept], (x * 2 / 0.7)[kept])
    torch.manual_seed(8)
    assert not torch.equal(compiled(x), first)


def test_rand_randn_statistics(backends: tuple[str, str], device: str) -> None:
    compiled, graphs = compile_fn(
        lambda a: (torch.rand_like(a), torch.randn(64, 64, device=a.device) + a), backends
    )
    x = torch.zeros(64, 64, device=device)
    torch.manual_seed(0)
    u, n = compiled(x)
    native(graphs, kernels=1)
    assert u.min().item() >= 0.0 and u.max().item() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.02 and abs(n.mean().item()) < 0.05
    assert abs(n.std().item() - 1.0) < 0.05
    assert not torch.equal(u[0], u[1])


def test_scans_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(5, 11, device=device)
    y = torch.randn(6, 7, device=device)

    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        return x.cumsum(1), y.cumprod(0), torch.logcumsumexp(y, 1), torch.logcumsumexp(x, 0)

    native(check(fn, backends, x, y), kernels=4)
    ints = torch.randint(-(2**40), 2**40, (3, 9), device=device)
    ints[0, 0] = torch.iinfo(torch.int64).max
    native(check(lambda a: (a.cumsum(1), a.cumsum(0)), backends, ints))
    native(check(lambda a: a.cumsum(0), backends, torch.rand(13, device=device) > 0.5))
    infs = torch.tensor(
        [-float("inf"), -float("inf"), 1.0, float("inf"), float("inf"), 2.0], device=device
    )
    native(check(lambda a: torch.logcumsumexp(a, 0), backends, infs))


def test_sort_topk_native(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(6, 13, device=device)
    x[1, 2], x[2, 5], x[3, 0] = float("nan"), float("inf"), -float("inf")

    def fn(x: torch.Tensor) -> Any:
        values, indices = torch.sort(x, dim=1, stable=True, descending=True)
        return values, indices, torch.sort(x.t(), dim=1, stable=True), torch.topk(x, 4, dim=1)

    native(check(fn, backends, x))
    ties = torch.randint(0, 3, (4, 17), device=device).float()
    native(check(lambda a: torch.sort(a, dim=0, stable=True), backends, ties))
    native(
        check(
            lambda a: torch.topk(a, 3, dim=0, largest=False),
            backends,
            torch.randn(9, 5, device=device),
        )
    )


def test_gather_index_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(6, 8, device=device)
    idx = torch.randint(-8, 8, (6, 3), device=device)

    def fn(x: torch.Tensor, idx: torch.Tensor) -> Any:
        pos = idx.abs().clamp(max=7)
        g = torch.gather(x, 1, pos)
        rows = x[pos[:, 0] % 6]
        pair = x[pos[:, 0] % 6, idx[:, 1]]
        return (
            g * 2,
            rows,
            pair,
            x.index_select(1, pos[0]),
            x[:, idx[0]],
            x.index_select(0, pos[1] % 6),
        )

    native(check(fn, backends, x, idx))


def test_index_out_of_bounds_raises(backends: tuple[str, str], device: str) -> None:
    skip_on_cuda(device, "a device-side bounds failure aborts the CUDA context")
    compiled, _ = compile_fn(lambda x, i: x[i] + 1, backends)
    with pytest.raises(Exception, match="(?i)index"):
        compiled(torch.randn(5, device=device), torch.tensor([0, 7], device=device))


def test_searchsorted_native(backends: tuple[str, str], device: str) -> None:
    bounds = torch.tensor([-2.0, -0.5, 0.0, 0.0, 1.5, float("inf")], device=device)
    v = _edgy(4, 7, device=device)

    def fn(b: torch.Tensor, v: torch.Tensor) -> Any:
        return torch.searchsorted(b, v), torch.searchsorted(b, v, right=True, out_int32=True)

    native(check(fn, backends, bounds, v))
    native(check(lambda v, b: torch.bucketize(v, b, right=True), backends, v, bounds))


def test_scatter_family_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(5, 7, device=device)
    idx = torch.randint(0, 7, (5, 9), device=device)  # 9 picks from 7 slots: duplicates
    src = torch.randn(5, 9, device=device)
    perm = torch.stack([torch.randperm(7)[:4] for _ in range(5)]).to(device)  # distinct per row

    def fn(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor, perm: torch.Tensor) -> Any:
        return (
            x.scatter_add(1, idx, src) * 2,
            x.scatter_reduce(1, idx, src, "sum"),
            x.scatter(1, perm, src[:, :4]),
            x.scatter(1, perm, -1.5),
            torch.zeros(7, 5, device=x.device).scatter_add(0, idx.t(), src.t()),
        )

    native(check(fn, backends, x, idx, src, perm))


def test_index_put_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(6, 5, device=device)
    rows = torch.tensor([0, -1, 2, 0, 5, -6, 3], device=device)  # duplicates, negatives
    vals = torch.randn(7, 5, device=device)

    def fn(x: torch.Tensor, rows: torch.Tensor, vals: torch.Tensor) -> Any:
        acc = torch.index_put(x, (rows,), vals, accumulate=True)
        col = x.clone()
        col[:, rows[:3] % 5] += torch.tensor(9.0, device=x.device)
        pair = torch.index_put(x, (rows[:2], rows[2:4]), vals[0, :2])
        # distinct rows after wrapping: with duplicates, index_put without accumulate is
        # undefined in torch (its CPU kernel happens to keep the last write; -2 and 4 of a
        # 6-row x collided here and the Halide backend's parallel scatter kept either)
        put = torch.index_put(x, (torch.tensor([1, -2, 0], device=x.device),), vals[:3])
        return acc, col, pair, put

    native(check(fn, backends, x, rows, vals))
    ints = torch.full((4,), torch.iinfo(torch.int64).max, device=device)
    native(
        check(
            lambda a, i: torch.index_put(
                a, (i,), torch.tensor(1, device=a.device), accumulate=True
            ),
            backends,
            ints,
            torch.tensor([1, 1, 3], device=device),
        )
    )


def test_setitem_on_input_native(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        x[i] += v
        x[0] = 7.0
        return x.sum(0)

    x, i, v = on(device, torch.randn(6, 3), torch.tensor([4, 4, -1]), torch.randn(3, 3))
    compiled, graphs = compile_fn(fn, backends)
    mine = x.clone()
    assert_same(compiled(mine, i, v), fn(x, i, v))
    assert_same(mine, x)
    native(graphs)


@pytest.mark.parametrize("case", ["scatter", "negative", "index_put"])
def test_scatter_out_of_range_raises(backends: tuple[str, str], device: str, case: str) -> None:
    skip_on_cuda(device, "a device-side bounds failure aborts the CUDA context")
    x, src = torch.zeros(3, 4, device=device), torch.ones(3, 2, device=device)
    if case == "index_put":
        compiled, _ = compile_fn(
            lambda a, i, s: torch.index_put(a, (i,), s[0, 0], accumulate=True), backends
        )
        idx = torch.tensor([0, 3], device=device)
    else:
        compiled, _ = compile_fn(lambda a, i, s: a.scatter_add(1, i, s), backends)
        rows = [[0, 4], [1, 1], [2, 3]] if case == "scatter" else [[0, -1]] * 3
        idx = torch.tensor(rows, device=device)
    with pytest.raises(KernelIndexError, match="out of bounds"):
        compiled(x, idx, src)


def test_unfold_native(backends: tuple[str, str], device: str) -> None:
    x, y = _edgy(4, 9, device=device), torch.randn(8, device=device)

    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        return (
            x.unfold(1, 3, 2) * 2,
            (x + 1).unfold(0, 2, 1).sum(-1),  # a lazy value re-indexed
            y.unfold(0, 2, 3),  # a view of the input: no kernel
            x.t().unfold(0, 4, 4).exp(),
            y[0].unfold(0, 1, 1) + 1,  # a 0-d tensor
        )

    graphs = check(fn, backends, x, y)
    native(graphs)


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation", "ceil_mode"),
    [
        (2, 2, 0, 1, False),
        (3, 2, 1, 1, False),
        (3, 2, 1, 2, True),
        ((3, 2), (2, 3), (1, 0), 1, True),
    ],
)
def test_max_pool2d_native(
    backends: tuple[str, str],
    device: str,
    kernel: Any,
    stride: Any,
    padding: Any,
    dilation: int,
    ceil_mode: bool,
) -> None:
    x = torch.randn(2, 3, 9, 11)
    x[0, 0, 0, :2] = float("nan")  # two NaNs in one window: eager names the last
    x[1, 1, :4, :4] = -float("inf")  # windows holding nothing above the lowest value
    x[1, 2, 5, 5:7] = 0.0  # ties keep the first
    x = x.to(device)

    def fn(a: torch.Tensor) -> Any:
        values, indices = F.max_pool2d(
            a.relu() - 1, kernel, stride, padding, dilation, ceil_mode, return_indices=True
        )
        return values * 2, indices

    native(check(fn, backends, x), kernels=1)
    ints = torch.randint(-3, 3, (3, 8, 8), dtype=torch.int64, device=device)
    native(
        check(lambda a: F.max_pool2d(a.to(torch.float16), 2, return_indices=True), backends, ints)
    )


def test_activations_and_nan_aware_ops_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(6, 7, device=device)
    ints = torch.tensor([-3, 0, 5, torch.iinfo(torch.int64).min], device=device)

    def fn(x: torch.Tensor, i: torch.Tensor) -> Any:
        return (
            torch.fmax(x, x.flip(0)),
            torch.fmin(x, x.t()[0, :, None] * 0.5),
            torch.fmax(i, i.flip(0)),
            torch.angle(x),
            torch.angle(i),
            F.elu(x, 0.7),
            F.leaky_relu(x, 0.1),
            F.hardtanh(x, -0.5, 2.0),
            torch.ldexp(x, torch.tensor([3], device=x.device)),
        )

    native(check(fn, backends, x, ints))


def test_activation_backwards_native(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(5, 8, device=device).requires_grad_(True)
    x_ref = x.detach().clone().requires_grad_(True)
    acts = (F.elu, F.leaky_relu, F.hardtanh, F.softplus, F.hardswish, F.hardsigmoid, F.mish)

    def fn(a: torch.Tensor) -> torch.Tensor:
        return sum((act(a) * (k + 1) for k, act in enumerate(acts)), torch.zeros_like(a))

    compiled, graphs = compile_fn(fn, backends)
    compiled(x).square().sum().backward()
    fn(x_ref).square().sum().backward()
    assert_same(x.grad, x_ref.grad, atol=1e-4)
    native(graphs)


def test_split_unbind_diagonal_views_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(5, 7, device=device)

    def fn(x: torch.Tensor) -> Any:
        a, b, c = x.split(3, 1)
        first, *_, last = (x * 2).unbind(0)
        parts = torch.split(x.t(), [2, 4, 1], 0)
        return (
            a * 2,
            b,
            c + 1,
            first - last,
            parts[1].exp(),
            x.diagonal() + 1,
            x.diagonal(2),
            (x + 1).diagonal(-1),
            x[None].diagonal(0, 1, 2),
        )

    native(check(fn, backends, x))


def test_extern_view_results_keep_their_offsets(backends: tuple[str, str], device: str) -> None:
    """Non-contiguous extern results (views at an offset) are copied out correctly."""
    from polyduct.overrides import OpOverride, Scope

    scope = Scope(ops=(OpOverride("aten.split", extern=True),))
    x = _edgy(5, 7, device=device)
    graphs = check(
        lambda a: [t * 2 for t in a.split(3, 1)], backends, x, options={"overrides": scope}
    )
    assert [op for g in graphs for op in g.report.ops()] == ["aten.split.Tensor"]


def test_pools_and_norm_decompositions_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(2, 3, 9, 11, device=device)
    v = _edgy(5, 7, device=device)

    def pools(a: torch.Tensor) -> Any:
        return (
            F.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(a, 2),
            F.avg_pool2d(a, (3, 2), (2, 3), (1, 0), True, True, 5),
            F.adaptive_avg_pool2d(a, (3, 11)),
            F.adaptive_avg_pool2d(a, (4, 5)),  # uneven windows
        )

    native(check(pools, backends, x))

    def norms(a: torch.Tensor) -> Any:
        return (
            a.norm(dim=1),
            torch.linalg.vector_norm(a, 3, dim=0),
            torch.linalg.vector_norm(a, float("inf")),
            a.repeat(2, 1, 3),
            a.flatten().argmin(),
        )

    native(check(norms, backends, v))
    g = torch.randn(2, 4, 3, 3, device=device)
    w, b = torch.randn(4, device=device), torch.randn(4, device=device)
    native(check(lambda a, w, b: F.group_norm(a, 2, w, b), backends, g, w, b, atol=1e-4))


def test_effect_only_extern(backends: tuple[str, str], device: str) -> None:
    """An op run only for its effect (one_hot's `_assert_async` range check) is an extern call."""
    skip_on_cuda(device, "one_hot checks its index range with _assert_async on CPU tensors only")
    i = torch.tensor([1, 4, 0], device=device)
    graphs = check(lambda i: F.one_hot(i, 5) * 2, backends, i)
    assert "aten._assert_async.msg" in [op for g in graphs for op in g.report.ops()]


def test_cummax_cummin_native(backends: tuple[str, str], device: str) -> None:
    x = torch.randint(0, 3, (4, 9)).float()  # ties everywhere: the last position is named
    x[1, 2], x[1, 5], x[2, 0], x[3, 4] = float("nan"), float("nan"), -float("inf"), float("inf")
    ints = torch.randint(-3, 3, (4, 9))
    ints[0, 3] = torch.iinfo(torch.int64).min
    x, ints = on(device, x, ints)

    def fn(a: torch.Tensor, i: torch.Tensor) -> Any:
        return a.cummax(1), a.cummin(0), i.cummax(1), i.cummin(1), a.half().cummax(1)

    native(check(fn, backends, x, ints))


def test_arg_reductions_over_all_dims_native(backends: tuple[str, str], device: str) -> None:
    x = _edgy(4, 3, 5, device=device)

    def fn(a: torch.Tensor, i: torch.Tensor) -> Any:
        return (
            a.argmin(),
            a.argmax(keepdim=True),
            a.transpose(0, 2).argmax(),
            i.argmin(),
            (i * 2).argmax(keepdim=True),
        )

    native(check(fn, backends, x, torch.randint(0, 3, (3, 4), device=device)))


@pytest.mark.parametrize("shape", [(8, 1), (1, 1), (3, 1, 5), (1,)])
def test_reductions_over_one_element_native(
    backends: tuple[str, str], device: str, shape: tuple[int, ...]
) -> None:
    """Reductions whose reduced dims all have size 1 (each output reduces one element) are
    still reductions for the backend: before, their kernels had no reduction range and the
    C++ and Triton backends failed to compile them; the variance of one element divides by a
    constant zero, which Halide refuses unless the divisor is hidden from it."""
    x = _edgy(*shape, device=device, seed=3)
    dim = 1 if len(shape) > 1 else 0

    def fn(a: torch.Tensor) -> Any:
        return (
            a.sum(dim), a.amax(dim), a.argmax(dim), a.mean(dim, keepdim=True),
            a.var(dim), a.var(dim, correction=0), torch.softmax(a, dim), a.prod(dim),
            torch.var_mean(a, dim), (a > 0).int().sum(dim), a / 0.0,
        )

    native(check(fn, backends, x))
