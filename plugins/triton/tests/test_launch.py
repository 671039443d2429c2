"""Config choice, tuning and launches of generated modules for CUDA tensors, with the GPU
simulated (nothing compiles; the compiled kernels and launchers are stand-ins)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sympy
import torch
from kernels import buf, cuda_module, run, spec

from polyduct.cache import Cache, import_module_file
from polyduct_triton.kernel_runtime import KernelRuntime


def test_tuned_configs_outlive_the_process(tmp_path: Path) -> None:
    """A shape class tuned once is read from the tuning cache by a fresh copy of the module (a
    new process), which benchmarks nothing; another shape class or device is tuned anew."""
    path = Path(cuda_module(tmp_path, "tuned").__file__)
    tuned: list[Any] = []

    def fresh_module(name: str, device: str = "NVIDIA H200") -> Any:
        module = import_module_file(path, name)
        module.RUNTIME.tuning_cache = Cache(tmp_path / "cache")
        module.RUNTIME._tune = lambda configs, *rest: tuned.append(configs) or configs[-1]
        module.RUNTIME._device_name = lambda index: device
        return module

    cuda_tensor = SimpleNamespace(device=torch.device("cuda", 0))
    first = fresh_module("tuned_a").RUNTIME._pick([cuda_tensor], (), 1 << 22, 0, False, None)
    again = fresh_module("tuned_b").RUNTIME._pick([cuda_tensor], (), (1 << 22) - 5, 0, False, None)
    assert first == again and len(tuned) == 1
    fresh_module("tuned_c").RUNTIME._pick([cuda_tensor], (), 1 << 23, 0, False, None)
    fresh_module("tuned_d", "another GPU").RUNTIME._pick([cuda_tensor], (), 1 << 22, 0, False, None)
    assert len(tuned) == 3


@pytest.mark.parametrize(("times", "best", "benchmarked"), [
    ((0.01, 0.001, 0.001), 0, 1),  # the heuristic config is short: nothing else is compiled
    ((0.2, 0.1, 0.3), 1, 3),
])
def test_tuning_benchmarks_others_only_for_long_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: tuple[float, ...], best: int,
    benchmarked: int,
) -> None:
    module = cuda_module(tmp_path, f"long_{best}")
    calls: list[Any] = []

    def bench(fn: Any) -> float:
        calls.append(fn)
        return times[len(calls) - 1]

    monkeypatch.setattr(module.RUNTIME, "_time_ms", bench)
    configs = module.RUNTIME.configs(1 << 22, 0)
    assert len(configs) == 3 and (times[0] < module.RUNTIME.TUNE_MIN_MS) == (benchmarked == 1)
    a = torch.randn(7)
    chosen = module.RUNTIME._tune(configs, (a, torch.empty(7)), (), 1 << 22, 0, False, None)
    assert chosen == configs[best]
    assert len(calls) == benchmarked


def test_short_kernels_cancel_their_candidates_compile_jobs(tmp_path: Path) -> None:
    """A kernel that keeps its heuristic config (under TUNE_MIN_MS) cancels the compile
    workers' queued jobs for its other candidates, so that workers take other kernels' jobs;
    the tuning cache's winner cancels the jobs of the configs it beat."""
    from concurrent.futures import Future

    module = cuda_module(tmp_path, "drop_jobs")
    module.RUNTIME._time_ms = lambda fn: 0.001
    module.RUNTIME._launch = lambda *args: None
    a, o = torch.randn(7), torch.empty(7)
    configs = module.RUNTIME.configs(1 << 22, 0)
    args = (a, o, 1 << 22, 0)
    futures = {}
    for cfg in configs:
        key = module.RUNTIME._job(cfg, args, 1 << 22, 0, False)[0]
        futures[cfg] = module.RUNTIME.precompiled[key] = Future()
    assert module.RUNTIME._tune(configs, (a, o), (), 1 << 22, 0, False, None) == configs[0]
    assert [futures[c].cancelled() for c in configs] == [False] + [True] * (len(configs) - 1)
    assert len(module.RUNTIME.precompiled) == 1  # the heuristic's job: its launch takes it

    module.RUNTIME.precompiled.clear()
    for cfg in configs:
        key = module.RUNTIME._job(cfg, args, 1 << 22, 0, False)[0]
        futures[cfg] = module.RUNTIME.precompiled[key] = Future()
    module.RUNTIME.tuning_cache = Cache(tmp_path / "tuning")
    module.RUNTIME._device_name = lambda device: "NVIDIA H200"
    module.RUNTIME._tune = lambda configs, *rest: configs[-1]  # the winner the cache keeps
    assert module.RUNTIME._tuned((1 << 22, 1, False), configs, (a, o), (), 1 << 22, 0, False,
                         None) == configs[-1]
    assert [futures[c].cancelled() for c in configs] == [True] * (len(configs) - 1) + [False]


