"""Compile a small fused workload with polyduct and compare it with eager and Inductor, honestly.

The variants are timed round-robin in one process (one batch of calls of each per round, the
order rotated every round), so drift of the machine hits all of them alike. Each ratio is computed
per round and reported as the median with its interquartile range; when that range is wider than
`--max-spread` of the median (a busy machine), no ratio is claimed.

Run: .venv/bin/python examples/speedup.py [--kernels NAME] [--size N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Fn = Callable[[], object]


def workload(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """LayerNorm followed by a GELU-like pointwise epilogue: one reduction kernel plus fusion."""
    y = torch.nn.functional.layer_norm(x, x.shape[-1:], w, b)
    return y * torch.sigmoid(1.702 * y) + torch.tanh(x) * 0.5


def batch_size(fn: Fn, target_s: float = 0.01) -> int:
    """Calls per sample so that one sample takes about `target_s` (at least one call)."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(1000, round(target_s / once)))


def interleaved(variants: dict[str, Fn], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each variant, one sample per round, variants in rotating order."""
    for fn in variants.values():  # warm-up: caches, lazy initialisation
        fn()
    batches = {name: batch_size(fn) for name, fn in variants.items()}
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, n = variants[name], batches[name]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - start) / n)
    return samples


@dataclass(frozen=True)
class Spread:
    """Median and interquartile range of some samples."""

    median: float
    low: float
    high: float

    @property
    def relative(self) -> float:
        """Width of the interquartile range as a fraction of the median."""
        return (self.high - self.low) / self.median if self.median else float("inf")


def spread(values: Sequence[float]) -> Spread:
    if len(values) < 4:
        m = statistics.median(values)
        return Spread(m, min(values), max(values))
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return Spread(q2, q1, q3)


def ratio(slow: Sequence[float], fast: Sequence[float]) -> Spread:
    """Speedup of `fast` over `slow`, from the samples of the same rounds."""
    return spread([s / f for s, f in zip(slow, fast, strict=True)])


def verdict(name: str, base: str, r: Spread, max_spread: float) -> str:
    """One line: the speedup with its range, or why none is claimed."""
    if r.relative > max_spread:
        return (
            f"{name} vs {base}: no ratio, the machine is too noisy (per-round ratios "
            f"{r.low:.2f}-{r.high:.2f}x, spread {r.relative:.0%} > {max_spread:.0%}); "
            "run again on a quiet machine"
        )
    return f"{name} vs {base}: {r.median:.2f}x (per-round ratios {r.low:.2f}-{r.high:.2f}x)"


def report(samples: dict[str, list[float]], ours: str, max_spread: float) -> list[str]:
    lines = [f"{'variant':<22}{'median ms':>12}{'quartiles ms':>22}{'spread':>8}"]
    for name, values in samples.items():
        s = spread(values)
        quartiles = f"{s.low * 1e3:.3f}-{s.high * 1e3:.3f}"
        lines.append(f"{name:<22}{s.median * 1e3:>12.3f}{quartiles:>22}{s.relative:>8.0%}")
    for base, values in samples.items():
        if base != ours:
            lines.append(verdict(ours, base, ratio(values, samples[ours]), max_spread))
    return lines


def main() -> None:
    from polyduct.plugins import load

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    installed = load().kernel_backends.names()
    default = "cpp" if "cpp" in installed else "reference"
    parser.add_argument("--kernels", default=default, choices=sorted(installed))
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--max-spread", type=float, default=0.10)
    args = parser.parse_args()

    torch.manual_seed(0)
    n = args.size
    inputs = (torch.randn(n, n), torch.randn(n), torch.randn(n))
    want = workload(*inputs)
    ours = torch.compile(workload, backend="polyduct", options={"kernels": args.kernels})
    start = time.perf_counter()
    torch.testing.assert_close(ours(*inputs), want, rtol=1e-4, atol=1e-4)
    compile_s = time.perf_counter() - start
    theirs = torch.compile(workload)
    start = time.perf_counter()
    torch.testing.assert_close(theirs(*inputs), want, rtol=1e-4, atol=1e-4)
    inductor_s = time.perf_counter() - start

    name = f"polyduct-{args.kernels}"
    variants: dict[str, Fn] = {
        "eager": lambda: workload(*inputs),
        "inductor": lambda: theirs(*inputs),
        name: lambda: ours(*inputs),
    }
    load_before = os.getloadavg()[0]
    samples = interleaved(variants, args.rounds)
    print(f"workload: layernorm + gelu epilogue, {n}x{n} float32, {args.rounds} rounds interleaved")
    print(f"first call (compile) s: {name} {compile_s:.2f}, inductor {inductor_s:.2f}")
    print("\n".join(report(samples, name, args.max_spread)))
    cores = os.cpu_count() or 1
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.1f} before, {load_after:.1f} after, {cores} cores")
    if max(load_before, load_after) > cores:
        print("the machine was busier than its cores: treat every figure above as noise")


if __name__ == "__main__":
    main()
