"""`polyduct fuzz`: a seeded differential fuzzing campaign against one kernel backend."""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from polyduct.fuzz.runner import FAILURES, Campaign, run_campaign, summary_table
from polyduct.fuzz.worker import Config

FUZZ_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
               torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the `fuzz` subcommand on `subparsers` (from `polyduct.cli`)."""
    p = subparsers.add_parser(
        "fuzz", help="compile random programs with one kernel backend and compare with eager")
    p.add_argument("--backend", required=True, help="kernel backend (options['kernels'])")
    p.add_argument("--graphs", type=int, default=100, help="number of programs")
    p.add_argument("--seed", type=int, default=0, help="campaign seed")
    p.add_argument("--start", type=int, default=0, help="index of the first program")
    p.add_argument("--options", default="{}",
                   help="JSON object of further torch.compile options")
    p.add_argument("--device", default="cpu", help="device inputs and eager run on (cpu, cuda)")
    p.add_argument("--out", type=Path, default=Path("fuzz-out"),
                   help="directory for results.jsonl and failing programs' reproducers")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                   help="worker processes")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one program may take")
    p.add_argument("--shrink-seconds", type=float, default=120.0,
                   help="time spent shrinking one failing program")
    p.add_argument("--resume", action="store_true",
                   help="keep the results OUT/results.jsonl holds for these programs (same "
                   "backend, seed, device and options) and run only the others")
    p.add_argument("--no-known", action="store_true",
                   help="do not generate programs that trigger known bugs")
    return p  # type: ignore[no-any-return]


def _dtypes(backend: str) -> tuple[torch.dtype, ...]:
    """The fuzzed dtypes the backend declares it handles."""
    from polyduct.plugins import load

    specs = dict(load().kernel_backends.items())
    if backend not in specs:
        raise SystemExit(f"error: no kernel backend {backend!r}; installed: {sorted(specs)}")
    caps = specs[backend].backend_cls.caps.dtypes
    return tuple(d for d in FUZZ_DTYPES if d in caps)


def run(args: argparse.Namespace) -> int:
    """Run the campaign, print the summary table; 1 when any program failed."""
    options = json.loads(args.options)
    if not isinstance(options, dict):
        print("error: --options must be a JSON object", file=sys.stderr)
        return 2
    config = Config(args.backend, args.seed, options, args.device, _dtypes(args.backend),
                    args.out, args.shrink_seconds, known=not args.no_known)
    campaign = Campaign(config, args.graphs, args.start, args.jobs, args.timeout, args.resume)
    faulthandler.enable()  # a crash of the runner itself prints where it was
    start = time.monotonic()
    results = run_campaign(campaign)
    table = summary_table(results, args.backend, time.monotonic() - start)
    print(table)
    (args.out / f"summary_{args.backend}_s{args.seed}.md").write_text(table + "\n")
    return 1 if any(r.status in FAILURES for r in results) else 0
