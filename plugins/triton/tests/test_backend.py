"""Registration, options, cache and error reporting of the Triton backend."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from kernels import backend, buf, cuda_source, spec

from polyduct import plugins
from polyduct.cache import Cache, import_module_file
from polyduct.errors import InvalidOption, KernelCompileError
from polyduct.kernel import KernelSource, check_complete
from polyduct.ops import OP_NAMES
from polyduct_triton import TritonBackend, TritonOptions
from polyduct_triton.ops import TritonOps


def test_entry_point_registers_backend() -> None:
    registry = plugins.load().kernel_backends
    assert "triton" in registry.names()
    entry = registry.get("triton")
    assert entry.backend_cls is TritonBackend
    made = entry.factory({"interpret": True})
    assert isinstance(made, TritonBackend) and made.options.interpret


def test_every_op_has_an_implementation() -> None:
    check_complete(TritonBackend)
    assert TritonBackend.ops_cls is TritonOps
    assert set(OP_NAMES) - set(TritonBackend.caps.unsupported) <= set(dir(TritonOps))


def test_options_are_validated() -> None:
    with pytest.raises(InvalidOption):
        TritonOptions.from_mapping({"block": 3})
    with pytest.raises(InvalidOption):
        TritonOptions(interpret="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="autotune"):
        TritonOptions.from_mapping({"autotune": "no"})
    assert not TritonOptions.from_mapping({"autotune": False}).autotune


@pytest.mark.parametrize("autotune", [True, False])
def test_autotune_option_decides_whether_large_problems_benchmark(
    tmp_path: Path, autotune: bool
) -> None:
    """The CUDA launcher of a 2**22-element pointwise kernel benchmarks its candidates unless
    `autotune=False`, which takes the heuristic config and compiles nothing else."""
    module = _cuda_module(tmp_path, f"tune_{autotune}", autotune)
    tuned: list[Any] = []
    module._tune = lambda configs, *rest: tuned.append(configs) or configs[-1]
    cuda_tensor = SimpleNamespace(device=torch.device("cuda", 0))
    chosen = module._pick([cuda_tensor], (), 1 << 22, 0, False, None)
    candidates = module._configs(1 << 22, 0)
    assert len(candidates) > 1
    assert chosen == (candidates[-1] if autotune else candidates[0])
    assert tuned == ([candidates] if autotune else [])


@pytest.mark.parametrize(("dtype", "per_thread", "light"), [
    (torch.float64, 1, 1), (torch.float32, 2, 2), (torch.bfloat16, 4, 8), (torch.int8, 8, 8),
])
def test_pointwise_configs_follow_the_element_width(
    tmp_path: Path, dtype: torch.dtype, per_thread: int, light: int
) -> None:
    """On GPUs a pointwise thread holds 8 bytes of the kernel's widest type (elements per
    thread drive Triton's compile time, not the kernel's speed), 16 in a short (LIGHT) kernel of
    16-bit types; candidates: half the block, then half the elements per thread; small
    problems take a smaller block."""
    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.abs(ops.load("a", x[0])))

    a = torch.zeros(7, dtype=dtype)
    s = spec(f"w{per_thread}", [7], [], [("outer", body)], [buf("a", a, "in"), buf("o", a, "out")])
    source = cuda_source(tmp_path, s)
    module = import_module_file(_write(tmp_path, source), f"width_{per_thread}")
    assert module.LIGHT  # a one-line body
    for expect in (light, per_thread):
        configs = module._configs(1 << 26, 0)
        assert [xb // (32 * warps) for xb, _, warps in configs] == (
            [expect, expect] + ([expect // 2] if expect > 1 else []))
        assert module._configs(64, 0) == [(64, 1, 2)]
        module.LIGHT = False


def test_persistent_rows_hold_32_bytes_per_thread(tmp_path: Path) -> None:
    """A persistent 4096-element row runs at 16 warps in float32, 8 in bfloat16 (heuristic
    first). bfloat16 also tries 16 warps and two rows per program; float32 tries the row looped
    in halves, unless a reduction merges per block (welford), which then tunes nothing."""
    module = _cuda_module(tmp_path, "rows")
    module.KIND = "reduction"
    for itemsize, merges, configs in (
        (2, False, [(1, 4096, 8), (1, 4096, 16), (2, 4096, 16)]),
        (2, True, [(1, 4096, 8), (1, 4096, 16), (2, 4096, 16)]),
        (4, False, [(1, 4096, 16), (1, 2048, 16)]),
        (4, True, [(1, 4096, 16)]),
    ):
        module.ITEMSIZE, module.BLOCK_MERGES = itemsize, merges
        assert module._configs(16384, 4096) == configs, (itemsize, merges)


@pytest.mark.parametrize(("reduction", "merges"), [("sum", False), ("max", False),
                                                   ("welford_reduce", True), ("argmax", True)])
def test_block_merges_names_reductions_that_merge_per_block(
    tmp_path: Path, reduction: str, merges: bool
) -> None:
    def body(ops: Any, x: Any, r: Any) -> None:
        v = ops.reduction(torch.float32, torch.float32, reduction, ops.load("a", x[0] * 64 + r[0]))
        ops.store_reduction("o", x[0], v[0] if isinstance(v, tuple) else v)

    dtype = torch.int64 if reduction == "argmax" else torch.float32
    s = spec(f"merges_{reduction}", [8], [64], [("reduction", body)],
             [buf("a", torch.float32, "in", 512), buf("o", dtype, "out", 8)])
    source = cuda_source(tmp_path, s)
    assert f"BLOCK_MERGES = {merges}" in source


def test_kernel_is_keyed_by_its_module_digest(tmp_path: Path) -> None:
    """A CUDA module's kernel carries the digest of the source above its launcher as Triton's
    cache key (no AST walk at the first launch); another kernel body gets another key."""
    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.neg(ops.load("a", x[0])))

    t = torch.randn(7)
    be = TritonBackend(TritonOptions(cache=Cache(tmp_path)))
    paths = []
    for s in (_copy_spec("digest_a"),
              spec("digest_b", [7], [], [("outer", body)], [buf("a", t, "in"), buf("o", t, "out")])):
        text = be.codegen(dataclasses.replace(s, device="cuda")).source
        above = text[:text.index("KIND = ")]
        assert f'KERNEL_DIGEST = "{hashlib.sha256(above.encode()).hexdigest()}"' in text
        paths.append(tmp_path / f"{s.name}.py")
        paths[-1].write_text(text)
    out = _imported_under_real_jit(paths, "print(m._kernel.hash == m.KERNEL_DIGEST, m._kernel.hash)")
    assert out[0] == out[2] == "True" and out[1] != out[3]


def test_jit_finds_each_functions_source_lines_as_inspect_does(tmp_path: Path) -> None:
    """`launcher.jit` gives Triton a generated function's source lines without the tokenizer:
    for kernels and their prelude helpers (exp, the NaN-propagating max combine), under Triton's
    real JIT, the lines and first line number are inspect's."""
    def exp_body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.exp(ops.load("a", x[0])))

    def max_body(ops: Any, x: Any, r: Any) -> None:
        ops.store_reduction("o", x[0], ops.reduction(
            torch.float32, torch.float32, "max", ops.load("a", x[0] * 64 + r[0])))

    paths = []
    for s in (spec("lines_exp", [7], [], [("outer", exp_body)],
                   [buf("a", torch.float32, "in", 7), buf("o", torch.float32, "out", 7)]),
              spec("lines_max", [8], [64], [("reduction", max_body)],
                   [buf("a", torch.float32, "in", 512), buf("o", torch.float32, "out", 8)])):
        paths.append(tmp_path / f"{s.name}.py")
        paths[-1].write_text(cuda_source(tmp_path, s))
    out = _imported_under_real_jit(paths, (
        "fns = [f for f in vars(m).values() if isinstance(f, triton.JITFunction)]; "
        "print(len(fns), all((f.raw_src, f.starting_line_number) == "
        "inspect.getsourcelines(f.fn) for f in fns))"))
    assert out[1] == out[3] == "True" and int(out[0]) >= 2 and int(out[2]) >= 2, out


