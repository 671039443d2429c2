"""bench.triton_stages: seconds per Triton compile stage of a generated kernel module, compiled
for sm_90 with no GPU (a subprocess: Triton reads TRITON_INTERPRET when it is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sympy
import torch

from polyduct.cache import Cache
from polyduct.kernel import KernelBuffer, KernelSpec, Stage

ROOT = Path(__file__).resolve().parents[1]


def test_stages_of_a_kernel_compiled_for_sm90(tmp_path: Path) -> None:
    pytest.importorskip("polyduct_triton")
    from polyduct_triton import TritonBackend, TritonOptions

    def body(ops: object, x: list[object], r: object) -> None:
        ops.store("o", x[0], ops.exp(ops.load("a", x[0])))  # type: ignore[attr-defined]

    n = sympy.Integer(1 << 20)
    spec = KernelSpec(
        name="exp_kernel", ranges=(n,), reduction_ranges=(), stages=(Stage("outer", body),),
        buffers=(KernelBuffer("a", torch.float32, "in", n),
                 KernelBuffer("o", torch.float32, "out", n)),
        device="cuda",
    )
    be = TritonBackend(TritonOptions(cache=Cache(tmp_path / "cache")))
    path = tmp_path / "kernel.py"
    path.write_text(be.codegen(spec).source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.triton_stages", "--target", "90", "--repeats", "1",
         str(path)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert row["kernel"] == "exp_kernel" and row["path"] == str(path)  # rows name their module
    stages = ("python to ttir", "ttir", "ttgir", "llir", "ptx", "cubin")
    assert all(row[s] > 0 for s in stages)
    # the stages run inside triton.compile, which runs inside the JIT's warmup
    assert sum(row[s] for s in stages) <= row["triton.compile"] <= row["warmup"]
