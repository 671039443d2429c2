"""The benchmark workloads: a function, inputs for a size, and which sizes make sense for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

SIZES: dict[str, int] = {"small": 64, "medium": 1024, "large": 4096}
SMALL_MEDIUM = ("small", "medium")


@dataclass(frozen=True)
class Workload:
    """`fn(*make_inputs(n, device))`; `sizes` names the sizes it runs at (`cpu_sizes`, when
    given, on a CPU); `dynamic` compiles so; `trains` says it runs a backward pass."""

    name: str
    fn: Callable[..., Any]
    make_inputs: Callable[[int, str], tuple[Any, ...]]
    sizes: tuple[str, ...] = ("small", "medium", "large")
    dynamic: bool = False
    bytes_moved: Callable[[int], int] | None = None  # for bandwidth on CUDA
    only_cpu_sizes: tuple[str, ...] | None = None
    trains: bool = False

    @property
    def cpu_sizes(self) -> tuple[str, ...]:
        return self.sizes if self.only_cpu_sizes is None else self.only_cpu_sizes


def _mats(count: int, grad: bool = False) -> Callable[[int, str], tuple[Any, ...]]:
    def make(n: int, device: str) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(n)
        return tuple(
            torch.randn(n, n, generator=gen).to(device).requires_grad_(grad) for _ in range(count)
        )

    return make


def pointwise3(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.relu(a * b + c) * torch.sigmoid(c) - a


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def layernorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], w[0], w[1])


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w[0]


def gelu_epilogue(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(a @ b)


def sum_last(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


def max_last(x: torch.Tensor) -> torch.Tensor:
    return x.amax(-1)


def chain30(x: torch.Tensor) -> torch.Tensor:
    for i in range(10):
        x = torch.sin(x) * 0.5 + (i + 1) * 0.01
    return x


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention (4 heads) and a GELU MLP."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        self.heads = 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(t, 3, self.heads, d // self.heads).unbind(1)
        att = torch.softmax(torch.einsum("thd,shd->hts", q, k) / (d // self.heads) ** 0.5, -1)
        x = x + self.proj(torch.einsum("hts,shd->thd", att, v).reshape(t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def transformer_step(block: Block, x: torch.Tensor) -> torch.Tensor:
    """Forward and backward; returns the loss (gradients land in the parameters)."""
    loss = block(x).square().mean()
    loss.backward()
    return loss.detach()


def _block_inputs(n: int, device: str) -> tuple[Any, ...]:
    torch.manual_seed(0)
    return (Block(64).to(device), torch.randn(n, 64, device=device))


def _norm_inputs(n: int, device: str) -> tuple[Any, ...]:
    gen = torch.Generator().manual_seed(n)
    return (
        torch.randn(n, n, generator=gen).to(device),
        torch.randn(2, n, generator=gen).to(device),
    )


def _elems(count: int) -> Callable[[int], int]:
    def moved(n: int) -> int:
        return count * n * n * 4

    return moved


WORKLOADS: tuple[Workload, ...] = (
    Workload("pointwise3", pointwise3, _mats(3), bytes_moved=_elems(4)),
    Workload("softmax", softmax, _mats(1), bytes_moved=_elems(2)),
    Workload("layernorm", layernorm, _norm_inputs, bytes_moved=_elems(2)),
    Workload("rmsnorm", rmsnorm, _norm_inputs, bytes_moved=_elems(2)),
    Workload("gelu_mm", gelu_epilogue, _mats(2), sizes=SMALL_MEDIUM),
    Workload("sum_last", sum_last, _mats(1), bytes_moved=_elems(1)),
    Workload("max_last", max_last, _mats(1), bytes_moved=_elems(1)),
    # 30 ops on 4096x4096 take over 3 s per call in eager on a 2-core CPU: small and medium only.
    Workload("chain30", chain30, _mats(1), bytes_moved=_elems(2), only_cpu_sizes=SMALL_MEDIUM),
    Workload("dynamic_chain", pointwise3, _mats(3), dynamic=True, bytes_moved=_elems(4)),
    Workload(
        "transformer_fwd_bwd", transformer_step, _block_inputs, sizes=SMALL_MEDIUM, trains=True
    ),
)


def by_name(names: list[str] | None) -> tuple[Workload, ...]:
    """The workloads named (all when `names` is empty)."""
    if not names:
        return WORKLOADS
    known = {w.name: w for w in WORKLOADS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {sorted(known)}")
    return tuple(known[n] for n in names)
