"""A chain of one elementwise op, polyduct-triton against Inductor and eager on a GPU.

`python -m bench.gpu_chain [--ops tanh,exp,...] [--length 30] [--shape 16384,4096]`: for each op
and dtype, `x -> op(x) * 0.5` repeated `length` times (the scale keeps values in range), compiled
by both, timed with CUDA events, round-robin over the variants in one process. Prints ms per call
and polyduct's speedup over Inductor (>1: polyduct faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from typing import Any

import torch

OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "exp": lambda x: torch.exp(-x.abs()),
    "sigmoid": torch.sigmoid,
    "gelu": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu,
    "erf": torch.erf,
    "sin": torch.sin,
    "log1p": lambda x: torch.log1p(x.abs()),
    "expm1": lambda x: torch.expm1(-x.abs()),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 1),
}


def chain(op: Callable[[torch.Tensor], torch.Tensor], length: int) -> Callable[..., Any]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        for _ in range(length):
            x = op(x) * 0.5
        return x

    return fn


def time_ms(fn: Callable[..., Any], x: torch.Tensor, reps: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn(x)
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / reps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--shape", default="16384,4096")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    shape = tuple(int(s) for s in args.shape.split(","))
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        x = torch.randn(shape, device="cuda", dtype=dtype)
        for name in args.ops.split(","):
            fn = chain(OPS[name], args.length)
            torch._dynamo.reset()
            variants = {
                "eager": fn,
                "inductor": torch.compile(fn),
                "polyduct": torch.compile(fn, backend="polyduct"),
            }
            for f in variants.values():
                f(x)
                f(x)
            times: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(args.rounds):
                for k, f in variants.items():
                    times[k].append(time_ms(f, x))
            med = {k: statistics.median(v) for k, v in times.items()}
            row = {"op": name, "dtype": dtype_name, **{f"{k}_ms": v for k, v in med.items()}}
            row["vs_inductor"] = med["inductor"] / med["polyduct"]
            rows.append(row)
            print(
                f"{name:8} {dtype_name:9} eager {med['eager']:.3f} inductor {med['inductor']:.3f}"
                f" polyduct {med['polyduct']:.3f} ms  x{row['vs_inductor']:.2f} vs inductor",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
