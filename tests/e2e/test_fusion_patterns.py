"""Fusion decisions taken from real models: which values share a kernel, and which are computed
once rather than in every stage of the kernel that reads them."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .helpers import check, kernel_caps, on, traced_ops


def test_normalisation_viewed_for_a_matmul_is_one_kernel(
    backends: tuple[str, str], device: str
) -> None:
    """A transformer's layer norm or RMS norm before a linear layer: the linear views the
    (batch, seq | hidden) normalised rows as (batch*seq, hidden). The statistics and the
    normalised rows are one kernel (the (batch*seq) rows are the reduction's (batch, seq)
    rows merged), not a reduction kernel and a second kernel that reloads its results; both
    norms of the same rows share it."""

    def fn(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, b: torch.Tensor) -> Any:
        ln = F.layer_norm(x, (x.shape[-1],), g, b)
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g
        return ln.view(-1, x.shape[-1]) @ w, rms.reshape(-1, x.shape[-1]) @ w, rms.flatten()

    x = torch.randn(3, 5, 24, device=device)
    x[0, 1, 2], x[2, 4] = float("nan"), float("inf")
    w, g, b = (torch.randn(24, 8, device=device), torch.randn(24, device=device),
               torch.randn(24, device=device))
    graphs = check(fn, backends, x, w, g, b)
    assert graphs[0].kernel_count == 1, graphs[0].kernel_count


def test_residual_stream_and_its_norm_are_one_kernel(
    backends: tuple[str, str], device: str
) -> None:
    """GPT-2's residual add (read by the next layer norm and by the next residual add, so stored)
    and that norm: one kernel, whose every stage computes the sum again and reads it as a value,
    not a kernel storing it and another reloading it. Eager's values, NaN and inf included."""

    def fn(*t: torch.Tensor) -> Any:
        a, b, c, d, e, g, w = t
        h = a + b * 2 + c + d + e  # reads five buffers: stored once for its two readers
        n = F.layer_norm(h, (h.shape[-1],), g, None)
        m = (n.view(-1, h.shape[-1]) @ w).view_as(h)
        return h + m, n

    gen = torch.Generator().manual_seed(5)
    t = [torch.randn(3, 7, 24, generator=gen) for _ in range(5)]
    t[0][1, 2, 3], t[1][2, 6] = float("nan"), float("inf")
    t += [torch.randn(24, generator=gen), torch.randn(24, 24, generator=gen)]
    graphs = check(fn, backends, *on(device, *t), atol=1e-4)
    want = 2 if kernel_caps(backends).prologues else 3  # the norm's, then `h + m`
    assert graphs[0].kernel_count == want, graphs[0].kernel_count


def test_gathered_scores_are_not_recomputed_in_each_softmax_stage(
    backends: tuple[str, str], device: str
) -> None:
    """DeBERTa's attention scores add relative-position terms gathered by an index table, then
    take a softmax (three stages over each row). As the softmax's prologue the gather would run,
    bounds checks included, once per stage (its forward 0.64 to 1.11 ms on the CPU): a group
    that gathers is stored once and read back instead."""

    def fn(*t: torch.Tensor) -> Any:
        q, k, rel, idx, mask = t
        scores = q @ k.transpose(-1, -2)
        c2p = torch.gather(q @ rel.t(), -1, idx.expand(*scores.shape))
        p2c = torch.gather(k @ rel.t(), -1, idx.expand(*scores.shape)).transpose(-1, -2)
        w = (scores + c2p + p2c) * 0.5 + mask  # six buffers read: stored once
        return torch.softmax(w, -1)

    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 3, 9, 8, generator=gen), torch.randn(2, 3, 9, 8, generator=gen)
    rel, mask = torch.randn(17, 8, generator=gen), torch.randn(2, 1, 1, 9, generator=gen)
    idx = (torch.arange(9)[:, None] - torch.arange(9)[None, :] + 8)[None, None]
    graphs = check(fn, backends, *on(device, q, k, rel, idx, mask), atol=1e-5)
    assert traced_ops(graphs, "indirect_indexing") == 2  # each gather once
