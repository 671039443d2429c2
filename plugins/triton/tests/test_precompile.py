"""Compile workers: what they build is what first launches load; the pool never delays a launch."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import sympy
import torch
from kernels import buf, spec

from polyduct import state
from polyduct.cache import Cache, import_module_file
from polyduct.errors import InvalidOption
from polyduct_triton import TritonBackend, TritonOptions, precompile

# Run without the interpreter (Triton reads TRITON_INTERPRET at import): the backend loads CUDA
# kernels of three shapes, compiles them for sm_90 in two workers (no GPU is needed to compile),
# then this process compiles each job's (config, specialisation) again with real tensors, which
# must find every one in Triton's cache: no new cache entry.
_SCRIPT = r"""
import dataclasses, json, sys
from pathlib import Path
import torch, triton
from triton.backends.compiler import GPUTarget
from polyduct.cache import Cache
from polyduct_triton import TritonBackend, TritonOptions
from polyduct_triton.precompile import _TargetDriver, _warm_compiler
from test_precompile import specs

driver = _TargetDriver()
triton.runtime.driver.set_active(driver)
cache = Path(sys.argv[1])
warmed = _warm_compiler(driver, ("cuda", 90, 32))  # what each worker does before its jobs
left = len(list((cache / "triton").glob("*")))  # in Triton's cache: nothing
be = TritonBackend(TritonOptions(cache=Cache(cache / "polyduct"), compile_workers=2))
sources = [be.codegen(dataclasses.replace(s, device="cuda")) for s in specs()]
launches = be.load(sources)
report = {"jobs": {}, "new_entries": None, "warmed": warmed, "left": left}
modules = [fn.__globals__ for fn in launches.values()]
for m in modules:
    report["jobs"][m["NAME"]] = [[list(k[0]), f.result(timeout=300)] for k, f in m["RUNTIME"].precompiled.items()]
before = set((cache / "triton").iterdir())
report["kept"] = sorted({f.suffix for f in (cache / "triton").glob("*/*")})
for m in modules:
    for key, (cfg, args, grid0, idx64, persistent) in m["jobs"]():
        real = tuple(torch.empty(4, dtype=a) if isinstance(a, torch.dtype) else a for a in args)
        assert m["RUNTIME"]._specialisation(real) == key[3]
        m["RUNTIME"].warmup(cfg, real, grid0, idx64, persistent)
