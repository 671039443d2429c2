"""Compile the CUDA flavour of polyduct-triton kernels for a GPU target on a machine without one.

Triton compiles to PTX and cubin without a device. This runs the conformance suite (or a slice of
it) on CPU under the interpreter as usual, records for every kernel the CUDA source the backend
generates for CUDA tensors (libdevice, native bfloat16, no interpreter paths), then compiles each
for `--arch` (default 90, the H200) with the config the launcher picks first, in a process without
the interpreter. Compile errors are reported with the kernel name; numerics on the GPU still need
a GPU run (bench/gpu_job.sh).

    TRITON_INTERPRET=1 python plugins/triton/tools/sm90_compile.py [--ops REGEX] [--dtypes D,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

TT = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
      torch.float64: "fp64", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
      torch.int64: "i64", torch.uint8: "u8", torch.bool: "i1"}


def record(directory: Path, ops: str | None, dtypes: tuple[str, ...],
           categories: tuple[str, ...]) -> int:
    """Run the interpreter suite, writing each kernel's CUDA source and argument types."""
    from polyduct.conformance.runner import Selection, run_backend
    from polyduct.kernel import KernelSpec
    from polyduct_triton import backend as triton_backend
    from polyduct_triton.codegen import generate
    from polyduct_triton.ops import TritonOps

    original = triton_backend.TritonBackend.codegen
    count = [0]

    def codegen(self: triton_backend.TritonBackend, spec: KernelSpec) -> object:
        source = generate(dataclasses.replace(spec, device="cuda"), TritonOps, False)
        entry = {"name": spec.name, "args": [TT[b.dtype] for b in spec.args],
                 "reduction": bool(spec.reduction_ranges)}
        (directory / f"k{count[0]}.py").write_text(source)
        (directory / f"k{count[0]}.json").write_text(json.dumps(entry))
        count[0] += 1
        return original(self, spec)

    triton_backend.TritonBackend.codegen = codegen  # type: ignore[method-assign]
    report = run_backend("triton", triton_backend.TritonBackend(), None,
                         Selection(ops, dtypes, categories))
    print(f"interpreter: {report.counts()}; recorded {count[0]} CUDA kernels", flush=True)
    return count[0]


def compile_all(directory: Path, arch: int) -> int:
    """Compile every recorded kernel for sm_`arch`; print failures; return their number."""
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    failed = 0
    paths = sorted(directory.glob("k*.py"), key=lambda p: int(p.stem[1:]))
    for path in paths:
        entry = json.loads(path.with_suffix(".json").read_text())
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            names = list(module._kernel.arg_names)
            sig = {n: "*" + t for n, t in zip(names, entry["args"], strict=False)}
            for n in names[len(entry["args"]):]:
                sig[n] = ("constexpr" if n in ("XBLOCK", "RBLOCK", "IDX64", "PERSISTENT")
                          else "*i64" if n.startswith("err") else "i64")
            rnumel = 1024 if entry["reduction"] else 1
            xb, rb, warps = module.RUNTIME.configs(1024, rnumel)[0]
            src = ASTSource(module._kernel, signature=sig,
                            constexprs={"XBLOCK": xb, "RBLOCK": rb, "IDX64": False,
                                        "PERSISTENT": rb >= rnumel})
            triton.compile(src, target=GPUTarget("cuda", arch, 32),
                           options={"num_warps": warps, "enable_fp_fusion": False,
                                    **module.RUNTIME.cuda_options})
        except Exception as exc:  # noqa: BLE001 - every kernel reports, pass or fail
            failed += 1
            print(f"FAILED {entry['name']} ({path}): {type(exc).__name__}: {str(exc)[-1500:]}")
    print(f"compiled {len(paths) - failed} of {len(paths)} kernels for sm_{arch}")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", help="regular expression selecting op names")
    parser.add_argument("--dtypes", help="comma-separated dtype names")
    parser.add_argument("--category", action="append", default=[],
                        help="op category (repeatable; default: all but graph)")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--compile-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compile_only:
        return 1 if compile_all(args.compile_only, args.arch) else 0
    directory = Path(tempfile.mkdtemp(prefix="polyduct-sm90-"))
    categories = tuple(args.category) or ("math", "comparison", "bitwise", "dtype", "memory",
                                          "indexing", "reduction", "scan", "random", "other")
    record(directory, args.ops, tuple(args.dtypes.split(",")) if args.dtypes else (), categories)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, __file__, "--compile-only", str(directory), "--arch", str(args.arch)]
    return subprocess.run(cmd, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