def test_tuned_configs_outlive_the_process(tmp_path: Path) -> None:
    """A shape class tuned once is read from the tuning cache by a fresh copy of the module (a
    new process), which benchmarks nothing; another shape class or device is tuned anew."""
    be = TritonBackend(TritonOptions(cache=Cache(tmp_path / "cache")))
    source = be.codegen(dataclasses.replace(_copy_spec("tuned"), device="cuda")).source
    path = _write(tmp_path, source)
    tuned: list[Any] = []

    def fresh_module(name: str, device: str = "NVIDIA H200") -> Any:
        module = import_module_file(path, name)
        module.TUNING_CACHE = Cache(tmp_path / "cache")
        module._tune = lambda configs, *rest: tuned.append(configs) or configs[-1]
        module._device_name = lambda index: device
        return module

    cuda_tensor = SimpleNamespace(device=torch.device("cuda", 0))
    first = fresh_module("tuned_a")._pick([cuda_tensor], (), 1 << 22, 0, False, None)
    again = fresh_module("tuned_b")._pick([cuda_tensor], (), (1 << 22) - 5, 0, False, None)
    assert first == again and len(tuned) == 1
    fresh_module("tuned_c")._pick([cuda_tensor], (), 1 << 23, 0, False, None)
    fresh_module("tuned_d", "another GPU")._pick([cuda_tensor], (), 1 << 22, 0, False, None)
    assert len(tuned) == 3


