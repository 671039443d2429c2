"""Per-call time at small batch, where launch overhead dominates: eager, Inductor with
mode="reduce-overhead", polyduct, and polyduct with mode="reduce-overhead" (CUDA graphs).

    python -m bench.reduce_overhead [--models mlp gpt2 llama] [--tokens 1] [--budget 3]
                                     [--out bench/results/reduce_overhead.json]

Workloads: a decoder step at batch 1 of the model suite's LMs (bench/models_zoo.py: GPT-2 and
Llama configs, random weights, `--tokens` new tokens with no cache) and a small MLP at batch 1.
Each variant compiles its own copy of the model, warms up (CUDA graphs record after their
warm-up calls), is checked against eager, then all variants are timed round-robin in this one
process (bench/timing.py: every variant runs once per round). Per model: median microseconds
per call, first-call seconds (compile included), the largest error against eager, and the
reasons polyduct's CUDA graphs gave for running a graph plainly (none: every graph recorded).
Measures on CUDA (`--device cpu` runs the same steps on the CPU, as a check of the script).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bench.timing import interleaved_medians, sync

WARM_CALLS = 6  # past polyduct's and Inductor's CUDA-graph warm-ups and recording
VARIANTS: dict[str, dict[str, Any]] = {
    "eager": {},
    "inductor-reduce-overhead": {"backend": "inductor", "mode": "reduce-overhead"},
    "polyduct": {"backend": "polyduct"},
    "polyduct-reduce-overhead": {"backend": "polyduct", "mode": "reduce-overhead"},
}


class MLP(nn.Module):
    """Three linear layers with GELU and a residual LayerNorm: a small launch-bound model."""

    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.up, self.mid, self.down = (nn.Linear(width, width) for _ in range(3))
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.up(x))
        h = nn.functional.gelu(self.mid(h)) + h
        return self.norm(self.down(h) + x)


def workloads(names: list[str], tokens: int) -> dict[str, tuple[nn.Module, dict[str, Any]]]:
    """name -> (model in eval mode, one call's keyword inputs) on the CPU."""
    found: dict[str, tuple[nn.Module, dict[str, Any]]] = {}
    gen = torch.Generator().manual_seed(0)
    for name in names:
        if name == "mlp":
            torch.manual_seed(0)
            found[name] = (MLP().eval(), {"x": torch.randn(1, 256, generator=gen)})
            continue
        from bench.models_zoo import hf_specs

        spec = {s.name: s for s in hf_specs()}[name]
        ids = torch.randint(3, 256, (1, tokens), generator=gen)
        found[name] = (spec.build().eval(), {"input_ids": ids})
    return found


def _output(result: Any) -> torch.Tensor:
    logits = getattr(result, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else result


def _caller(model: nn.Module, variant: str, inputs: dict[str, Any]) -> Callable[[], Any]:
    settings = VARIANTS[variant]
    fn: Callable[..., Any] = model
    if settings:
        fn = torch.compile(model, **settings)

    def call() -> torch.Tensor:
        with torch.no_grad():
            return _output(fn(**inputs))

    return call


class _Said(logging.Handler):
    """Collects what polyduct's CUDA graphs say (why a graph runs without them)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def bench_model(
    model: nn.Module, inputs: dict[str, Any], budget_s: float, device: str
) -> dict[str, Any]:
    """Every variant of one model: compiled, warmed, checked, then timed round-robin."""
    model = model.to(device)
    inputs = {k: v.to(device) for k, v in inputs.items()}
    with torch.no_grad():
        want = _output(model(**inputs)).clone()
    said = _Said()
    logging.getLogger("polyduct.cudagraphs").addHandler(said)
    rows: dict[str, Any] = {}
    calls: dict[str, Callable[[], Any]] = {}
    for variant in VARIANTS:
        row: dict[str, Any] = {}
        try:
            call = _caller(copy.deepcopy(model), variant, inputs)
            start = time.perf_counter()
            call()
            sync(device)
            row["first_call_s"] = round(time.perf_counter() - start, 3)
            for _ in range(WARM_CALLS):
                got = call().clone()
            row["max_abs_error"] = float((got.float() - want.float()).abs().max())
            calls[variant] = call
        except Exception as exc:  # noqa: BLE001 - one variant failing leaves the others' rows
            row["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        rows[variant] = row
    logging.getLogger("polyduct.cudagraphs").removeHandler(said)
    for variant, seconds in interleaved_medians(calls, device, 200, budget_s).items():
        rows[variant]["per_call_us"] = round(seconds * 1e6, 2)
    rows["polyduct_cudagraphs_said"] = said.messages
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["mlp", "gpt2", "llama"])
    parser.add_argument("--tokens", type=int, default=1, help="new tokens per decoder step")
    parser.add_argument("--budget", type=float, default=3.0, help="timing seconds per model")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench.reduce_overhead: no CUDA device (--device cpu checks the script)", file=sys.stderr)
        raise SystemExit(2)
    logging.getLogger("polyduct.cudagraphs").setLevel(logging.INFO)
    torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
        "torch": torch.__version__,
        "batch": 1,
        "tokens": args.tokens,
        "models": {},
    }
    for name, (model, inputs) in workloads(args.models, args.tokens).items():
        rows = bench_model(model, inputs, args.budget, args.device)
        report["models"][name] = rows
        print(name, json.dumps(rows), flush=True)
        if args.out is not None:  # after each model: a later failure keeps the earlier rows
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
