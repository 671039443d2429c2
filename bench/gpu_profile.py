"""`python -m bench.gpu_profile`: where a model's time goes on a GPU, polyduct against Inductor.

For each model of the suite and each dtype, both compilers' forward (eval, no grad) is measured
in one process, each variant on its own deep copy of the model:
- `wall_ms`: median time of a call followed by a synchronisation;
- `host_ms`: median time until the call returns, the GPU idle before it (the host's share:
  Python, the wrapper, launches, and any synchronisation inside the call);
- `gpu_ms`, `kernels`: the device time of every kernel a call runs, and how many, from
  `torch.profiler` over `--calls` calls;
- `syncs`: host synchronisations of the stream or device per call;
- the largest kernels of each variant, by device time per call.

A variant whose `host_ms` is near its `wall_ms` is bound by the host: its kernels wait for
launches. Text on stdout, everything in `--json`.

    python -m bench.gpu_profile --models gpt2,llama --dtypes float32,bfloat16 --json prof.json
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import statistics
import time
from typing import Any

import torch

VARIANTS = ("inductor", "polyduct-triton")


def _median_ms(fn: Any, sync: bool, n: int) -> float:
    samples = []
    for _ in range(n):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if sync:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e3


def _profile(fn: Any, calls: int, top: int) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = collections.defaultdict(list)
    syncs = 0
    for e in prof.events():
        device_type = str(getattr(e, "device_type", "")).rsplit(".", 1)[-1]
        if device_type == "CUDA":
            kernels[e.name].append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
        elif e.name in ("cudaStreamSynchronize", "cudaDeviceSynchronize"):
            syncs += 1
    total = sum(sum(v) for v in kernels.values())
    largest = sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[:top]
    return {
        "gpu_ms": total / calls / 1e3,
        "kernels": sum(len(v) for v in kernels.values()) / calls,
        "syncs": (syncs - 1) / calls,  # less the final synchronisation
        "largest": [(name[:90], sum(v) / calls, len(v) / calls) for name, v in largest],
    }


def profile_model(name: str, dtype: torch.dtype, calls: int, top: int) -> dict[str, Any]:
    from bench.models_nn import by_names
    from bench.models_worker import cast_inputs, compile_variant

    spec = by_names([name])[0]
    torch.manual_seed(0)
    base = spec.build().to("cuda", dtype).eval()
    gen = torch.Generator().manual_seed(0)
    kw = cast_inputs(spec.inputs(gen, spec.sizes[0], "cuda"), dtype)
    result: dict[str, Any] = {"model": name, "dtype": str(dtype).removeprefix("torch.")}
    with torch.no_grad():
        fns = {v: compile_variant(copy.deepcopy(base), v, None) for v in VARIANTS}
        for fn in fns.values():
            for _ in range(3):
                fn(**kw)
        for v, fn in fns.items():
            call = lambda fn=fn: fn(**kw)
            result[v] = {
                "wall_ms": _median_ms(call, True, 40),
                "host_ms": _median_ms(call, False, 40),
                **_profile(call, calls, top),
            }
    return result


def _print(r: dict[str, Any]) -> None:
    print(f"== {r['model']} {r['dtype']}")
    for v in VARIANTS:
        if v not in r:
            print(f"  {v}: {r.get(v + '_error', 'missing')}")
            continue
        x = r[v]
        print(f"  {v:16} wall {x['wall_ms']:.3f} ms  host {x['host_ms']:.3f} ms  "
              f"gpu {x['gpu_ms']:.3f} ms  kernels {x['kernels']:.0f}  syncs {x['syncs']:.1f}")
        for kname, us, n in x["largest"]:
            print(f"      {us:9.1f} us  x{n:<4.0f} {kname}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gpt2,llama,bert")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    results = []
    for dtype_name in args.dtypes.split(","):
        for name in args.models.split(","):
            try:
                r = profile_model(name, getattr(torch, dtype_name), args.calls, args.top)
            except Exception as exc:  # noqa: BLE001 - one model's failure is reported, not fatal
                r = {"model": name, "dtype": dtype_name, "error": f"{type(exc).__name__}: {exc}"}
                print(f"== {name} {dtype_name}: {r['error']}")
            else:
                _print(r)
            results.append(r)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "results": results}, f, indent=1)
            torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
