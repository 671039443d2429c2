"""More patterns from real models (audio front ends, mixtures of experts, ...) that the synthetic
e2e programs and the model suite missed."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .helpers import check


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
