"""Interleaved timing (every variant runs once per round, so machine drift hits all alike), and
the profiler's view of one call: GPU kernel time, and the CUDA runtime calls that stall it."""

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


def _profiled(call: Callable[[], Any], calls: int, activities: list[Any]) -> Any:
    """The profiler's per-name averages over `calls` calls of `call`, after one warm call."""
    from torch.profiler import profile

    call()
    torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    return prof.key_averages()


# CUDA runtime and driver calls that stall or serialise a call when they come once per call
_RUNTIME_WATCH = ("Synchronize", "Malloc", "Free", "Memcpy", "Memset", "EventQuery")


def runtime_calls(call: Callable[[], Any], calls: int = 10) -> dict[str, float]:
    """CUDA runtime/driver calls per call of `call` whose names contain one of _RUNTIME_WATCH
    (a synchronisation or an allocation in every call shows as 1.0), from the torch profiler.
    A diagnostic: {} when the profiler records none or fails."""
    from torch.profiler import ProfilerActivity

    try:
        events = _profiled(call, calls, [ProfilerActivity.CPU, ProfilerActivity.CUDA])
        counts: dict[str, float] = {}
        for evt in events:
            if evt.key.startswith("cu") and any(w in evt.key for w in _RUNTIME_WATCH):
                counts[evt.key] = counts.get(evt.key, 0.0) + evt.count / calls
        return counts
    except Exception:  # noqa: BLE001 - a diagnostic never fails the benchmark
        return {}


def kernel_profile(call: Callable[[], Any], calls: int = 10) -> tuple[float, float]:
    """(GPU kernel milliseconds per call, kernel launches per call), from the torch profiler:
    beside the wall time per call, it separates kernel time from launch overhead."""
    from torch.profiler import ProfilerActivity

    total_us, launches = 0.0, 0
    for evt in _profiled(call, calls, [ProfilerActivity.CUDA]):
        us = getattr(evt, "self_device_time_total", None)
        us = getattr(evt, "self_cuda_time_total", 0.0) if us is None else us
        if us > 0:
            total_us, launches = total_us + us, launches + evt.count
    return total_us / calls / 1e3, launches / calls
