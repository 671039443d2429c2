"""`python -m bench [runtime|compile|instructions|check|models|kernels]`: see bench/__init__.py and docs/performance.md."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).with_name("results")
DOCS_IMG = Path(__file__).parent.parent / "docs" / "img"


def _runtime(args: argparse.Namespace) -> int:
    from bench.plot import plot_runtime
    from bench.report import ratio_table, runtime_table
    from bench.runtime import Result, run_suite, to_json
    from bench.variants import installed_kernel_backends, variants
    from bench.workloads import by_name

    device = args.device
    chosen = variants(
        device, args.kernels or None, args.halide_schedules, args.dynamo_floor, args.export
    )
    _, load_errors = installed_kernel_backends(device)
    print(f"variants: {[v.name for v in chosen]}", flush=True)

    done: list[Result] = []
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.out or RESULTS / "runtime.json")
    partial = out.with_suffix(".partial.json")

    def report(r: Result) -> None:
        done.append(r)
        partial.write_text(json.dumps(to_json(done, {"partial": True}), indent=2) + "\n")
        time_ms = "-" if r.median_s is None else f"{r.median_s * 1e3:.3f} ms"
        ratio = "" if r.vs_eager is None else f" x{r.vs_eager:.2f} vs eager"
        ind = "" if r.vs_inductor is None else f" x{r.vs_inductor:.2f} vs inductor"
        err = f"  [{r.error or r.skipped}]" if r.error or r.skipped else ""
        print(
            f"{r.workload:<20} {r.size:<7} {r.variant:<20} {time_ms}{ratio}{ind}{err}", flush=True
        )

    opts = {"rounds": args.rounds, "budget_s": args.budget}
    load_start = os.getloadavg()
    results = run_suite(by_name(args.workloads), args.sizes, chosen, device, opts, report)
    meta = {
        "torch": torch.__version__,
        "device": device,
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "plugin_load_errors": load_errors,
        "copy_bandwidth_Bps": opts.get("copy_bw"),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15_start": load_start,
        "loadavg_1_5_15_end": os.getloadavg(),
    }
    doc = to_json(results, meta)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    if not results:
        print(f"wrote {out}: nothing ran (no workload of {args.workloads} runs at {args.sizes})")
        return 1
    png = Path(args.png or DOCS_IMG / f"bench-{device.split(':')[0]}.png")
    plot_runtime(doc["results"], png)
    print(f"wrote {out} and {png}\n")
    print(ratio_table(doc), end="\n\n")
    print(runtime_table(doc))
    return 0


def _compile(args: argparse.Namespace) -> int:
    from bench.compile_time import run
    from bench.report import compile_side_by_side

    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows = run(args.workloads, args.size, args.compilers)
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.out or RESULTS / "compile_time.json")
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"load average at end: {os.getloadavg()}; wrote {out}\n")
    print(compile_side_by_side(rows))
    return 0


def _instructions(args: argparse.Namespace) -> int:
    from bench.checker import EXPECTED, check, failed, load_expected, report, updated
    from bench.instructions import COMPILERS, GRAPHS, measure_all, save

    RESULTS.mkdir(exist_ok=True)
    partial = RESULTS / "instructions.partial.json"
    graphs, compilers = args.graphs or list(GRAPHS), args.compilers or list(COMPILERS)
    counts = measure_all(graphs, compilers, args.jobs, partial)
    # a run of some graphs or compilers replaces their counts and keeps the others'
    saved = RESULTS / "instructions.json"
    old = json.loads(saved.read_text()) if saved.exists() else {}
    save(saved, {**old, **counts})
    expected = load_expected()
    if args.update:
        EXPECTED.write_text(json.dumps(updated(counts, expected), indent=2) + "\n")
        print(f"updated {EXPECTED}")
        return 0
    verdicts = check(counts, {k: v for k, v in expected.items() if k in counts})
    print(report(verdicts))
    return 1 if failed(verdicts) else 0


def _check(args: argparse.Namespace) -> int:
    from bench.checker import EXPECTED, check, failed, load_expected, report, updated

    counts: dict[str, Any] = json.loads(Path(args.results).read_text())
    expected = load_expected()
    if args.update:
        EXPECTED.write_text(json.dumps(updated(counts, expected), indent=2) + "\n")
        print(f"updated {EXPECTED} from {args.results}")
        return 0
    verdicts = check(counts, expected)
    print(report(verdicts))
    return 1 if failed(verdicts) else 0


def main(argv: list[str] | None = None) -> int:
    from bench.model_kernels import add_parser as add_kernels_parser
    from bench.model_kernels import main as kernels_main
    from bench.models import add_parsers as add_model_parsers
    from bench.models import main as models_main

    if not torch.cuda.is_available():  # Triton has no CPU driver: kernels run interpreted
        os.environ.setdefault("TRITON_INTERPRET", "1")
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="cmd")
    rt = sub.add_parser("runtime", help="runtime suite (default)")
    rt.add_argument(
        "--sizes",
        nargs="+",
        default=["small", "medium", "large"],
        choices=["small", "medium", "large"],
        help="small 64x64, medium 1024x1024, large 4096x4096",
    )
    rt.add_argument("--workloads", nargs="*")
    rt.add_argument("--kernels", nargs="*", help="polyduct kernel backends (default: installed)")
    rt.add_argument(
        "--halide-schedules", nargs="*", default=[], help="extra Halide variants, e.g. Adams2019"
    )
    rt.add_argument(
        "--dynamo-floor",
        action="store_true",
        help="add torch.compile with a backend that runs the captured graph unchanged: the "
        "per-call cost every backend pays",
    )
    rt.add_argument(
        "--export",
        action="store_true",
        help="add inductor-export and polyduct-<k>-export: each compiler reached through "
        "torch.export, with no Dynamo on the call path (forward-only workloads)",
    )
    rt.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    rt.add_argument("--rounds", type=int, default=15)
    rt.add_argument("--budget", type=float, default=6.0, help="seconds of timing per group")
    rt.add_argument("--out")
    rt.add_argument("--png", help="plot path (default docs/img/bench-<device>.png)")
    ct = sub.add_parser("compile", help="cold and warm compile time")
    ct.add_argument("--workloads", nargs="*")
    ct.add_argument("--size", default="small")
    ct.add_argument("--compilers", nargs="*", help="variant names, e.g. inductor polyduct-cpp")
    ct.add_argument("--out")
    ins = sub.add_parser("instructions", help="compile-time instruction counts (callgrind)")
    ins.add_argument("--graphs", nargs="*")
    ins.add_argument("--compilers", nargs="*")
    ins.add_argument("--jobs", type=int, default=1, help="measurements run at once")
    ins.add_argument("--update", action="store_true", help="rewrite the expected results")
    ck = sub.add_parser("check", help="check saved counts against the expected results")
    ck.add_argument("results", nargs="?", default=str(RESULTS / "instructions.json"))
    ck.add_argument("--update", action="store_true", help="take these counts as expected")
    cw = sub.add_parser("compile-worker")
    cw.add_argument("--workload")
    cw.add_argument("--variant")
    cw.add_argument("--size")
    iw = sub.add_parser("instr-worker")
    iw.add_argument("--graph")
    iw.add_argument("--compiler")
    add_model_parsers(sub)
    add_kernels_parser(sub)
    args = parser.parse_args(argv)
    if args.cmd in ("models", "models-worker", "models-cold"):
        return models_main(args)
    if args.cmd == "kernels":
        return kernels_main(args)
    if args.cmd == "compile-worker":
        from bench.compile_time import worker

        worker(args.workload, args.variant, args.size)
        return 0
    if args.cmd == "instr-worker":
        from bench.instructions import worker as instr_worker

        instr_worker(args.graph, args.compiler)
        return 0
    handlers = {"compile": _compile, "instructions": _instructions, "check": _check}
    if args.cmd is None:
        args = parser.parse_args(["runtime", *(argv if argv is not None else sys.argv[1:])])
    return handlers.get(args.cmd, _runtime)(args)


if __name__ == "__main__":
    sys.exit(main())