@pytest.mark.parametrize(("times", "best", "benchmarked"), [
    ((0.01, 0.001, 0.001), 0, 1),  # the heuristic config is short: nothing else is compiled
    ((0.2, 0.1, 0.3), 1, 3),
])
def test_tuning_benchmarks_others_only_for_long_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: tuple[float, ...], best: int,
    benchmarked: int,
) -> None:
    module = _cuda_module(tmp_path, f"long_{best}")
    calls: list[Any] = []

    def bench(fn: Any) -> float:
        calls.append(fn)
        return times[len(calls) - 1]

    monkeypatch.setattr(module, "_time_ms", bench)
    configs = module._configs(1 << 22, 0)
    assert len(configs) == 3 and (times[0] < module.TUNE_MIN_MS) == (benchmarked == 1)
    a = torch.randn(7)
    chosen = module._tune(configs, (a, torch.empty(7)), (), 1 << 22, 0, False, None)
    assert chosen == configs[best]
    assert len(calls) == benchmarked


def test_short_kernels_cancel_their_candidates_compile_jobs(tmp_path: Path) -> None:
    """A kernel that keeps its heuristic config (under TUNE_MIN_MS) cancels the compile
    workers' queued jobs for its other candidates, so that workers take other kernels' jobs;
    the tuning cache's winner cancels the jobs of the configs it beat."""
    from concurrent.futures import Future

    module = _cuda_module(tmp_path, "drop_jobs")
    module._time_ms = lambda fn: 0.001
    module._launch = lambda *args: None
    a, o = torch.randn(7), torch.empty(7)
    configs = module._configs(1 << 22, 0)
    args = (a, o, 1 << 22, 0)
    futures = {}
    for cfg in configs:
        key = module._job(cfg, args, 1 << 22, 0, False)[0]
        futures[cfg] = module.PRECOMPILED[key] = Future()
    assert module._tune(configs, (a, o), (), 1 << 22, 0, False, None) == configs[0]
    assert [futures[c].cancelled() for c in configs] == [False] + [True] * (len(configs) - 1)
    assert len(module.PRECOMPILED) == 1  # the heuristic's job: its launch takes it

    module.PRECOMPILED.clear()
    for cfg in configs:
        key = module._job(cfg, args, 1 << 22, 0, False)[0]
        futures[cfg] = module.PRECOMPILED[key] = Future()
    module.TUNING_CACHE = Cache(tmp_path / "tuning")
    module._device_name = lambda device: "NVIDIA H200"
    module._tune = lambda configs, *rest: configs[-1]  # the winner the cache keeps
    assert module._tuned((1 << 22, 1, False), configs, (a, o), (), 1 << 22, 0, False,
                         None) == configs[-1]
    assert [futures[c].cancelled() for c in configs] == [True] * (len(configs) - 1) + [False]


def test_candidates_compiling_in_workers_are_tuned_once_all_have_compiled(tmp_path: Path) -> None:
    """While compile workers build the other candidates, launches take the heuristic config and
    benchmark nothing; the first launch after every candidate's compile has ended tunes, once,
    and the tuning cache gives a later process the winner at its first launch."""
    from concurrent.futures import Future

    path = _cuda_module(tmp_path, "background").__file__

    def fresh_module(name: str) -> Any:  # the same kernel, as a new process imports it
        module = import_module_file(Path(path), name)
        module.TUNING_CACHE = Cache(tmp_path / "tuning")
        module._device_name = lambda device: "NVIDIA H200"
        module._specialisation = lambda args: (True,)  # no tensor on a GPU to inspect
        module._tune = lambda configs, *rest: tuned.append(configs) or configs[-1]
        return module

    tuned: list[Any] = []
    module = fresh_module("first")
    t, n = SimpleNamespace(device=torch.device("cuda", 0)), 1 << 22
    configs = module._configs(n, 0)
    futures: list[Future[str | None]] = [Future() for _ in configs]
    for cfg, future in zip(configs, futures, strict=True):
        module.PRECOMPILED[module._job(cfg, module._args([t], (), n, 0, None), n, 0, False)[0]] = future

    def pick(m: Any = module) -> Any:
        return m._pick([t], (), n, 0, False, None)

    assert len(configs) == 3 and pick() == configs[0]
    futures[1].set_running_or_notify_cancel()
    futures[1].set_result(None)
    assert pick() == configs[0] and tuned == []  # one candidate still compiling
    futures[2].cancel()  # a job taken over by a launch ends too
    assert pick() == configs[-1] and pick() == configs[-1] and tuned == [configs]

    later = fresh_module("later")
    pending: Future[str | None] = Future()
    later.PRECOMPILED[later._job(configs[1], later._args([t], (), n, 0, None), n, 0, False)[0]] = pending
    assert pick(later) == configs[-1] and len(tuned) == 1 and pending.cancelled()


