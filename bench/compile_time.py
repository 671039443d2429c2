"""Cold and warm compile time per workload and compiler, each in a fresh process.

Cold: empty cache directories (`POLYDUCT_CACHE_DIR`, `TORCHINDUCTOR_CACHE_DIR`). Warm: a second
process on the same, now populated, directories. The time is the first call of the compiled
function (Dynamo + the backend's compile + one run) measured inside the process, so interpreter
start and imports are excluded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.variants import by_name as variant_by_name
from bench.variants import variants
from bench.workloads import SIZES, by_name


def worker(workload: str, variant: str, size: str) -> None:
    """In a fresh process: compile and run once, print {"seconds": ...} or {"error": ...}."""
    work = by_name([workload])[0]
    chosen = variant_by_name("cpu", variant)
    inputs = work.make_inputs(SIZES[size], "cpu")
    try:
        fn = chosen.wrap(work.fn, work.dynamic)
        start = time.perf_counter()
        fn(*inputs)
        print(json.dumps({"seconds": time.perf_counter() - start}))
    except Exception as exc:  # noqa: BLE001  (reported as the row's error)
        print(json.dumps({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}))


def _once(workload: str, variant: str, size: str, env: dict[str, str]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "compile-worker",
        "--workload",
        workload,
        "--variant",
        variant,
        "--size",
        size,
    ]
    proc = subprocess.run(
        cmd,
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=Path(__file__).parent.parent,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0][:200]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def measure(workload: str, variant: str, size: str) -> dict[str, Any]:
    """{"cold": ..., "warm": ...} seconds (or errors) for one workload and compiler."""
    root = Path.home() / ".cache" / "polyduct-bench"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root))
    env = dict(
        os.environ,
        POLYDUCT_CACHE_DIR=str(tmp / "polyduct"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"),
    )
    try:
        cold = _once(workload, variant, size, env)
        warm = _once(workload, variant, size, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"workload": workload, "variant": variant, "size": size, "cold": cold, "warm": warm}


def run(
    workloads: list[str] | None, size: str, compilers: list[str] | None = None
) -> list[dict[str, Any]]:
    """Cold/warm times of each compiled variant (default: all but eager) of each workload."""
    names = compilers or [v.name for v in variants("cpu") if v.name != "eager"]
    out = []
    for work in by_name(workloads):
        for variant in names:
            row = measure(work.name, variant, size)
            print(_row_text(row), file=sys.stderr, flush=True)
            out.append(row)
    return out


def _row_text(row: dict[str, Any]) -> str:
    def fmt(r: dict[str, Any]) -> str:
        return f"{r['seconds']:.2f}s" if "seconds" in r else f"error: {r['error']}"

    return f"{row['workload']:<20} {row['variant']:<20} cold {fmt(row['cold'])}, warm {fmt(row['warm'])}"
