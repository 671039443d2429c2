"""`python -m bench.sort_compile`: seconds to compile and first-run generated Triton sorts on CUDA.

Each (op, length) runs in a fresh process with empty polyduct and Triton caches and the Triton
backend's sort limit lifted, under a time limit; a length that runs past it ends that op's series.
The numbers choose `TritonBackend.caps.sort_limits["cuda"]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PROGRAMS = {
    "sort_desc": "torch.sort(x, dim=-1, descending=True)",
    "sort_stable": "torch.sort(x, dim=-1, stable=True)",
    "topk5": "torch.topk(x, 5, dim=-1)",
}
CHILD = """
import dataclasses, sys, time, torch
from polyduct_triton.backend import TritonBackend
TritonBackend.caps = dataclasses.replace(TritonBackend.caps, sort_limits={{}})
x = torch.randn(32, {n}, device="cuda")
f = torch.compile(lambda x: {expr}, backend="polyduct", options={{"kernels": "triton"}})
start = time.perf_counter()
got = f(x)
torch.cuda.synchronize()
want = {expr}
assert torch.equal(got[0], want[0]), "wrong values"
print(time.perf_counter() - start)
"""


def _one(op: str, n: int, timeout: float) -> float | None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "POLYDUCT_CACHE_DIR": f"{tmp}/p", "TRITON_CACHE_DIR": f"{tmp}/t"}
        code = CHILD.format(n=n, expr=PROGRAMS[op])
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return None
        if done.returncode != 0:
            print(f"{op} {n}: failed\n{done.stderr[-1500:]}", flush=True)
            return -1.0
        return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", default="16,32,64,128,256,300,512,1024")
    parser.add_argument("--ops", default=",".join(PROGRAMS))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    for op in args.ops.split(","):
        for n in (int(v) for v in args.lengths.split(",")):
            began = time.perf_counter()
            seconds = _one(op, n, args.timeout)
            wall = time.perf_counter() - began
            rows.append({"op": op, "length": n, "first_call_s": seconds, "process_s": wall})
            shown = "timed out" if seconds is None else f"{seconds:.1f} s"
            print(f"{op:<12} {n:>5}: {shown} (process {wall:.1f} s)", flush=True)
            if seconds is None:
                break
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
