"""One model's checks and timings, run in a process of its own (`python -m bench models-worker`):
forward, a training step, dynamic shapes, torch.export, then round-robin timing. Every result is
appended to a JSON-lines file as soon as it is known, so a crash or a timeout keeps what was done.
"""

from __future__ import annotations

import copy
import functools
import json
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.models_judge import Verdict, flatten, judge, main_output
from bench.models_zoo import Inputs, ModelSpec
from bench.timing import interleaved_samples, sync

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PHASES = ("forward", "train", "dynamic", "export", "timing")


def compile_variant(module: torch.nn.Module, variant: str, dynamic: bool | None) -> Any:
    """`module` as variant `variant` runs it: eager, inductor, aot_eager, or polyduct-<kernels>."""
    if variant == "eager":
        return module
    if variant.startswith("polyduct-"):
        opts: dict[str, Any] = {"kernels": variant.removeprefix("polyduct-")}
        return torch.compile(module, backend="polyduct", options=opts, dynamic=dynamic)
    return torch.compile(module, backend=variant, dynamic=dynamic)


def cast_inputs(kw: Inputs, dtype: torch.dtype) -> Inputs:
    """Floating-point tensors cast to `dtype`; ids, masks and flags unchanged."""
    return {
        k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in kw.items()
    }


def error_text(exc: BaseException) -> str:
    """The innermost cause's type and first line (a Dynamo backend failure wraps the backend's
    error), and the innermost frame that raised it."""
    while True:
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if inner is None or inner is exc:
            break
        exc = inner
    lines = str(exc).strip().splitlines() or [""]
    first = lines[0][:300]
    detail = [ln.strip() for ln in lines[1:] if "error" in ln.lower()]
    if detail and "error" not in first.lower():
        first += f" | {detail[0][:200]}"  # e.g. the compiler's first error line
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {first}{where}"


@dataclass
class Context:
    spec: ModelSpec
    device: str
    dtype: torch.dtype
    variants: list[str]
    out: Path
    model: torch.nn.Module = field(init=False)
    model64: torch.nn.Module = field(init=False)
    forward_fns: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        built = self.spec.build().eval()
        self.model64 = copy.deepcopy(built).to(self.device, torch.float64)
        self.model = built.to(self.device, self.dtype)

    def inputs(self, size: int, seed: int = 0) -> Inputs:
        gen = torch.Generator().manual_seed(1000 * seed + size)
        return self.spec.inputs(gen, size, self.device)

    def record(self, variant: str, check: str, **data: Any) -> None:
        row = {"model": self.spec.name, "variant": variant, "check": check, **data}
        with self.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        ok = data.get("ok")
        mark = "" if ok is None else ("ok  " if ok else "FAIL")
        extra = data.get("error") or (f"{data['median_ms']:.3f} ms" if "median_ms" in data else "")
        print(f"  {self.spec.name:<11} {variant:<16} {check:<14} {mark} {extra}", flush=True)


