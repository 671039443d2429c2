"""Plain `torch.nn` models of the suite (no `transformers`): an MLP-mixer and a small CNN whose
BatchNorm layers run in training mode when trained."""

from __future__ import annotations

import torch
from torch import nn

from bench.models_zoo import IMAGE_SIZES, ModelSpec, image_inputs


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(
            nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens)
        )
        self.channel_mlp = nn.Sequential(
            nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        out: torch.Tensor = x + self.channel_mlp(self.norm2(x))
        return out


class MlpMixer(nn.Module):
    """MLP-Mixer on 32x32 images, 4x4 patches (64 tokens); the token MLP fixes the image size."""

    def __init__(self, dim: int = 64, depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.blocks = nn.Sequential(*[MixerBlock(64, dim) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch(pixel_values).flatten(2).transpose(1, 2)
        logits: torch.Tensor = self.head(self.norm(self.blocks(x)).mean(dim=1))
        return logits


class SmallCnn(nn.Module):
    """conv-BatchNorm-ReLU stages, max pooling, global average pooling and a linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin, cout in ((3, 16), (16, 32), (32, 64)):
            layers += [
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(64, classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(pixel_values).mean(dim=(2, 3)))
        return logits


def _seeded(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls()


def nn_specs() -> list[ModelSpec]:
    return [
        # the token MLP is sized for 64 patches: the dynamic check varies the batch instead
        ModelSpec("mlp_mixer", "torch.nn", lambda: _seeded(MlpMixer), mixer_inputs, (2, 3, 5)),
        ModelSpec("cnn_bn", "torch.nn", lambda: _seeded(SmallCnn), image_inputs(), IMAGE_SIZES),
    ]


def mixer_inputs(gen: torch.Generator, batch: int, device: str) -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=gen).to(device)}


def all_specs() -> list[ModelSpec]:
    from bench.models_zoo import hf_specs

    return [*hf_specs(), *nn_specs()]


def by_names(names: list[str] | None) -> list[ModelSpec]:
    """The suite (no names), or the named models of the suite and of `bench.models_extra`
    (`extra`: all of the latter)."""
    from bench.models_extra import extra_specs

    specs, extra = all_specs(), extra_specs()
    if not names:
        return specs
    names = [n for name in names for n in ([s.name for s in extra] if name == "extra" else [name])]
    known = {s.name: s for s in [*specs, *extra]}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown models {unknown}; known: {sorted(known)} and 'extra'")
    return [known[n] for n in names]
