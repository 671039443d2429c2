"""Interleaved medians of eager / Inductor C++ / polyduct-cpp on the issue-5 workloads.

Run from the repository root: `.venv/bin/python plugins/cpp/tools/bench_speed.py [names] [-n 1024]`.
Prints one table (microseconds) and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.getcwd())
from bench.timing import interleaved_medians
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("-n", "--sizes", default="64,1024,4096")
    parser.add_argument("-r", "--rounds", type=int, default=31)
    parser.add_argument("-b", "--budget", type=float, default=6.0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load before: {os.getloadavg()}")
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
            med = interleaved_medians(calls, "cpu", args.rounds, args.budget)
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