@pytest.mark.parametrize(("once", "count"), [(0.1, 20), (0.001, 50), (5.0, 1)])
def test_tuning_times_back_to_back_launches_filling_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, once: float, count: int
) -> None:
    """A candidate is timed over as many launches as fill TUNE_BUDGET_MS (2 ms), at most 50,
    after a warm launch and a single timed one; the result is the mean of the batch."""
    module = _cuda_module(tmp_path, f"budget_{count}")
    log: list[str] = []

    class Event:  # CUDA events as the timeline of `log`: a launch takes `once` ms
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            self.at = 0

        def record(self) -> None:
            self.at = len(log)

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Any) -> float:
            return log[self.at:end.at].count("run") * once

    monkeypatch.setattr(torch.cuda, "Event", Event)
    assert module._time_ms(lambda: log.append("run")) == pytest.approx(once)
    assert len(log) == 2 + count


def test_static_launch_takes_runtime_arguments_and_reports_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch through torch's static launcher passes only the kernel's runtime arguments
    (constexprs, and integers Triton made constexpr, dropped); a refusal names its reason."""
    module = _cuda_module(tmp_path, "static_launch")
    launched: list[tuple[Any, ...]] = []

    class Launcher:
        def __init__(self, compiled: Any) -> None:
            self.compiled = compiled

        def load_kernel(self, device: int) -> None:
            self.device = device

        def run(self, *args: Any) -> None:
            launched.append(args)

    class Refuses(Launcher):
        def __init__(self, compiled: Any) -> None:
            raise NotImplementedError("scratch memory")

    names = list(module._kernel.arg_names)
    assert names[:4] == ["in_ptr0", "out_ptr0", "xnumel", "rnumel"]
    constexpr = {"rnumel", "XBLOCK", "RBLOCK", "IDX64", "PERSISTENT"}  # rnumel == 1 here
    signature = {n: "constexpr" if n in constexpr else "i32" for n in names}
    compiled = SimpleNamespace(metadata_group={"k.json": "/c/k.json", "k.cubin": "/c/k.cubin"},
                               src=SimpleNamespace(fn=module._kernel, signature=signature))
    module._torch_launcher_class = lambda: Launcher
    launch, why = module._static(compiled, 0)
    assert why is None and launch.via == "torch" and compiled._cubin_path == "/c/k.cubin"
    launch(5, 77, ("a", "o", 7, 1, 1024, 1, False, True))
    assert launched == [(5, 1, 1, 77, "a", "o", 7)]
    module._torch_launcher_class = lambda: Refuses
    assert module._static(compiled, 0) == (None, "NotImplementedError: scratch memory")
    monkeypatch.setenv("POLYDUCT_TRITON_LAUNCHER", "triton")
    assert module._static(compiled, 0) == (None, "POLYDUCT_TRITON_LAUNCHER=triton")
    assert module._triton_launch(compiled, "scratch memory").via == "triton (scratch memory)"


def _imported_under_real_jit(paths: list[Path], statement: str) -> list[str]:
    """The words `statement` prints for each module of `paths` (bound to `m`), imported in a
    process under Triton's real JIT (without the interpreter)."""
    script = ("import inspect, sys, triton; from pathlib import Path\n"
              "from polyduct.cache import import_module_file\n"
              "for i, p in enumerate(sys.argv[1:]):\n"
              "    m = import_module_file(Path(p), f'm{i}')\n"
              f"    {statement}\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", script, *map(str, paths)], env=env,
                          capture_output=True, text=True, timeout=300, check=True).stdout.split()


def _cuda_module(tmp_path: Path, name: str, autotune: bool = True) -> Any:
    """The generated module of a copy kernel for CUDA tensors, imported (nothing compiles)."""
    be = TritonBackend(TritonOptions(autotune=autotune, cache=Cache(tmp_path)))
    source = be.codegen(dataclasses.replace(_copy_spec(name), device="cuda")).source
    return import_module_file(_write(tmp_path, source), name)


