"""Compile workers: a graph's kernels compiled in parallel, ahead of their first launches.

Triton compiles one kernel in 0.05-0.8 s of Python, MLIR, LLVM and ptxas; a graph's first call
would otherwise compile its kernels, and each kernel's tuning candidates, one after another.
When the backend loads a graph's kernels it hands every (config, specialisation) their first
launches may compile (`jobs()` of each generated module: known when the sizes are static) to a
pool of worker processes: each kernel's heuristic config as soon as its module file is written
(`ahead`; the worker imports the module and reads its `jobs()` itself), its tuning candidates
once the graph is loaded (`submit`). A worker compiles through the same `warmup` call as the
launch, with dtypes in place of tensors and the parent's GPU target, into Triton's on-disk
cache; the first launch then waits for its job, and its own `warmup` finds the result in the
cache. A launch never waits for the candidates: they are tuned once compiled (the module's
runtime), and `settle` waits for every queued job. Jobs no
worker has started when their launch comes are cancelled and compiled in the launching process,
so the pool never delays a launch (its workers take 1-2 s to start). Workers never touch the
GPU: they compile for the target they are told.

The workers are Python processes running `serve_worker`, speaking pickled messages over their
stdin and stdout; the backend's `compile_workers` option (`POLYDUCT_TRITON_COMPILE_WORKERS`)
sets how many (0: none; default: the CPUs this process may run on, less one, at most 16). They exit when the process that started them
does.
"""

from __future__ import annotations

import gc
import importlib
import itertools
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import triton
import triton.language as tl

from polyduct import state
from polyduct.cache import import_module_file

BINARY_ONLY_ENV = "TRITON_STORE_BINARY_ONLY"
_HEURISTIC, _CANDIDATE = 0, 1  # job priorities: every kernel's heuristic config comes first
_WORKER = "from polyduct_triton.precompile import serve_worker; serve_worker()"


def worker_count(configured: int | None = None) -> int:
    """How many compile workers to run: `configured` (the backend's `compile_workers` option),
    else the CPUs less one (at most 16)."""
    if configured is not None:
        return max(0, configured)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min(16, (cpus or 1) - 1))


class CompilePool:
    """Worker processes taking compile jobs by priority, each job's outcome a `Future`: None
    once its kernel is in Triton's cache, else the worker's error text."""

    def __init__(self, workers: int, target: tuple[str, Any, int] | None) -> None:
        # (priority, order, outcome, job); an outcome of None stops the worker that takes it
        self._jobs: queue.PriorityQueue[tuple[int, int, Future[str | None] | None, Any]] = (
            queue.PriorityQueue())
        self._order = itertools.count()
        self._target = target  # (backend, arch, warp size): each worker warms its compiler for it
        self._workers = workers
        self._started = 0  # workers ready or failed to start
        self._alive = workers  # workers starting or serving
        self._start = threading.Condition()
        for _ in range(workers):
            threading.Thread(target=self._serve, daemon=True, name="polyduct-compile").start()

    def submit(self, job: dict[str, Any], priority: int) -> Future[str | None]:
        future: Future[str | None] = Future()
        self._jobs.put((priority, next(self._order), future, job))
        with self._start:
            if self._alive == 0:  # nobody will take it: its launch compiles it
                self._cancel_queued()
        return future

    def close(self) -> None:
        """Cancel the queued jobs and stop every worker once its job at hand is done."""
        with self._start:
            self._cancel_queued()
        for _ in range(self._workers):
            self._jobs.put((-1, next(self._order), None, None))

    def wait_started(self, timeout: float) -> bool:
        """Wait until every worker is ready (or failed to start); False if `timeout` passed."""
        with self._start:
            return self._start.wait_for(lambda: self._started == self._workers, timeout)

    def _serve(self) -> None:
        """One worker's life: start it, then feed it jobs until it dies."""
        pipes = None
        try:
            # A session of its own: Ctrl-C at a terminal interrupts the program, not every worker
            # (each prints nothing and exits when the program's end closes its pipes).
            proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, start_new_session=True)
            if proc.stdin is not None and proc.stdout is not None:
                _write(proc.stdin, self._target)
                _read(proc.stdout)  # ready: torch and Triton imported, the compiler warmed
                pipes = proc.stdin, proc.stdout
        except (OSError, EOFError, pickle.UnpicklingError):
            pass  # no worker: queued jobs are cancelled by their launches, compiled there
        with self._start:
            self._started += 1
            self._start.notify_all()
        while pipes is not None:
            _, _, future, job = self._jobs.get()
            if future is None:  # closed: the worker exits when its pipe closes
                pipes[0].close()
                break
            if not future.set_running_or_notify_cancel():
                continue
            try:
                _write(pipes[0], job)
                future.set_result(_read(pipes[1]))
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                future.set_exception(RuntimeError(f"compile worker {proc.pid} died: {exc}"))
                break
        with self._start:
            self._alive -= 1
            if self._alive == 0:
                self._cancel_queued()

    def _cancel_queued(self) -> None:
        """Cancel every queued job (no worker is left to take them): their launches compile
        them, and anything waiting for them (`settle`, tuning) stops waiting."""
        while True:
            try:
                _, _, future, _ = self._jobs.get_nowait()
            except queue.Empty:
                return
            if future is not None:
                future.cancel()