def test_candidates_compiling_in_workers_are_tuned_once_all_have_compiled(tmp_path: Path) -> None:
    """While compile workers build the other candidates, launches take the heuristic config and
    benchmark nothing; the first launch after every candidate's compile has ended tunes, once,
    and the tuning cache gives a later process the winner at its first launch."""
    from concurrent.futures import Future

    path = cuda_module(tmp_path, "background").__file__

    def fresh_module(name: str) -> Any:  # the same kernel, as a new process imports it
        module = import_module_file(Path(path), name)
        module.RUNTIME.tuning_cache = Cache(tmp_path / "tuning")
        module.RUNTIME._device_name = lambda device: "NVIDIA H200"
        module.RUNTIME._specialisation = lambda args: (True,)  # no tensor on a GPU to inspect
        module.RUNTIME._tune = lambda configs, *rest: tuned.append(configs) or configs[-1]
        return module

    tuned: list[Any] = []
    module = fresh_module("first")
    t, n = SimpleNamespace(device=torch.device("cuda", 0)), 1 << 22
    configs = module.RUNTIME.configs(n, 0)
    futures: list[Future[str | None]] = [Future() for _ in configs]
    for cfg, future in zip(configs, futures, strict=True):
        module.RUNTIME.precompiled[module.RUNTIME._job(cfg, module.RUNTIME._args([t], (), n, 0, None), n, 0, False)[0]] = future

    def pick(m: Any = module) -> Any:
        return m.RUNTIME._pick([t], (), n, 0, False, None)

    assert len(configs) == 3 and pick() == configs[0]
    futures[1].set_running_or_notify_cancel()
    futures[1].set_result(None)
    assert pick() == configs[0] and tuned == []  # one candidate still compiling
    futures[2].cancel()  # a job taken over by a launch ends too
    assert pick() == configs[-1] and pick() == configs[-1] and tuned == [configs]

    later = fresh_module("later")
    pending: Future[str | None] = Future()
    later.RUNTIME.precompiled[later.RUNTIME._job(configs[1], later.RUNTIME._args([t], (), n, 0, None), n, 0, False)[0]] = pending
    assert pick(later) == configs[-1] and len(tuned) == 1 and pending.cancelled()


@pytest.mark.parametrize(("once", "count"), [(0.1, 20), (0.001, 50), (5.0, 1)])
def test_tuning_times_back_to_back_launches_filling_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, once: float, count: int
) -> None:
    """A candidate is timed over as many launches as fill TUNE_BUDGET_MS (2 ms), at most 50,
    after a warm launch and a single timed one; the result is the mean of the batch."""
    module = cuda_module(tmp_path, f"budget_{count}")
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
    assert module.RUNTIME._time_ms(lambda: log.append("run")) == pytest.approx(once)
    assert len(log) == 2 + count