def _write(directory: Path, text: str) -> Path:
    path = directory / "kernel_under_test.py"
    path.write_text(text)
    return path


def _copy_spec(name: str) -> Any:
    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.abs(ops.load("a", x[0])))

    a = torch.randn(7)
    return spec(name, [7], [], [("outer", body)], [buf("a", a, "in"), buf("o", a, "out")])


def test_deterministic_source_and_warm_cache(tmp_path: Path) -> None:
    be = backend(tmp_path)
    s = _copy_spec("copy")
    src = be.codegen(s)
    assert src.source == backend(tmp_path).codegen(_copy_spec("copy")).source
    fn = be.load([src])["copy"]
    a, o = torch.tensor([-1.0, 2.0, -0.0, 3.0, -4.0, 5.0, -6.0]), torch.empty(7)
    fn(a, o)
    assert torch.equal(o, a.abs())
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    be.load([src])  # warm hit: nothing new is written
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == files


def test_compile_error_names_kernel_and_source(tmp_path: Path) -> None:
    be = backend(tmp_path)
    good = be.codegen(_copy_spec("broken"))
    bad = KernelSource("broken", "triton", good.source.replace("tl.abs(", "tl.no_such_fn("))
    fn = be.load([bad])["broken"]
    with pytest.raises(KernelCompileError) as info:
        fn(torch.randn(7), torch.empty(7))
    assert "broken" in str(info.value) and "kernel.py" in str(info.value)


def _unary_spec(name: str, op: str) -> Any:
    def body(ops: Any, x: Any, r: Any) -> None:
        a = ops.load("a", x[0])
        ops.store("o", x[0], ops.add(ops.mul(getattr(ops, op)(a, a), a), a))

    a = torch.randn(5)
    return spec(name, [5], [], [("outer", body)], [buf("a", a, "in"), buf("o", a, "out")])


@pytest.mark.parametrize(("op", "fused"), [("maximum", True), ("mul", True), ("pow", False),
                                           ("fmod", False), ("mul_rn", False)])
def test_fp_fusion_only_for_contraction_safe_ops(tmp_path: Path, op: str, fused: bool) -> None:
    """a*b+c may become one fma unless some op of the kernel needs its products rounded alone."""
    source = backend(tmp_path).codegen(
        dataclasses.replace(_unary_spec(f"k_{op}", op), device="cuda")).source
    assert f"FP_FUSION = {fused}" in source
    module = import_module_file(_write(tmp_path, source), f"k_{op}")
    compiled: list[dict[str, Any]] = []
    module._kernel.warmup = lambda *args, **options: compiled.append(options)
    module.warmup((64, 1, 2), (torch.float32, torch.float32, 5, 1), 1, False, True)
    assert compiled[0]["enable_fp_fusion"] is fused  # what Triton compiles the kernel with


def test_modules_carry_only_the_prelude_helpers_their_kernel_calls(tmp_path: Path) -> None:
    from polyduct_triton.prelude import prelude_for

    # callees of callees come along, a combine function passed by name counts, prelude order
    text = prelude_for("y = _fpow(a, b)\nz = tl.reduce(x, 1, _prod_combine)")
    assert re.findall(r"def (\w+)\(", text) == [
        "_prod_combine", "_ipow", "_two_prod", "_log_dd", "_pow_dd", "_fpow"]
    assert prelude_for("y = a + b") == ""
    source = backend(tmp_path).codegen(_copy_spec("copy")).source
    assert re.findall(r"def (_\w+)\(", source)[0] == "_kernel"  # abs needs no helper


def test_indirect_masks_come_in_name_order() -> None:
    """An index on two indirect values masks with both checks in name order: sympy's set of
    free symbols iterates in hash order, which changes from one process to the next."""
    import sympy

    from polyduct_triton.context import Check, KernelContext
    from polyduct_triton.ops import TritonOps

    ctx = KernelContext(_copy_spec("masks"), interpret=True)
    ctx.indirect = {"tmp7": Check(0, "7"), "tmp3": Check(1, "7")}
    tmp3, tmp7, x0 = sympy.symbols("tmp3 tmp7 x0")
    assert TritonOps(ctx)._mask_for(7 * tmp7 + tmp3 + x0, "a") == "xmask & tmp3_ok & tmp7_ok"
    assert ctx.indirect["tmp3"].buffer == ctx.indirect["tmp7"].buffer == "a"