@dataclass
class Compiles:
    """This process's compile pool (started on first use) and every job's outcome, until
    `settle` sees it done."""

    pool: CompilePool | None = None
    submitted: list[Future[str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


COMPILES = state.Slot("polyduct_triton.compiles", Compiles, Compiles.close)


def pool(workers: int | None = None) -> CompilePool | None:
    """The process's compile pool, started on first use with `worker_count(workers)` workers;
    None with no workers configured."""
    compiles = COMPILES.get()
    with compiles.lock:
        if compiles.pool is None and (count := worker_count(workers)) > 0:
            compiles.pool = CompilePool(count, _target())
        return compiles.pool


def _target() -> tuple[str, Any, int] | None:
    """This process's GPU target, as workers are told it (None without a GPU driver)."""
    try:
        target = triton.runtime.driver.active.get_current_target()
    except Exception:  # noqa: BLE001 - no GPU: workers start cold, jobs still carry targets
        return None
    return target.backend, target.arch, target.warp_size


def start(timeout: float = 0.0, workers: int | None = None) -> bool:
    """Start the compile workers now rather than at the first graph's load (they take 1-2 s),
    waiting up to `timeout` seconds for them; True when all are ready (False: none configured,
    or still starting)."""
    started = pool(workers)
    return started is not None and started.wait_started(timeout)


def settle(timeout: float | None = None) -> bool:
    """Wait until every compile job queued so far has finished (or was cancelled), up to
    `timeout` seconds; True if all have. Kernels whose tuning candidates compile in the
    background then tune at their next launch: call this, then the program once more, before
    timing its steady state."""
    # Polled: a job cancelled in the queue is done at once, but `concurrent.futures.wait` only
    # hears of it when a worker dequeues it.
    deadline = None if timeout is None else time.monotonic() + timeout
    submitted = COMPILES.get().submitted
    while True:
        submitted[:] = [f for f in submitted if not f.done()]
        if not submitted or (deadline is not None and time.monotonic() >= deadline):
            return not submitted
        time.sleep(0.005)


def ahead(path: Path, name: str, workers: int | None = None) -> Future[str | None] | None:
    """Queue the heuristic config's compile of the kernel module at `path` (imported as `name`)
    before this process imports it: the worker imports it and takes the first of its `jobs()`,
    while this process imports it too. Its Future (None without workers) goes to `attach`."""
    target_pool = pool(workers)
    if target_pool is None:
        return None
    future = target_pool.submit(_job(path, name, 0, _settings()), _HEURISTIC)
    COMPILES.get().submitted.append(future)
    return future


def attach(module: ModuleType, future: Future[str | None] | None) -> None:
    """Hand the imported module the Future of its heuristic config's compile (from `ahead`),
    under the key its first launch looks up; a module without jobs leaves it unused."""
    jobs = module.jobs() if future is not None else []
    if jobs:
        module.RUNTIME.precompiled[jobs[0][0]] = future


def submit(
    modules: list[tuple[ModuleType, Path]], ranks: slice = slice(None), workers: int | None = None
) -> int:
    """Queue the jobs of freshly loaded generated modules (compiled kernels on a GPU only), those
    of `ranks` in each module's list (0: its heuristic config; 1 on: its tuning candidates).
    Heuristic configs go before any queued candidate. Returns how many were queued."""
    work = [(m, path, m.jobs()) for m, path in modules]
    work = [w for w in work if w[2][ranks]]
    target_pool = pool(workers) if work else None
    if target_pool is None:
        return 0
    submitted = COMPILES.get().submitted
    submitted[:] = [f for f in submitted if not f.done()]
    settings = _settings()
    queued = 0
    for module, path, jobs in work:
        for rank, (key, _) in list(enumerate(jobs))[ranks]:
            future = target_pool.submit(_job(path, module.__name__, rank, settings),
                                        _HEURISTIC if rank == 0 else _CANDIDATE)
            module.RUNTIME.precompiled[key] = future
            submitted.append(future)
            queued += 1
    return queued


def _settings() -> dict[str, Any]:
    """What every job of this process compiles with: its `TRITON_*` environment and GPU target."""
    env = {k: v for k, v in os.environ.items() if k.startswith("TRITON_")}
    # A job's compile is only ever loaded: its cubin and metadata are all the cache needs (not
    # the TTIR, TTGIR, LLVM IR and PTX, five files fewer to write per compile). Set it to 0 to
    # keep them for inspection.
    env.setdefault(BINARY_ONLY_ENV, "1")
    return {"env": env, "target": _target()}


def _job(path: Path, name: str, rank: int, settings: dict[str, Any]) -> dict[str, Any]:
    """A worker's job: compile the `rank`-th of the module's `jobs()` with `settings`."""
    return {"path": str(path), "module": name, "rank": rank, **settings}


def _write(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("compile worker closed its pipe")
    return pickle.loads(stream.read(int.from_bytes(head, "little")))


class _TargetDriver:
    """What Triton's JIT asks of the active driver to compile (not launch) for a given target,
    with no GPU: the device (the target stands for it), a stream and the target."""

    def __init__(self) -> None:
        self.target: Any = None

    def get_current_device(self) -> Any:
        return self.target

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target


def _compile_job(job: dict[str, Any], modules: dict[str, ModuleType], driver: _TargetDriver) -> None:
    from triton.backends.compiler import GPUTarget

    for key in [k for k in os.environ if k.startswith("TRITON_") and k not in job["env"]]:
        del os.environ[key]
    os.environ.update(job["env"])
    driver.target = GPUTarget(*job["target"])
    module = modules.get(job["path"])
    if module is None:
        module = modules[job["path"]] = import_module_file(Path(job["path"]), job["module"])
    jobs = module.jobs()
    if job["rank"] < len(jobs):  # else nothing to build ahead (sizes known only at launch)
        module.RUNTIME.warmup(*jobs[job["rank"]][1])


@triton.jit  # type: ignore[untyped-decorator]
def _warm_kernel(x, y, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    i = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[:, None]) * 8 + tl.arange(0, 8)[None, :]
    v = tl.load(x + i, i < n, other=1.0)
    e = tl.exp(v - tl.max(v, 1)[:, None])
    tl.store(y + i, tl.math.div_rn(e, tl.sum(e, 1)[:, None] + 1.0), i < n)


def _warm_compiler(driver: _TargetDriver, target: tuple[str, Any, int]) -> bool:
    """Compile a small kernel (exp, division, row max and sum) into a throwaway cache, so that
    the first job does not pay the compiler's one-time set-up (its backend, libdevice, LLVM,
    ptxas and the reduction path: about 0.05 s). False if that failed: the first job then
    starts cold, and reports its own errors."""
    import tempfile

    import torch
    from triton.backends.compiler import GPUTarget

    driver.target = GPUTarget(*target)
    saved = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="polyduct-warm-") as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        try:
            _warm_kernel.warmup(torch.float32, torch.float32, 1024, grid=(1,), BLOCK=128)
            return True
        except Exception:  # noqa: BLE001 - only a slower first job
            return False
        finally:
            if saved is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = saved


def serve_worker() -> None:
    """A compile worker's loop: a job from stdin, its outcome to stdout, until stdin closes. A
    worker whose parent is gone (its pipes closed, say by a short script's exit while the
    worker was still starting) exits quietly."""
    # Replies go to the original stdout; anything else printed goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        _serve_jobs(out)
    except (EOFError, BrokenPipeError):
        os._exit(0)  # nothing to report to, nor to flush at exit


def _serve_jobs(out: IO[bytes]) -> None:
    # Warnings would repeat once per worker; the launch that loads a kernel reports its own.
    warnings.simplefilter("ignore")
    import torch  # noqa: F401 - generated modules import it; loaded before the first job

    driver = _TargetDriver()
    triton.runtime.driver.set_active(driver)
    for where in ("triton.runtime.cache", "triton.compiler.compiler"):
        # Triton hashes its own library once per process for its cache keys (0.4 s): before
        # "ready", not in the first job.
        key = getattr(importlib.import_module(where), "triton_key", None)
        if callable(key):
            key()
            break
    target = _read(sys.stdin.buffer)
    if target is not None:
        _warm_compiler(driver, target)
    # torch's and Triton's objects live as long as the worker: out of the collector's sight, so
    # that no job pays a full collection over them (0.1 s of a first job on a 2-core CPU).
    gc.collect()
    gc.freeze()
    modules: dict[str, ModuleType] = {}
    _write(out, "ready")
    while True:
        job = _read(sys.stdin.buffer)
        try:
            _compile_job(job, modules, driver)
            outcome = None
        except Exception as exc:  # noqa: BLE001 - reported; the launch compiles it and raises
            outcome = f"{type(exc).__name__}: {exc}"
        _write(out, outcome)