def test_static_launch_takes_runtime_arguments_and_reports_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch through torch's static launcher passes only the kernel's runtime arguments
    (constexprs, and integers Triton made constexpr, dropped); a refusal names its reason."""
    module = cuda_module(tmp_path, "static_launch")
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
    module.RUNTIME._torch_launcher_class = lambda: Launcher
    launch, why = module.RUNTIME._static(compiled, 0)
    assert why is None and launch.via == "torch" and compiled._cubin_path == "/c/k.cubin"
    launch(5, 77, ("a", "o", 7, 1, 1024, 1, False, True))
    assert launched == [(5, 1, 1, 77, "a", "o", 7)]
    module.RUNTIME._torch_launcher_class = lambda: Refuses
    assert module.RUNTIME._static(compiled, 0) == (None, "NotImplementedError: scratch memory")
    monkeypatch.setattr(module.RUNTIME, "launcher", "triton")
    assert module.RUNTIME._static(compiled, 0) == (None, "launcher='triton'")
    assert module.RUNTIME._triton_launch(compiled, "scratch memory").via == "triton (scratch memory)"


def test_launches_of_known_sizes_go_straight_to_their_compiled_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a launch's config is final, later launches of the same sizes whose tensors are all
    16-byte aligned skip config choice and Triton's specialisation; a misaligned tensor takes
    the full path (and its own compiled kernel), as does every launch while tuning is pending."""
    module = cuda_module(tmp_path, "ready")
    if not module.RUNTIME.direct:
        pytest.skip("direct launches need triton >= 3.4")
    monkeypatch.setattr(module.RUNTIME, "_device", lambda: 0)  # no GPU here
    monkeypatch.setattr(module.RUNTIME, "_stream", lambda device: 7)
    compiled: list[tuple[bool, ...]] = []
    launched: list[tuple[Any, ...]] = []
    picked: list[int] = []

    def compile_(key: Any, job: Any, device: int) -> Any:
        compiled.append(key[3][:2])  # the tensors' part of the specialisation
        return lambda grid0, stream, args: launched.append((key[3][0], grid0, stream, args))

    pick = module.RUNTIME._pick
    monkeypatch.setattr(module.RUNTIME, "_compile", compile_)
    monkeypatch.setattr(module.RUNTIME, "_pick", lambda *a: picked.append(1) or pick(*a))
    a, o = torch.randn(8), torch.empty(7)
    for x in (a[:7], a[:7], a[1:], a[1:], a[:7]):
        module.launch(x, o)
    assert compiled == [(True, True), (False, True)]
    assert len(picked) == 3  # the first launch, and both misaligned ones
    assert [aligned for aligned, *_ in launched] == [True, True, False, False, True]
    for (_, grid0, stream, args), x in zip(launched, (a[:7], a[:7], a[1:], a[1:], a[:7]),
                                           strict=True):
        assert [t.data_ptr() for t in args[:2]] == [x.data_ptr(), o.data_ptr()]
        assert (grid0, stream, args[2:]) == (1, 7, (7, 1, 8, 1, False, True))

    module.RUNTIME.ready.clear()
    module.RUNTIME.pending["another shape class"] = ([], [])  # tuning still to run: no shortcut yet
    module.launch(a[:7], o)
    module.launch(a[:7], o)
    assert len(picked) == 5 and not module.RUNTIME.ready

    module.RUNTIME.pending.clear()
    module.RUNTIME.ready_max, module.RUNTIME.ready[0, (5,)] = 1, None  # full (many dynamic sizes): start again
    module.launch(a[:7], o)
    assert list(module.RUNTIME.ready) == [(0, ())] and len(picked) == 6


def test_a_launch_torch_refuses_runs_on_tritons_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's static launcher is stricter than Triton's: when it raises at a launch, the kernel
    runs through Triton's own launcher, for this launch and every later one."""
    module = cuda_module(tmp_path, "refused")
    if not module.RUNTIME.direct:
        pytest.skip("direct launches need triton >= 3.4")
    monkeypatch.setattr(module.RUNTIME, "_device", lambda: 0)  # no GPU here
    monkeypatch.setattr(module.RUNTIME, "_stream", lambda device: 7)
    ran: list[str] = []

    def static(grid0: int, stream: int, args: Any) -> None:
        ran.append("torch")
        raise RuntimeError("CUDA driver error: invalid argument")

    def compile_(key: Any, job: Any, device: int) -> Any:
        static.via = "torch"  # type: ignore[attr-defined]
        static.compiled = "compiled kernel"  # type: ignore[attr-defined]
        return static

    def triton_launch(compiled: Any, why: str) -> Any:
        assert compiled == "compiled kernel" and "invalid argument" in why

        def launch(grid0: int, stream: int, args: Any) -> None:
            ran.append("triton")

        launch.via = f"triton ({why})"  # type: ignore[attr-defined]
        return launch

    monkeypatch.setattr(module.RUNTIME, "_compile", compile_)
    monkeypatch.setattr(module.RUNTIME, "_triton_launch", triton_launch)
    a, o = torch.randn(8), torch.empty(8)
    module.launch(a, o)
    module.launch(a, o)
    module.RUNTIME.ready.clear()
    module.launch(a, o)
    assert ran == ["torch", "triton", "triton", "triton"]


