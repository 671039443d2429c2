"""The runtime suite: every workload x size x variant, interleaved, medians and ratios, JSON."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch._dynamo

from bench.timing import copy_bandwidth, interleaved_medians
from bench.variants import Variant
from bench.workloads import SIZES, Workload

MAX_CALL_S = 3.0  # a variant slower than this per call is reported, not timed (2-core machines)


@dataclass
class Result:
    """One workload x size x variant measurement (times in seconds; None when not measured)."""

    workload: str
    size: str
    n: int
    variant: str
    first_call_s: float | None = None
    median_s: float | None = None
    vs_eager: float | None = None
    vs_inductor: float | None = None
    gbps: float | None = None
    frac_of_copy: float | None = None
    error: str | None = None
    skipped: str | None = None


def _error_text(exc: BaseException) -> str:
    """The root cause's type and first line (Dynamo wraps a backend's error in its own)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    lines = [line.strip() for line in last.splitlines() if line.strip()]
    text = lines[0]
    if text.endswith(":") and len(lines) > 1:  # "failed to compile kernel ...:" <reason>
        text = f"{text} {lines[1]}"
    return text[:300]


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and torch.allclose(
            got.detach().float(), want.detach().float(), rtol=2e-3, atol=2e-3, equal_nan=True
        )
    return all(_close(g, w) for g, w in zip(got, want, strict=True))


def _prepare(
    work: Workload, variant: Variant, inputs: tuple[Any, ...], want: Any, result: Result
) -> Callable[[], Any] | None:
    """Compile and check one variant; the timed call, or None (with `result.error` set)."""
    try:
        fn = variant.wrap(work.fn, work.dynamic)
        if work.dynamic:  # a second size first, so the timed size runs the dynamic graph
            fn(*work.make_inputs(max(2, result.n // 2 + 1), _device(inputs)))
        start = time.perf_counter()
        got = fn(*inputs)
        result.first_call_s = time.perf_counter() - start
        start = time.perf_counter()
        fn(*inputs)
        if (per_call := time.perf_counter() - start) > MAX_CALL_S:
            result.error = f"too slow to time: {per_call:.1f} s per call"
            return None
    except Exception as exc:  # noqa: BLE001  (a failing variant is a table entry, not a crash)
        result.error = _error_text(exc)
        return None
    if not _close(got, want):
        result.error = "wrong result (differs from eager)"
        return None
    return lambda: fn(*inputs)


def _device(inputs: tuple[Any, ...]) -> str:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return str(x.device)
    return "cpu"


def run_group(
    work: Workload, size: str, variants: list[Variant], device: str, opts: dict[str, Any]
) -> list[Result]:
    """All variants of one workload at one size, timed round-robin.

    Each compiled variant compiles its own copy of the workload's code (`bench.variants.fresh`),
    so variants never share Dynamo caches and no Dynamo reset happens between them."""
    n = SIZES[size]
    inputs = work.make_inputs(n, device)
    want = work.fn(*inputs)
    results = {v.name: Result(work.name, size, n, v.name) for v in variants}
    calls = {}
    for v in variants:
        if not v.runs_at(size):
            results[v.name].skipped = f"not run above size {v.max_size} on {device}"
            continue
        if v.forward_only and work.trains:
            results[v.name].skipped = "torch.export takes forward programs; this one trains"
            continue
        if v.static_only and work.dynamic:
            results[v.name].skipped = "compiled for the example sizes only"
            continue
        call = _prepare(work, v, inputs, want, results[v.name])
        if call is not None:
            calls[v.name] = call
    medians = interleaved_medians(calls, device, opts["rounds"], opts["budget_s"])
    for name, seconds in medians.items():
        results[name].median_s = seconds
    _ratios(results, work, n, opts.get("copy_bw"))
    return list(results.values())


def _ratios(results: dict[str, Result], work: Workload, n: int, copy_bw: float | None) -> None:
    eager, inductor = results.get("eager"), results.get("inductor")
    for r in results.values():
        if r.median_s is None:
            continue
        if eager and eager.median_s:
            r.vs_eager = eager.median_s / r.median_s  # > 1: faster than eager
        if inductor and inductor.median_s:
            r.vs_inductor = inductor.median_s / r.median_s
        if copy_bw and work.bytes_moved:
            r.gbps = work.bytes_moved(n) / r.median_s / 1e9
            r.frac_of_copy = r.gbps * 1e9 / copy_bw


def run_suite(
    workloads: tuple[Workload, ...],
    sizes: list[str],
    variants: list[Variant],
    device: str,
    opts: dict[str, Any],
    report: Callable[[Result], None],
) -> list[Result]:
    """Every workload at every requested size it supports; `report` sees each result."""
    torch._dynamo.config.recompile_limit = 64
    if device.startswith("cuda"):
        opts["copy_bw"] = copy_bandwidth(device)
    out: list[Result] = []
    cpu = device.split(":")[0] == "cpu"
    for work in workloads:
        for size in (s for s in sizes if s in (work.cpu_sizes if cpu else work.sizes)):
            for r in run_group(work, size, variants, device, opts):
                report(r)
                out.append(r)
    return out


def to_json(results: list[Result], meta: dict[str, Any]) -> dict[str, Any]:
    return {"meta": meta, "results": [asdict(r) for r in results]}