def forward_outputs(module: Any, kw: Inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        return flatten(module(**kw))


def _verdict(
    ctx: Context, run: Callable[[], list[Any]], eager: list[Any], ref: list[Any], names: list[str]
) -> tuple[Verdict, float]:
    start = time.perf_counter()
    try:
        got = run()
        sync(ctx.device)
    except Exception as exc:  # noqa: BLE001 - the variant's failure is the result
        return Verdict(False, error_text(exc)), time.perf_counter() - start
    return judge(got, eager, ref, names, ctx.dtype), time.perf_counter() - start


def check_forward(ctx: Context) -> None:
    kw = ctx.inputs(ctx.spec.sizes[0])
    ref = forward_outputs(ctx.model64, cast_inputs(kw, torch.float64))
    kw = cast_inputs(kw, ctx.dtype)
    eager = forward_outputs(ctx.model, kw)
    names = [f"output[{i}]" for i in range(len(eager))]
    for variant in ctx.variants:
        if variant == "eager":
            continue
        fn = compile_variant(ctx.model, variant, None)
        run = functools.partial(forward_outputs, fn, kw)
        verdict, seconds = _verdict(ctx, run, eager, ref, names)
        if verdict.ok:
            ctx.forward_fns[variant] = fn
        ctx.record(variant, "forward", **verdict.as_json(), first_call_s=seconds)


def train_step(
    module: Any, params: list[torch.nn.Parameter], kw: Inputs, weight: torch.Tensor
) -> list[torch.Tensor | None]:
    """One training step's outputs, loss and every parameter's gradient."""
    for p in params:
        p.grad = None
    out = flatten(module(**kw))
    loss = (main_output(out).to(weight.dtype) * weight).mean()  # float64 for the reference
    loss.backward()
    return [t.detach() for t in out] + [loss.detach()] + [p.grad for p in params]


def train_copy(model: torch.nn.Module) -> tuple[torch.nn.Module, list[torch.nn.Parameter]]:
    module = copy.deepcopy(model).train()
    return module, list(module.parameters())


def check_train(ctx: Context, timing: bool) -> None:
    torch._dynamo.reset()
    kw = ctx.inputs(ctx.spec.sizes[0])
    kw64, kw = cast_inputs(kw, torch.float64), cast_inputs(kw, ctx.dtype)
    shape = main_output(forward_outputs(ctx.model, kw)).shape
    weight = torch.randn(shape, generator=torch.Generator().manual_seed(7)).to(ctx.device)
    m64, p64 = train_copy(ctx.model64)
    ref = train_step(m64, p64, kw64, weight.double())
    m32, p32 = train_copy(ctx.model)
    eager = train_step(m32, p32, kw, weight)
    n_out = len(eager) - len(p32) - 1
    names = [f"output[{i}]" for i in range(n_out)] + ["loss"]
    names += [f"grad {n}" for n, _ in m32.named_parameters()]
    steps: dict[str, Callable[[], Any]] = {"eager": lambda: train_step(m32, p32, kw, weight)}
    for variant in ctx.variants:
        if variant == "eager":
            continue
        module, params = train_copy(ctx.model)
        fn = compile_variant(module, variant, None)

        def step(fn: Any = fn, params: list[torch.nn.Parameter] = params) -> Any:
            return train_step(fn, params, kw, weight)

        verdict, seconds = _verdict(ctx, step, eager, ref, names)
        if verdict.ok:
            steps[variant] = step
        ctx.record(variant, "train", **verdict.as_json(), first_call_s=seconds)
    if timing:
        time_round_robin(ctx, "time-train", steps)


def check_dynamic(ctx: Context) -> None:
    """Each size in turn through one compiled model: automatic dynamic shapes (a recompile with
    symbolic sizes at the second size) and `dynamic=True` (symbolic from the first call)."""
    cases = []
    for size in ctx.spec.sizes:
        kw = ctx.inputs(size, seed=1)
        ref = forward_outputs(ctx.model64, cast_inputs(kw, torch.float64))
        kw = cast_inputs(kw, ctx.dtype)
        cases.append((size, kw, forward_outputs(ctx.model, kw), ref))
    for mode, dynamic in (("dynamic-auto", None), ("dynamic-true", True)):
        for variant in ctx.variants:
            if not variant.startswith("polyduct-"):  # Inductor's compile time is spent once
                continue
            torch._dynamo.reset()
            fn = compile_variant(ctx.model, variant, dynamic)
            verdict, failed_at = Verdict(True), None
            for size, kw, eager, ref in cases:
                names = [f"size {size} output[{i}]" for i in range(len(eager))]
                run = functools.partial(forward_outputs, fn, kw)
                verdict, _ = _verdict(ctx, run, eager, ref, names)
                if not verdict.ok:
                    failed_at = size
                    break
            sizes = list(ctx.spec.sizes)
            ctx.record(variant, mode, **verdict.as_json(), sizes=sizes, failed_at=failed_at)


def check_export(ctx: Context) -> None:
    """`torch.export.export(model, (), kwargs)` compiled by `polyduct.compile`, called with the
    same keyword arguments."""
    import polyduct

    kw = ctx.inputs(ctx.spec.sizes[0])
    ref = forward_outputs(ctx.model64, cast_inputs(kw, torch.float64))
    kw = cast_inputs(kw, ctx.dtype)
    eager = forward_outputs(ctx.model, kw)
    names = [f"output[{i}]" for i in range(len(eager))]
    try:
        with torch.no_grad():
            exported = torch.export.export(ctx.model, (), kw)
    except Exception as exc:  # noqa: BLE001 - torch.export's own refusal, recorded as such
        for variant in ctx.variants:
            if variant.startswith("polyduct-"):
                ctx.record(variant, "export", ok=False, error=f"torch.export: {error_text(exc)}")
        return
    for variant in ctx.variants:
        if not variant.startswith("polyduct-"):
            continue

        def run(variant: str = variant) -> list[torch.Tensor]:
            fn = polyduct.compile(exported, {"kernels": variant.removeprefix("polyduct-")})
            return forward_outputs(fn, kw)

        verdict, seconds = _verdict(ctx, run, eager, ref, names)
        ctx.record(variant, "export", **verdict.as_json(), first_call_s=seconds)


def time_round_robin(ctx: Context, check: str, calls: dict[str, Callable[[], Any]]) -> None:
    """Median ms per call of each variant, every variant once per round (warm-up first), and the
    spread (max - min) / median of each one's samples."""
    peaks = {}
    for variant, call in calls.items():  # warm-up, and on CUDA each one's peak memory
        if ctx.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        call()
        sync(ctx.device)
        if ctx.device.startswith("cuda"):
            peaks[variant] = torch.cuda.max_memory_allocated()
    with torch.no_grad() if check == "time-forward" else torch.enable_grad():
        samples = interleaved_samples(calls, ctx.device, rounds=15, budget_s=3.0)
    for variant, s in samples.items():
        median = statistics.median(s)
        ctx.record(
            variant,
            check,
            median_ms=median * 1e3,
            spread=(max(s) - min(s)) / median,
            samples=len(s),
            peak_bytes=peaks.get(variant),
        )


def _call(fn: Any, kw: Inputs) -> Any:
    return fn(**kw)


def run_model(
    spec: ModelSpec, device: str, dtype: str, variants: list[str], phases: list[str], out: Path
) -> None:
    torch._dynamo.config.cache_size_limit = 64
    torch._dynamo.config.accumulated_cache_size_limit = 512
    ctx = Context(spec, device, DTYPES[dtype], variants, out)
    timing = "timing" in phases
    if "forward" in phases or timing:
        check_forward(ctx)
        if timing:
            kw = cast_inputs(ctx.inputs(spec.sizes[0]), ctx.dtype)
            fns: dict[str, Any] = {"eager": ctx.model, **ctx.forward_fns}
            calls: dict[str, Callable[[], Any]] = {
                v: functools.partial(_call, fn, kw) for v, fn in fns.items()
            }
            time_round_robin(ctx, "time-forward", calls)
    if "train" in phases:
        check_train(ctx, timing)
    if "dynamic" in phases:
        check_dynamic(ctx)
    if "export" in phases:
        check_export(ctx)
