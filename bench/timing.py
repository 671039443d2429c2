"""Interleaved timing: every variant runs once per round, so machine drift hits all alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_call(fn: Callable[[], Any], device: str, inner: int) -> float:
    """Seconds per call, averaged over `inner` back-to-back calls."""
    sync(device)
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    sync(device)
    return (time.perf_counter() - start) / inner


def inner_count(fn: Callable[[], Any], device: str, target_s: float = 0.01) -> int:
    """Calls per sample so that one sample takes about `target_s` (at least 1)."""
    once = time_call(fn, device, 1)
    return max(1, min(1000, int(target_s / max(once, 1e-7))))


def interleaved_samples(
    calls: dict[str, Callable[[], Any]], device: str, rounds: int, budget_s: float
) -> dict[str, list[float]]:
    """Seconds per call of each entry, one sample per round, sampled round-robin for `rounds`
    or `budget_s` (at least 3 rounds)."""
    inner = {name: inner_count(fn, device) for name, fn in calls.items()}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    deadline = time.perf_counter() + budget_s
    for done in range(rounds):
        for name, fn in calls.items():
            samples[name].append(time_call(fn, device, inner[name]))
        if done >= 2 and time.perf_counter() > deadline:
            break
    return samples


def interleaved_medians(
    calls: dict[str, Callable[[], Any]], device: str, rounds: int, budget_s: float
) -> dict[str, float]:
    """Median seconds per call of each entry, sampled round-robin for `rounds` or `budget_s`."""
    samples = interleaved_samples(calls, device, rounds, budget_s)
    return {name: statistics.median(s) for name, s in samples.items()}


def copy_bandwidth(device: str, nbytes: int = 1 << 28) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write counted), for the roofline."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds = interleaved_medians({"copy": lambda: dst.copy_(src)}, device, 20, 2.0)["copy"]
    return 2 * nbytes / seconds
