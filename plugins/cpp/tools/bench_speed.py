"""Interleaved medians of eager / Inductor C++ / polyduct-cpp on the issue-5 workloads.

Run from the repository root: `.venv/bin/python plugins/cpp/tools/bench_speed.py [names] [-n 1024]`.
Prints one table (microseconds) and the load average before and after. `--threads 1` compares the
generated code without thread scheduling noise (sets OMP_NUM_THREADS before any kernel library
loads); `--stat min` reports the fastest sample instead of the median (robust on a loaded host).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.getcwd())
from bench.timing import inner_count, time_call
from bench.workloads import by_name


def _variants(fn: Callable[..., Any], dynamic: bool) -> dict[str, Callable[..., Any]]:
    torch._dynamo.reset()
    return {
        "eager": fn,
        "inductor": torch.compile(fn, dynamic=dynamic),
        "polyduct": torch.compile(
            fn, backend="polyduct", dynamic=dynamic, options={"kernels": "cpp"}
        ),
    }


def _interleaved(
    calls: dict[str, Callable[[], Any]], rounds: int, budget_s: float, stat: str
) -> dict[str, float]:
    """Seconds per call of each entry (median or min), sampled round-robin."""
    # short samples: on a loaded host the fastest of many short ones is rarely preempted
    inner = {name: inner_count(fn, "cpu", 0.002) for name, fn in calls.items()}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    deadline = time.perf_counter() + budget_s
    for done in range(rounds):
        for name, fn in calls.items():
            samples[name].append(time_call(fn, "cpu", inner[name]))
        if done >= 2 and time.perf_counter() > deadline:
            break
    pick = min if stat == "min" else statistics.median
    return {name: pick(s) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("-n", "--sizes", default="64,1024,4096")
    parser.add_argument("-r", "--rounds", type=int, default=31)
    parser.add_argument("-b", "--budget", type=float, default=6.0)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-s", "--stat", choices=("median", "min"), default="median")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load before: {os.getloadavg()}; threads {args.threads}, {args.stat} of samples")
    print(f"{'workload':<16}{'n':>6}{'eager':>11}{'inductor':>11}{'polyduct':>11}{'pd/ind':>8}")
    for wl in by_name(args.names):
        fns = _variants(wl.fn, wl.dynamic)
        for n in sizes:
            if n == 4096 and "large" not in wl.sizes:
                continue
            inputs = wl.make_inputs(n, "cpu")
            ref = wl.fn(*inputs)
            calls = {}
            for name, f in fns.items():
                out = f(*inputs)
                torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
                calls[name] = lambda f=f, args=inputs: f(*args)
            med = _interleaved(calls, args.rounds, args.budget, args.stat)
            us = {k: v * 1e6 for k, v in med.items()}
            ratio = us["polyduct"] / us["inductor"]
            print(
                f"{wl.name:<16}{n:>6}{us['eager']:>11.1f}{us['inductor']:>11.1f}"
                f"{us['polyduct']:>11.1f}{ratio:>8.2f}",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
