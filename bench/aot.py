"""AOT packages against AOTInductor: load time and first-call time in a fresh process.

    python -m bench.aot [--device cpu|cuda] [--repeats 3] [--out bench/results/aot.json]

Exports one model (a pre-norm MLP block stack with a softmax head), packages it with
`polyduct.aot.compile_and_package` and with `torch._inductor.aoti_compile_and_package`, then, in
fresh processes (`--repeats` each, one OpenMP thread each), times `import torch`, loading the
package, the first call and the median of later calls, and checks the outputs against eager.
Packaging starts from empty caches (both compile cold). On CUDA polyduct's kernels are Triton's
(cubins in the package) and times include synchronising the device.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

DIM, BATCH = 256, 64

RUNNER = """
import sys, time, json
t0 = time.perf_counter()
import torch
kind, path, inputs_path = sys.argv[1:4]
x = torch.load(inputs_path)
t1 = time.perf_counter()
if kind == "polyduct":
    from polyduct.aot import load_package
    fn = load_package(path)
else:
    fn = torch._inductor.aoti_load_package(path)
sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
t2 = time.perf_counter()
out = fn(x)
sync()
t3 = time.perf_counter()
calls = []
for _ in range(50):
    s = time.perf_counter()
    fn(x)
    sync()
    calls.append(time.perf_counter() - s)
calls.sort()
out = out[0] if isinstance(out, (list, tuple)) else out
torch.save(out.cpu(), inputs_path + "." + kind + ".out")
print(json.dumps({"import_torch_s": t1 - t0, "load_s": t2 - t1, "first_call_s": t3 - t2,
                  "call_median_s": calls[len(calls) // 2]}))
"""


class Model(nn.Module):
    """Two pre-norm MLP blocks and a softmax head."""

    def __init__(self) -> None:
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(DIM) for _ in range(2)])
        self.ups = nn.ModuleList([nn.Linear(DIM, 2 * DIM) for _ in range(2)])
        self.downs = nn.ModuleList([nn.Linear(2 * DIM, DIM) for _ in range(2)])
        self.head = nn.Linear(DIM, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, up, down in zip(self.norms, self.ups, self.downs, strict=True):
            x = x + down(nn.functional.gelu(up(norm(x))))
        return self.head(x).softmax(-1)


def _package(kind: str, ep: torch.export.ExportedProgram, path: Path) -> float:
    start = time.perf_counter()
    if kind == "polyduct":
        from polyduct.aot import compile_and_package

        compile_and_package(ep, path)
    else:
        torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    return time.perf_counter() - start


def _fresh_process(kind: str, path: Path, inputs: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, kind, str(path), str(inputs)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} load failed (exit code {done.returncode}):\n"
                           f"{done.stdout[-1000:]}\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    model = Model().eval().to(args.device)
    x = torch.randn(BATCH, DIM).to(args.device)
    ep = torch.export.export(model, (x,))
    want = model(x).detach().cpu()
    report: dict[str, Any] = {
        "model": f"2 MLP blocks + softmax head, dim {DIM}, batch {BATCH}",
        "device": torch.cuda.get_device_name() if x.is_cuda else "cpu",
        "torch": torch.__version__,
    }
    with tempfile.TemporaryDirectory(prefix="polyduct-aot-bench-") as tmp:
        # cold compiles: both compilers' caches (and Triton's) start empty
        os.environ["POLYDUCT_CACHE_DIR"] = str(Path(tmp) / "polyduct-cache")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor-cache")
        os.environ["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton-cache")
        inputs = Path(tmp) / "x.pt"
        torch.save(x, inputs)
        for kind in ("polyduct", "aotinductor"):
            try:
                report[kind] = _measure(kind, ep, Path(tmp) / f"{kind}.pt2", inputs, want, args)
            except Exception as exc:  # noqa: BLE001 - one failing leaves the other's row
                report[kind] = {"error": f"{type(exc).__name__}: {str(exc)[-2000:]}"}
            print(kind, json.dumps(report[kind]), flush=True)
            if args.out is not None:
                args.out.write_text(json.dumps(report, indent=1) + "\n")


def _measure(
    kind: str, ep: Any, path: Path, inputs: Path, want: torch.Tensor, args: Any
) -> dict[str, Any]:
    """Package with `kind`, then load and call in `args.repeats` fresh processes."""
    row: dict[str, Any] = {"package_s": _package(kind, ep, path)}
    row["package_bytes"] = path.stat().st_size
    runs = [_fresh_process(kind, path, inputs) for _ in range(args.repeats)]
    for key in runs[0]:
        row[key] = statistics.median(r[key] for r in runs)
    got = torch.load(str(inputs) + f".{kind}.out")
    row["max_abs_error"] = float((got - want).abs().max().detach())
    return row


if __name__ == "__main__":
    main()
