"""More patterns from real models (audio front ends, mixtures of experts, ...) that the synthetic
e2e programs and the model suite missed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from polyduct.errors import InputMismatch
from polyduct.frontend.export import compile_exported

from .helpers import assert_same, check, compile_fn


def test_library_call_sees_eager_strides_of_unit_dims(
    backends: tuple[str, str], device: str
) -> None:
    """wav2vec2's feature encoder: `conv1d(x[:, None], w)` on a (batch, samples) waveform. Eager's
    unsqueezed view has strides (L, L, 1); given (L, 1, 1), the CPU convolution takes its input
    for channels-last and returns a channels-last result, which was then read as row-major."""

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = F.conv1d(x[:, None], w, stride=5)
        return h - h.mean(-1, keepdim=True)

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 640, generator=gen), torch.randn(8, 1, 10, generator=gen)
    check(fn, backends, x.to(device), w.to(device), atol=1e-4)


def test_saved_expanded_view_of_a_strided_slice_keeps_eager_strides(
    backends: tuple[str, str], device: str
) -> None:
    """Funnel's pooled token-type mask: `cat([t[:, :1], t], 1)[:, 0:-1:2]` (strides (33n, 2n, 1))
    expanded over heads selects between two biases; the forward saves the expanded mask for the
    backward, which asserts eager's strides. The mask, costly to broadcast, was stored row-major
    before being expanded, and the backward refused it (`expected stride (1056, 0, 64, 1)`)."""

    def fn(ids: torch.Tensor, q: torch.Tensor, s: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        t = (ids[:, :, None] == ids[:, None]) | (ids == 2)[:, :, None] | (ids == 2)[:, None]
        m = torch.cat([t[:, :1], t], 1)[:, 0:-1:2][:, None].expand(2, 4, 16, 32)
        return torch.where(m, (q * s).expand(m.shape), (q * d).expand(m.shape))

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 3, (2, 32), generator=gen).to(device)
    q = torch.randn(2, 4, 16, 1, generator=gen).to(device).requires_grad_()
    s, d = (torch.randn(32, generator=gen).to(device).requires_grad_() for _ in range(2))
    compiled, _ = compile_fn(fn, backends)
    weight = torch.randn(2, 4, 16, 32, generator=gen).to(device)
    got = compiled(ids, q, s, d)
    grads = torch.autograd.grad((got * weight).sum(), (q, s, d))
    want = fn(ids, q, s, d)
    assert_same((got, grads), (want, torch.autograd.grad((want * weight).sum(), (q, s, d))))


class _Pooled(torch.nn.Module):
    """Windows of 8 samples pooled and scaled by a table of 4: export guards `s // 8 == 4`."""

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.avg_pool1d(x, 8) * w


def test_exported_program_checks_the_size_guards_of_its_export(
    backends: tuple[str, str], device: str
) -> None:
    """DINOv2's position table fixes the number of patches, `(s // 8) ** 2 + 1 == 17`: sizes
    that break such a guard of the export are refused as `ExportedProgram.module()` refuses
    them (the compiled program ran on them: wrong values, or a crash in the wrapper)."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 3, 32, generator=gen).to(device), torch.randn(4, generator=gen).to(device)
    ep = torch.export.export(_Pooled(), (x, w), dynamic_shapes=({2: torch.export.Dim.AUTO}, None))
    kernels, wrapper = backends
    run = compile_exported(ep, {"kernels": kernels, "wrapper": wrapper})
    for n in (32, 37):  # 37 // 8 == 4 as well
        xn = torch.randn(2, 3, n, generator=gen).to(device)
        assert_same(run(xn, w), F.avg_pool1d(xn, 8) * w)
    with pytest.raises(InputMismatch, match=r"'x.shape\[2\] \(s\d+\)': expected size satisfying"):
        run(torch.randn(2, 3, 48, device=device), torch.randn(6, device=device))


def test_exported_adaptive_pooling_runs_at_other_sizes(
    backends: tuple[str, str], device: str
) -> None:
    """torch's decomposition of `adaptive_avg_pool2d` turns 16x16 -> 2x2 into a fixed 8x8
    window and guards on it; with dynamic sizes the op stays whole, so an exported CNN runs on
    other image sizes (it returned wrong values at 24x24)."""
    x = torch.randn(2, 4, 16, 16, device=device)
    auto = torch.export.Dim.AUTO
    for size in ((2, 2), (1, 1)):  # a window, or a mean
        model = torch.nn.AdaptiveAvgPool2d(size)
        ep = torch.export.export(model, (x,), dynamic_shapes=({0: auto, 2: auto, 3: auto},))
        kernels, wrapper = backends
        run = compile_exported(ep, {"kernels": kernels, "wrapper": wrapper})
        for n in (16, 24, 33):
            xn = torch.randn(3, 4, n, n, device=device)
            assert_same(run(xn), model(xn))


def test_library_call_sees_ir_strides_of_unit_dims_of_a_saved_view(
    backends: tuple[str, str], device: str
) -> None:
    """Mamba's causal depthwise convolution `conv1d(x, w.squeeze(1).unsqueeze(1), groups=C)` of
    a (C, 1, 4) weight: the forward saves the view for the backward, which received it with
    strides (4, 1, 1), not eager's (4, 4, 1)
    (its input assert ignores size-1 dims) and gave it to `convolution_backward` as is: taken
    for channels-last, the input gradient came back channels-last and was read row-major."""

    def fn(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x = h.transpose(1, 2).chunk(2, dim=1)[0]  # (2, 8, 12), strides (192, 1, 16)
        return F.conv1d(x, w.squeeze(1).unsqueeze(1), padding=3, groups=8)[..., :12]

    gen = torch.Generator().manual_seed(0)
    h = torch.randn(2, 12, 16, generator=gen).to(device).requires_grad_()
    w = torch.randn(8, 1, 4, generator=gen).to(device).requires_grad_()
    weight = torch.randn(2, 8, 12, generator=gen).to(device)
    compiled, _ = compile_fn(fn, backends)
    got = compiled(h, w)
    grads = torch.autograd.grad((got * weight).sum(), (h, w))
    want = fn(h, w)
    assert_same((got, grads), (want, torch.autograd.grad((want * weight).sum(), (h, w))))
