"""Autotuning of a generated kernel's launch configs (a mixin of `KernelRuntime`).

Where compile workers build every other candidate of a shape class, its launches run the
heuristic config until those compiles have all finished; the first launch after that
benchmarks the candidates (loading each from Triton's cache) and keeps the fastest. A first
call then waits for one compile per kernel, not for its slowest candidate and a benchmark.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton

from polyduct.cache import Cache
from polyduct_triton.kernel_configs import Config, KernelFacts


class TuningMixin:
    """Benchmarks candidates, remembers winners in `tuning_cache`, and cancels the compile
    workers' jobs for configs no launch will use."""

    TUNE_MIN_MS: float
    TUNE_BUDGET_MS: float
    facts: KernelFacts
    tuning_cache: Cache | None
    precompiled: dict[Any, Any]
    pending: dict[tuple[Any, ...], tuple[list[Config], list[Any]]]
    _device_name: Callable[[Any], str]
    _args: Callable[..., tuple[Any, ...]]
    _job: Callable[..., tuple[Any, Any]]
    _launch: Callable[..., Any]

    def _time_ms(self, run: Callable[[], Any]) -> float:
        """Mean milliseconds of `run` on the GPU: one warm launch, one timed launch to size the
        sample, then as many back-to-back launches as fill TUNE_BUDGET_MS (at most 50). Tuning
        is part of a first call: a few milliseconds per candidate rank configs whose kernels
        differ by 10% or more, where a full benchmark (L2 flushes, repetitions) costs 15 ms."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def batch(count: int) -> float:  # milliseconds of `count` launches back to back
            start.record()
            for _ in range(count):
                run()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))

        run()
        count = max(1, min(50, int(self.TUNE_BUDGET_MS / max(batch(1), 1e-3))))
        return batch(count) / count

    def _tune(self, configs: list[Config], tensors: Any, sizes: Any, xnumel: int, rnumel: int,
              idx64: bool, err: Any) -> Config:
        # Benchmark on copies of written buffers so tuning never changes the caller's data.
        scratch = [t.clone() if i in self.facts.written else t for i, t in enumerate(tensors)]
        scratch_err = None if err is None else err.clone()

        def timed(c: Config) -> float:
            return self._time_ms(
                lambda: self._launch(c, scratch, sizes, xnumel, rnumel, idx64, scratch_err))

        times = [timed(configs[0])]
        if times[0] < self.TUNE_MIN_MS:  # too short for another config to repay its compile
            self._drop_jobs(configs[1:], tensors, sizes, xnumel, rnumel, idx64, err)
            return configs[0]
        times += [timed(c) for c in configs[1:]]
        return configs[times.index(min(times))]

    def _drop_jobs(self, configs: list[Config], tensors: Any, sizes: Any, xnumel: int,
                   rnumel: int, idx64: bool, err: Any) -> None:
        """Cancel the compile workers' jobs for `configs`, which this process will not launch (a
        short kernel kept its heuristic config, or the tuning cache named the winner): workers
        take other kernels' jobs instead. A job a worker has started runs to its end."""
        if not self.precompiled:  # no compile workers, or every job already taken
            return
        args = self._args(tensors, sizes, xnumel, rnumel, err)
        for cfg in configs:
            future = self.precompiled.pop(self._job(cfg, args, xnumel, rnumel, idx64)[0], None)
            if future is not None:
                future.cancel()

    @functools.cached_property
    def _module_key(self) -> str:
        """The SHA-256 of the kernel's module file and of the runtime, read once."""
        from polyduct_triton.kernel_runtime import runtime_digest

        text = Path(self.facts.path).read_bytes()
        return hashlib.sha256(text + runtime_digest().encode()).hexdigest()

    def _tuning_inputs(self, shape_class: Any, tensors: Any) -> dict[str, str]:
        """The tuning cache's key of `shape_class` (pow2 xnumel, pow2 rnumel, idx64) on this
        device: the kernel's module and runtime, the device's name and Triton's version."""
        return {"kernel": self._module_key, "device": self._device_name(tensors[0].device),
                "triton": triton.__version__, "class": repr(shape_class)}

    def _stored(self, entry: Path, configs: list[Config], *shape: Any) -> Config:
        """The winner a tuning cache entry holds (the heuristic if it names no candidate); the
        compile jobs of the configs it beat are cancelled."""
        best = tuple(json.loads((entry / "config.json").read_text()))
        best = best if best in configs else configs[0]
        self._drop_jobs([c for c in configs if c != best], *shape)
        return best

    def _remembered(self, shape_class: Any, configs: list[Config], *shape: Any) -> Config | None:
        """The winner an earlier process stored in the tuning cache for `shape_class`, or None."""
        cache = self.tuning_cache
        entry = None if cache is None else cache.lookup(
            "triton-tuning", self._tuning_inputs(shape_class, shape[0]))
        return None if entry is None else self._stored(entry, configs, *shape)

    def _tuned(self, shape_class: Any, configs: list[Config], *shape: Any) -> Config:
        """The fastest candidate for `shape_class` on this device: benchmarked once, then read
        from the tuning cache by later processes, which compile only the winner."""
        if self.tuning_cache is None:
            return self._tune(configs, *shape)

        def build(tmp: Path) -> None:
            best = self._tune(configs, *shape)
            (tmp / "config.json").write_text(json.dumps(list(best)))

        inputs = self._tuning_inputs(shape_class, shape[0])
        entry = self.tuning_cache.entry("triton-tuning", inputs, build)
        return self._stored(entry, configs, *shape)

    def _compiling(self, configs: list[Config], tensors: Any, sizes: Any, xnumel: int,
                   rnumel: int, idx64: bool, err: Any) -> list[Any] | None:
        """The compile workers' Futures for configs[1:], or None where a candidate has no job
        (this process would compile it: tuning now costs the same as later)."""
        if not self.precompiled:  # no compile workers, or none of their jobs left
            return None
        args = self._args(tensors, sizes, xnumel, rnumel, err)
        futures = [self.precompiled.get(self._job(c, args, xnumel, rnumel, idx64)[0])
                   for c in configs[1:]]
        return None if None in futures else futures

    def _tune_ready(self, key: tuple[Any, ...]) -> bool:
        """Whether the shape class `key` waits for tuning and all its candidates have compiled
        (and no CUDA graph is being captured: a benchmark synchronises)."""
        pending = self.pending.get(key)
        return (pending is not None and all(f.done() for f in pending[1])
                and not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()))