report["new_entries"] = len(set((cache / "triton").iterdir()) - before)
print(json.dumps(report))
"""


def specs() -> list[Any]:
    """A 7-element copy (one config), a 4M-element copy (three tuning candidates) and a 4096 x
    4096 float32 row sum (two)."""

    def copy(name: str, n: int) -> Any:
        def body(ops: Any, x: Any, r: Any) -> None:
            ops.store("o", x[0], ops.abs(ops.load("a", x[0])))

        bufs = [buf("a", torch.float32, "in", n), buf("o", torch.float32, "out", n)]
        return spec(name, [n], [], [("outer", body)], bufs)

    def row_sum(body_name: str, rows: int, cols: int) -> Any:
        def body(ops: Any, x: Any, r: Any) -> None:
            v = ops.reduction(torch.float32, torch.float32, "sum", ops.load("a", x[0] * cols + r[0]))
            ops.store_reduction("o", x[0], v)

        bufs = [buf("a", torch.float32, "in", rows * cols), buf("o", torch.float32, "out", rows)]
        return spec(body_name, [rows], [cols], [("reduction", body)], bufs)

    return [copy("copy7", 7), copy("copy4m", 1 << 22), row_sum("row_sum", 4096, 4096)]


def test_workers_compile_what_first_launches_load_from_the_cache(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_DEFAULT_FP_FUSION="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    jobs = report["jobs"]
    assert [len(jobs[name]) for name in ("copy7", "copy4m", "row_sum")] == [1, 3, 2]
    assert jobs["copy4m"][0][0] == [1024, 1, 16]  # the heuristic leads: 2 float32 per thread
    assert all(error is None for job in jobs.values() for _, error in job), jobs
    assert report["new_entries"] == 0
    # Workers store what a launch loads, not the intermediate IR (TRITON_STORE_BINARY_ONLY)
    assert report["kept"] == [".cubin", ".json", ".source"], report["kept"]
    assert report["warmed"] and report["left"] == 0  # compiled into a throwaway cache


def _module(tmp_path: Path, s: Any) -> Any:
    be = TritonBackend(TritonOptions(cache=Cache(tmp_path)))
    path = tmp_path / f"{s.name}.py"
    path.write_text(be.codegen(dataclasses.replace(s, device="cuda")).source)
    return import_module_file(path, f"precompile_{s.name}")


def test_a_launch_cancels_unstarted_jobs_and_outlives_failed_ones(tmp_path: Path) -> None:
    module = _module(tmp_path, specs()[0])
    pending: Future[str | None] = Future()
    failed: Future[str | None] = Future()
    failed.set_running_or_notify_cancel()
    failed.set_result("CompilationError: at 3:4")
    died: Future[str | None] = Future()
    died.set_running_or_notify_cancel()
    died.set_exception(RuntimeError("compile worker 7 died"))
    done: Future[str | None] = Future()
    done.set_running_or_notify_cancel()
    done.set_result(None)
    module.RUNTIME.precompiled.update(pending=pending, failed=failed, died=died, done=done)
    assert [module.RUNTIME._from_worker(k) for k in ("pending", "failed", "died", "done", "none")] == [
        False, False, False, True, False]
    assert pending.cancelled() and module.RUNTIME.precompiled == {}


def test_jobs_only_for_static_sizes(tmp_path: Path) -> None:
    n = sympy.Symbol("s0", integer=True, positive=True)

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.load("a", x[0]))

    bufs = [buf("a", torch.float32, "in", n), buf("o", torch.float32, "out", n)]
    dynamic = _module(tmp_path, spec("dyn", [n], [], [("outer", body)], bufs, size_args=[n]))
    assert dynamic.jobs() == []
    static = _module(tmp_path, specs()[2])
    if not static.RUNTIME.direct:  # a Triton without knobs compiles through the JIT at launch
        pytest.skip("direct launches need triton >= 3.4")
    ((key, job),) = static.jobs()[:1]
    assert job[1] == (torch.float32, torch.float32, 4096, 4096) and key[0] == job[0]


def test_a_kernels_first_config_is_queued_before_this_process_imports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`load` queues a static CUDA kernel's heuristic compile as soon as its module file is
    written (a worker imports it while this process does), then hands the module the Future
    under its first launch's key; dynamic and interpreted kernels queue nothing ahead."""
    queued: list[tuple[str, bool]] = []

    def ahead(path: Path, name: str, workers: int | None = None) -> Future[str | None]:
        queued.append((name, name in sys.modules))
        return Future()

    monkeypatch.setattr(precompile, "ahead", ahead)
    monkeypatch.setattr(precompile, "submit", lambda modules, ranks, workers: 0)
    n = sympy.Symbol("s0", integer=True, positive=True)

    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.load("a", x[0]))

    dynamic = spec("dyn_ahead", [n], [], [("outer", body)],
                   [buf("a", torch.float32, "in", n), buf("o", torch.float32, "out", n)],
                   size_args=[n])
    be = TritonBackend(TritonOptions(cache=Cache(tmp_path)))
    static = dataclasses.replace(specs()[2], device="cuda")
    be.load([be.codegen(static), be.codegen(dataclasses.replace(dynamic, device="cuda")),
             be.codegen(specs()[0])])  # the last on CPU: interpreted
    ((name, imported),) = queued
    module = sys.modules[name]
    assert not imported and module.NAME == "row_sum"
    assert list(module.RUNTIME.precompiled) == ([module.jobs()[0][0]] if module.RUNTIME.direct else [])


def test_worker_count_is_validated() -> None:
    assert precompile.worker_count(3) == 3
    assert TritonOptions.from_mapping({"compile_workers": "3"}).compile_workers == 3
    with pytest.raises(InvalidOption, match="compile_workers"):
        TritonOptions.from_mapping({"compile_workers": "many"})
    with pytest.raises(InvalidOption, match="launcher"):
        TritonOptions.from_mapping({"launcher": "cuda"})


