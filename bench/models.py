"""`python -m bench models`: the model suite. Each model runs its checks and timings in a process of
its own (bench/models_worker.py), so a crash or a hang costs that model only; each cold first call
runs in a fresh process with empty compile caches, timed from process start to the first result.
Results go to bench/results/models-<device>[-<dtype>].json, the dashboard to docs/models.md."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from bench.models_nn import by_names
from bench.models_worker import PHASES

ROOT = Path(__file__).parent.parent
RESULTS = ROOT / "bench" / "results"
# kernel backends not run by default: the reference backend is the oracle (a Python loop nest
# per kernel) and Triton on a CPU runs under its interpreter
SLOW_ON_CPU = {"reference", "triton"}
COLD_BASELINES = ("eager", "aot_eager")


def default_variants(device: str) -> list[str]:
    """eager, inductor, and polyduct with each kernel backend usable on `device`."""
    from bench.variants import installed_kernel_backends

    found, _ = installed_kernel_backends(device)
    if device.startswith("cuda"):
        kernels = [k for k in found if k == "triton"]
    else:
        kernels = [k for k in found if k not in SLOW_ON_CPU]
    return ["eager", "inductor"] + [f"polyduct-{k}" for k in kernels]


def results_path(device: str, dtype: str, threads: int) -> Path:
    name = "models-cpu" if device == "cpu" else f"models-{device.split(':')[0]}-{dtype}"
    return RESULTS / (f"{name}.json" if threads == 2 else f"{name}-t{threads}.json")


def _env(threads: int, caches: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    if caches is not None:
        env["POLYDUCT_CACHE_DIR"] = str(caches / "polyduct")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
        env["TRITON_CACHE_DIR"] = str(caches / "triton")
    return env


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def run_worker(model: str, args: Any, timeout: float) -> list[dict[str, Any]]:
    """The model's rows from its worker process; a crash or timeout adds a `worker` row."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "bench",
            "models-worker",
            "--model",
            model,
            "--device",
            args.device,
            "--dtype",
            args.dtype,
            "--threads",
            str(args.threads),
            "--variants",
            ",".join(args.variants),
            "--phases",
            ",".join(args.phases),
            "--out",
            str(out),
        ]
        error = None
        try:
            proc = subprocess.run(
                cmd,
                env=_env(args.threads),
                cwd=ROOT,
                timeout=timeout,
                stdout=None,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                error = f"worker exit {proc.returncode}: {_last_line(proc.stderr)}"
        except subprocess.TimeoutExpired:
            error = f"worker timed out after {timeout:.0f} s"
        rows = [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else []
    if error:
        print(f"  {model:<11} worker: {error}", flush=True)
        rows.append(
            {"model": model, "variant": "-", "check": "worker", "ok": False, "error": error}
        )
    return rows


def cold_worker(model: str, variant: str, device: str, dtype: str, start: float) -> None:
    """In a fresh process: build, compile and run the model once; print the wall-clock time
    since `start` (the parent's clock when it started this process) and peak memory."""
    import resource

    from bench.models_worker import DTYPES, cast_inputs, compile_variant, error_text
    from bench.timing import sync

    spec = by_names([model])[0]
    try:
        module = spec.build().eval().to(device, DTYPES[dtype])
        kw = cast_inputs(
            spec.inputs(torch.Generator().manual_seed(0), spec.sizes[0], device), DTYPES[dtype]
        )
        fn = compile_variant(module, variant, None)
        with torch.no_grad():
            fn(**kw)
        sync(device)
        result: dict[str, Any] = {"seconds": time.time() - start}
        with torch.no_grad():
            fn(**kw)
        sync(device)
        result["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if device.startswith("cuda"):
            result["peak_bytes"] = torch.cuda.max_memory_allocated()
    except Exception as exc:  # noqa: BLE001 - reported as the row's error
        result = {"error": error_text(exc)}
    print("COLD " + json.dumps(result), flush=True)


def measure_cold(model: str, variant: str, args: Any, timeout: float) -> dict[str, Any]:
    """One cold first call: empty cache directories, timed from process start."""
    caches = Path(tempfile.mkdtemp(prefix="polyduct-models-"))
    try:
        start = time.time()
        cmd = [
            sys.executable,
            "-m",
            "bench",
            "models-cold",
            "--model",
            model,
            "--variant",
            variant,
            "--device",
            args.device,
            "--dtype",
            args.dtype,
            "--start",
            repr(start),
        ]
        proc = subprocess.run(
            cmd,
            env=_env(args.threads, caches),
            cwd=ROOT,
            timeout=timeout,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("COLD ")]
        if lines:
            result: dict[str, Any] = json.loads(lines[-1][5:])
        else:
            result = {"error": f"exit {proc.returncode}: {_last_line(proc.stderr)}"}
    except subprocess.TimeoutExpired:
        result = {"error": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    row = {"model": model, "variant": variant, "check": "cold", **result}
    shown = f"{result['seconds']:.2f} s" if "seconds" in result else result["error"]
    print(f"  {model:<11} {variant:<16} cold           {shown}", flush=True)
    return row


def _meta(args: Any) -> dict[str, Any]:
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": args.device,
        "device_name": torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else platform.processor() or platform.machine(),
        "dtype": args.dtype,
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "variants": args.variants,
        "phases": args.phases,
    }


def run_suite(args: Any) -> int:
    """Every selected model: worker (checks, timings), then cold first calls; JSON written
    after each model."""
    torch.set_num_threads(args.threads)
    specs = by_names(args.models)
    args.variants = args.variants or default_variants(args.device)
    cold = [] if args.skip_cold else [*COLD_BASELINES, *[v for v in args.variants if v != "eager"]]
    out = Path(args.out) if args.out else results_path(args.device, args.dtype, args.threads)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"meta": _meta(args), "rows": []}
    doc["meta"]["loadavg_start"] = os.getloadavg()
    print(
        f"models: {[s.name for s in specs]}\nvariants: {args.variants}, phases: "
        f"{args.phases}, cold: {cold}, threads {args.threads}",
        flush=True,
    )
    begin = time.time()

    def save() -> None:
        doc["meta"]["loadavg_end"] = os.getloadavg()
        doc["meta"]["wall_s"] = time.time() - begin
        out.write_text(json.dumps(doc, indent=1) + "\n")

    def one(spec: Any) -> list[dict[str, Any]]:
        print(f"{spec.name}: started at {time.time() - begin:.0f} s", flush=True)
        doc["meta"].setdefault("loadavg_per_model", {})[spec.name] = os.getloadavg()
        return run_worker(spec.name, args, args.timeout) if args.phases else []

    # models run `jobs` at a time; cold first calls one at a time after them
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for rows in pool.map(one, specs):
            doc["rows"] += rows
            save()
    for spec in specs:
        if args.cold_models is None or spec.name in args.cold_models:
            doc["rows"] += [measure_cold(spec.name, v, args, args.timeout) for v in cold]
            save()
    print(f"wrote {out} in {time.time() - begin:.0f} s", flush=True)
    if not args.no_report:
        from bench.models_report import write_report

        write_report()
    return 0


def add_parsers(sub: Any) -> None:
    """The `models`, `models-worker` and `models-cold` subcommands."""
    md = sub.add_parser("models", help="the model suite (transformers + torch.nn models)")
    md.add_argument("--models", type=lambda s: s.split(","), help="comma-separated names")
    md.add_argument(
        "--variants",
        type=lambda s: s.split(","),
        help="default: eager,inductor,polyduct-<each usable kernel backend>",
    )
    md.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    md.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    md.add_argument("--threads", type=int, default=2, help="CPU threads (torch and OpenMP)")
    md.add_argument(
        "--phases",
        type=lambda s: [p for p in s.split(",") if p],
        default=list(PHASES),
        help=f"comma-separated subset of {','.join(PHASES)} ('' for cold first calls only)",
    )
    md.add_argument("--skip-timing", action="store_true", help="no timing phase")
    md.add_argument("--skip-cold", action="store_true", help="no cold first-call processes")
    md.add_argument(
        "--cold-models",
        type=lambda s: s.split(","),
        help="measure cold first calls of these models only (default: all)",
    )
    md.add_argument(
        "--only-correctness", action="store_true", help="same as --skip-timing --skip-cold"
    )
    md.add_argument(
        "--jobs", type=int, default=1, help="models checked at once (timings are then noisier)"
    )
    md.add_argument("--timeout", type=float, default=900, help="seconds per model process")
    md.add_argument("--out", help="JSON path (default bench/results/models-<device>...json)")
    md.add_argument("--no-report", action="store_true", help="do not rewrite docs/models.md")
    md.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite docs/models.md and the plot from the saved JSON",
    )
    wk = sub.add_parser("models-worker")
    cd = sub.add_parser("models-cold")
    for p in (wk, cd):
        p.add_argument("--model", required=True)
        p.add_argument("--device", default="cpu")
        p.add_argument("--dtype", default="float32")
    wk.add_argument("--threads", type=int, default=2)
    wk.add_argument("--variants", type=lambda s: s.split(","), required=True)
    wk.add_argument("--phases", type=lambda s: s.split(","), required=True)
    wk.add_argument("--out", required=True)
    cd.add_argument("--variant", required=True)
    cd.add_argument("--start", type=float, required=True)


def main(args: Any) -> int:
    """Dispatch one of the subcommands added by `add_parsers`."""
    if args.cmd == "models-worker":
        from bench.models_worker import run_model

        torch.set_num_threads(args.threads)
        run_model(
            by_names([args.model])[0],
            args.device,
            args.dtype,
            args.variants,
            args.phases,
            Path(args.out),
        )
        return 0
    if args.cmd == "models-cold":
        cold_worker(args.model, args.variant, args.device, args.dtype, args.start)
        return 0
    if args.report_only:
        from bench.models_report import write_report

        write_report()
        return 0
    if args.skip_timing or args.only_correctness:
        args.phases = [p for p in args.phases if p != "timing"]
    args.skip_cold = args.skip_cold or args.only_correctness
    return run_suite(args)