@pytest.mark.parametrize(("option", "default", "chosen", "env"), [
    ("launcher", "auto", "triton", "POLYDUCT_TRITON_LAUNCHER"),
    ("index_errors", "assert", "raise", "POLYDUCT_TRITON_INDEX_ERRORS"),
])
def test_runtime_options_reach_every_loaded_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, default: str, chosen: str,
    env: str,
) -> None:
    """`launcher` and `index_errors` are options (env variables read at an entry: here a
    standalone wrapper's kernel loader), set on each module's runtime at load, never read by
    the generated module itself; other values are refused."""
    from test_precompile import specs

    from polyduct.errors import InvalidOption
    from polyduct.plugins import default_kernel_loader
    from polyduct.wrapper.ir import KernelDefinition
    from polyduct_triton import TritonBackend, TritonOptions

    backend = TritonBackend(TritonOptions(cache=Cache(tmp_path)))
    src = backend.codegen(specs()[0])
    assert getattr(backend.load([src])[src.name].__globals__["RUNTIME"], option) == default
    picked = TritonBackend(TritonOptions(cache=Cache(tmp_path), **{option: chosen}))
    assert getattr(picked.load([src])[src.name].__globals__["RUNTIME"], option) == chosen
    with pytest.raises(InvalidOption, match=option):
        TritonOptions(**{option: "other"})
    monkeypatch.setenv("POLYDUCT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(env, chosen)
    backend.load([src])
    loaded = default_kernel_loader()([KernelDefinition(src.name, "triton", src.source)])
    assert getattr(loaded[src.name].__globals__["RUNTIME"], option) == chosen


def test_asserting_launches_keep_one_flag_buffer_per_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GPU launch that asserts reuses one buffer of ones (a failure ends the context, so its
    word 0 is never cleared); one that raises, and any CPU launch, takes fresh zeroed flags."""
    runtime = cuda_module(tmp_path, "flags").RUNTIME
    made: list[Any] = []
    cuda_tensor = SimpleNamespace(device=torch.device("cuda", 0))

    def filled(value: int) -> Any:
        def make(size: int, dtype: Any, device: Any) -> Any:
            made.append((value, device))
            return SimpleNamespace(size=size, device=device)
        return make

    monkeypatch.setattr(torch, "zeros", filled(0))
    monkeypatch.setattr(torch, "ones", filled(1))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert runtime.flags(cuda_tensor, 4) is runtime.flags(cuda_tensor, 4)
    assert made == [(1, torch.device("cuda", 0))]
    runtime.index_errors = "raise"
    assert runtime.flags(cuda_tensor, 4) is not runtime.flags(cuda_tensor, 4)
    assert [v for v, _ in made] == [1, 0, 0]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    # recording a CUDA graph: it asserts, on the kept buffer (which outlives the graph) ...
    assert runtime.flags(cuda_tensor, 4) is runtime._flags[cuda_tensor.device]
    assert len(made) == 3
    # ... or, where none is kept yet, on ones of the graph's own memory, not kept
    fresh = cuda_module(tmp_path, "flags2").RUNTIME
    assert fresh.flags(cuda_tensor, 4) is not fresh.flags(cuda_tensor, 4) and len(made) == 5
    assert [v for v, _ in made[3:]] == [1, 1] and not fresh._flags
    runtime.index_errors = "assert"
    runtime.flags(SimpleNamespace(device=torch.device("cpu")), 4)
    assert made[-1] == (0, torch.device("cpu"))


@pytest.mark.parametrize("index", [3, 10])
def test_an_asserting_launch_asserts_on_the_one_word_a_failed_check_clears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: int
) -> None:
    """Where a failed check is a device-side assert, the launch adds one assert on word 0 of
    its flags: 1 when every check held, 0 when one failed."""
    asserted: list[torch.Tensor] = []
    monkeypatch.setattr(KernelRuntime, "_asserts", lambda self, device: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch, "_assert_async", lambda t, msg: asserted.append(t.clone()))
    table, idx, out = torch.randn(10), torch.tensor([0, index, 2]), torch.empty(3)

    def body(ops: Any, x: Any, r: Any) -> None:
        i = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(10))
        ops.store("out", x[0], ops.load("table", i))

    bufs = [buf("table", table, "in"), buf("idx", idx, "in"), buf("out", out, "out")]
    run(tmp_path, spec("gather", [3], [], [("outer", body)], bufs), table, idx, out)
    assert [t.tolist() for t in asserted] == [[1 if index < 10 else 0]]