def test_jobs_are_cancelled_when_no_worker_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing will take a job: it is cancelled (its launch compiles it), so that nothing
    waiting for it, `settle` or a tuning in the background, waits forever."""
    monkeypatch.setattr(precompile, "_WORKER", "import sys; sys.exit(3)")
    pool = precompile.CompilePool(2, None)
    assert pool.wait_started(timeout=60)  # both gave up
    future = pool.submit({"path": "unused"}, 0)
    with state.isolated():
        precompile.COMPILES.get().submitted.append(future)
        assert precompile.settle(timeout=60) and future.cancelled()


def test_settle_waits_for_every_job_submitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Pool:  # a pool whose jobs end when the test says
        def __init__(self) -> None:
            self.futures: list[Future[str | None]] = []

        def submit(self, job: dict[str, Any], priority: int) -> Future[str | None]:
            self.futures.append(Future())
            return self.futures[-1]

    pool = Pool()
    monkeypatch.setattr(precompile, "pool", lambda workers=None: pool)
    monkeypatch.setattr(precompile, "COMPILES", state.Slot("test.compiles", precompile.Compiles))
    module = _module(tmp_path, specs()[2])  # two candidates
    module.jobs = lambda: [(("cfg", i), ("args",)) for i in range(2)]
    assert precompile.submit([(module, tmp_path / "m.py")]) == 2
    assert not precompile.settle(timeout=0.01)
    pool.futures[0].set_result(None)
    assert not precompile.settle(timeout=0.01)
    pool.futures[1].cancel()  # a job a launch took over counts as settled
    assert precompile.settle(timeout=0.01) and precompile.COMPILES.get().submitted == []


def test_workers_exit_quietly_when_their_program_is_gone() -> None:
    """A short program can end while its workers still start: a worker whose stdin closes
    before its target, or whose stdout closes before it reports ready, exits with status 0 and
    prints nothing (it once printed a BrokenPipeError traceback)."""
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", precompile._WORKER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    closed_early, gone_before_ready = start(), start()
    assert closed_early.stdin is not None and closed_early.stdout is not None
    closed_early.stdin.close()
    assert gone_before_ready.stdin is not None and gone_before_ready.stdout is not None
    precompile._write(gone_before_ready.stdin, None)  # no target: no compiler warm-up
    gone_before_ready.stdout.close()
    gone_before_ready.stdin.close()
    for proc in (closed_early, gone_before_ready):
        assert proc.wait(timeout=120) == 0
        assert proc.stderr is not None and proc.stderr.read().decode() == ""


def test_a_first_launch_finds_its_job_by_the_key_workers_were_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import triton
    from triton.backends.compiler import GPUTarget

    module = _module(tmp_path, specs()[1])  # 4M-element copy: three candidates
    if not module.RUNTIME.direct:
        pytest.skip("direct launches need triton >= 3.4")
    driver = precompile._TargetDriver()
    driver.target = GPUTarget("cuda", 90, 32)
    monkeypatch.setattr(triton.runtime.driver, "_active", driver)  # no GPU here: device = target
    monkeypatch.setattr(module.RUNTIME, "_device", driver.get_current_device)
    monkeypatch.setattr(module.RUNTIME, "_stream", driver.get_current_stream)
    key, job = module.jobs()[0]
    done: Future[str | None] = Future()
    done.set_running_or_notify_cancel()
    done.set_result(None)
    module.RUNTIME.precompiled[key] = done
    compiled: list[tuple[Any, ...]] = []
    launched: list[tuple[Any, ...]] = []
    monkeypatch.setattr(module.RUNTIME, "warmup", lambda *a: compiled.append(a) or "kernel")
    monkeypatch.setattr(module.RUNTIME, "_static", lambda k, device: (lambda *a: launched.append(a), None))
    n = 1 << 22
    a, o = torch.empty(n), torch.empty(n)
    module.RUNTIME._launch(job[0], (a, o), (), n, 1, False, None)
    assert key not in module.RUNTIME.precompiled  # the worker's job was the one awaited
    (cfg, args, grid0, idx64, persistent), = compiled
    assert (cfg, grid0, idx64, persistent) == (job[0], job[2], job[3], job[4])
    assert args[:2] == (a, o) and args[2:] == job[1][2:]
    (launch,) = module.RUNTIME.compiled.values()
    assert launch.ahead and launched == [(grid0, 0, (a, o, n, 1, *cfg[:2], False, True))]


def test_the_conformance_entry_passes_the_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from polyduct.conformance.backends import resolve_backend

    monkeypatch.setenv("POLYDUCT_TRITON_COMPILE_WORKERS", "0")  # as bench/gpu_job.sh runs it
    backend = resolve_backend("triton")[1]
    assert isinstance(backend, TritonBackend) and backend.options.compile_workers == 0
