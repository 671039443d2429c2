"""The runtime of every generated Triton kernel module: config choice, tuning, compiling (or
loading what a compile worker built), launching, and index-check errors.

A generated module imports `KernelRuntime` and makes one for its kernel from the facts
`launcher.render_launcher` wrote (`KernelFacts`); its `launch` and `jobs` call the runtime.
What a runtime holds for its kernel (tuned configs, compiled launches, compile workers' jobs,
the tuning cache and the `launcher` option its loader sets) lives on that object.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import triton

from polyduct.cache import Cache
from polyduct.errors import KernelAssertError, KernelCompileError, KernelIndexError
from polyduct_triton import triton_shim
from polyduct_triton.kernel_configs import Config, KernelFacts, candidate_configs, pow2
from polyduct_triton.kernel_tuning import TuningMixin

# One lock for every generated module of the process: Triton's interpreter patches the
# `triton.language` module itself while it runs a kernel (another thread's kernel then fails with
# "Did you forget to add @triton.jit"), and config choice, tuning and compiling update shared
# tables. Launches of a kernel whose config is settled (`ready`, GPUs) take no lock.
LAUNCH_LOCK = threading.RLock()
_SOURCE_ERRORS = tuple(
    e for e in (
        getattr(getattr(triton, "compiler", None), "CompilationError", None),
        getattr(getattr(triton.runtime, "errors", None), "InterpreterError", None),
    ) if e is not None
)
# Launches on GPUs (Triton >= 3.4, which has `triton.knobs`): a (config, specialisation) compiles
# through the JIT's warmup; launches then skip the JIT's argument binding (most of a small kernel's
# cost) through torch's precompiled CUDA launcher, as Inductor does, else the kernel's own one.
_HAS_KNOBS = hasattr(triton, "knobs")
Launch = Callable[[int, Any, tuple[Any, ...]], None]  # (grid0, stream, arguments)
Key = tuple[Config, bool, bool, tuple[Any, ...]]  # (config, idx64, persistent, specialisation)
Job = tuple[Config, tuple[Any, ...], int, bool, bool]  # warmup's arguments


# a fact of the installed Triton, fixed while the process runs: not process state
@functools.cache
def _cuda_options() -> dict[str, bool]:
    # Triton links libdevice in its flush-to-zero flavour by default; torch keeps subnormals
    # (sin, ceil, fmod... of a subnormal float32 or bfloat16 would otherwise see 0).
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return {}
    known = CUDAOptions.__dataclass_fields__
    return {"enable_reflect_ftz": False} if "enable_reflect_ftz" in known else {}


# a fact of the installed package, fixed while the process runs: not process state
@functools.cache
def runtime_digest() -> str:
    """SHA-256 of the runtime's files (part of the tuning cache's key)."""
    here = Path(__file__).parent
    text = b"".join((here / f).read_bytes() for f in ("kernel_runtime.py", "kernel_configs.py"))
    return hashlib.sha256(text).hexdigest()


def _specialisation(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # What Triton specialises a kernel on: 16-byte aligned pointers (a dtype: an aligned tensor,
    # as in Triton's warmup); integers equal to 1, divisible by 16, or wider than 32 bits.
    return tuple(
        a.data_ptr() % 16 == 0 if isinstance(a, torch.Tensor)
        else True if isinstance(a, torch.dtype)
        else (a == 1, a % 16 == 0, -(2**31) <= a < 2**31)
        for a in args
    )


def _torch_launcher_class() -> Any:
    for module in ("torch._inductor.runtime.static_triton_launcher",
                   "torch._inductor.runtime.static_cuda_launcher"):
        try:
            return importlib.import_module(module).StaticallyLaunchedCudaKernel
        except (ImportError, AttributeError):
            continue
    return None


def _triton_launch(compiled: Any, why: str) -> Any:
    """`launch(grid0, stream, args)` through the kernel's own launcher (`why`: not torch's)."""
    hooks = triton.knobs.runtime

    def launch(grid0: int, stream: Any, args: tuple[Any, ...]) -> None:
        enter = hooks.launch_enter_hook
        meta = None if enter is None else compiled.launch_metadata((grid0, 1, 1), stream, *args)
        compiled.run(grid0, 1, 1, stream, compiled.function, compiled.packed_metadata, meta,
                     enter, hooks.launch_exit_hook, *args)

    launch.via, launch.compiled = f"triton ({why})", compiled  # type: ignore[attr-defined]
    return launch


# A launch's index-check flags: word 0, which a failed check clears (all that a device-side
# assert reads), then FLAG_WORDS words per check (failed, index, size), which it sets.
FLAG_WORDS = 3


def flag_slot(check: int) -> int:
    """The first word of check `check`'s flags (of n checks: `flag_slot(n)` words in all)."""
    return 1 + FLAG_WORDS * check


def _aligned(tensors: tuple[torch.Tensor, ...], err: torch.Tensor | None) -> bool:
    for t in tensors if err is None else (*tensors, err):  # noqa: SIM110 - all() is slower
        if t.data_ptr() & 15:
            return False
    return True


class KernelRuntime(TuningMixin):
    """Config choice, tuning, compiling and launching for the kernel `kernel` (the module's
    `triton.jit` function) described by `facts`.

    HEAVY kernels (long bodies, e.g. many fused special functions) take small blocks: Triton's
    code, and its compile time, grow with the elements each thread holds. Autotuning is bounded:
    problems below TUNE_MIN_NUMEL elements take the heuristic config (the first candidate);
    larger ones time at most MAX_CONFIGS candidates for about TUNE_BUDGET_MS each (`_time_ms`),
    once per (device, pow2 xnumel, pow2 rnumel, idx64). The heuristic is timed first: a kernel
    it runs in under TUNE_MIN_MS keeps it, the others never compiled (0.1-0.8 s each, to save
    microseconds).
    """

    TUNE_MIN_NUMEL = 1 << 20
    TUNE_MIN_MS = 0.05
    TUNE_BUDGET_MS = 2.0

    def __init__(self, kernel: Any, facts: KernelFacts) -> None:
        self.kernel, self.facts = kernel, facts
        self.direct = not facts.interpret and _HAS_KNOBS
        self.cuda_options = {} if facts.interpret else _cuda_options()
        if not facts.interpret:
            triton_shim.set_source_key(kernel, facts.digest)
        # Set by the module's loader: a polyduct.cache.Cache of tuned configs (None: they live
        # in this process), the backend's `launcher` option, and, for a module loaded from an
        # AOT package (polyduct_triton.package), its tuned configs and compiled launches.
        self.tuning_cache: Cache | None = None
        self.launcher = "auto"
        self.index_errors = "assert"
        # (device) -> the index-check flags of asserting launches: a failure ends the CUDA
        # context, so their word 0 is never cleared and never set again
        self._flags: dict[torch.device, torch.Tensor] = {}
        self.packaged: Any = None
        # Set by the backend after import: (config, idx64, persistent, specialisation) -> the
        # Future of that compile in a worker process (polyduct_triton.precompile).
        self.precompiled: dict[Key, Future[Any]] = {}
        self.best: dict[tuple[Any, ...], Config] = {}  # shape class -> chosen config
        self.compiled: dict[tuple[Any, Key], Any] = {}  # (device, key) -> launch function
        # (device, sizes) -> (launch function, grid, constexprs) of launches whose config is
        # final: one of known sizes with 16-byte aligned tensors calls it directly.
        self.ready: dict[tuple[Any, ...], Any] = {}
        self.ready_max = 4096
        # Shape class -> (configs, the candidates' compile Futures): tuning in the background.
        self.pending: dict[tuple[Any, ...], tuple[list[Config], list[Any]]] = {}
        # Torch's current device and stream, as Triton's CUDA driver reads them, without
        # building that driver (a C compile): packaged kernels launch where no compiler is.
        # (`torch.cuda.current_device` checks for CUDA's lazy initialisation on every call: a
        # launch on a CUDA tensor has initialised it)
        self._device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
        self._device_name = torch.cuda.get_device_name
        self._stream: Any = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._specialisation = _specialisation
        self._torch_launcher_class = _torch_launcher_class
        self._triton_launch = _triton_launch

    def configs(self, xnumel: int, rnumel: int) -> list[Config]:
        """Candidate configs for this kernel and shape, heuristic first."""
        return candidate_configs(self.facts, xnumel, rnumel)

    # -- compiling and launching -------------------------------------------------------------

    def _static(self, compiled: Any, device: int) -> tuple[Any, str | None]:
        """(`launch(grid0, stream, args)` through torch's static CUDA launcher, None), or (None,
        why not): torch has none, or it does not take this kernel (launch hooks set, scratch
        memory, other argument types)."""
        if self.launcher == "triton":
            return None, "launcher='triton'"
        cls = self._torch_launcher_class()
        cubins = [p for name, p in getattr(compiled, "metadata_group", {}).items()
                  if name.endswith(".cubin")]
        if cls is None or not cubins:
            return None, "no static CUDA launcher in torch" if cls is None else "no cubin"
        triton_shim.set_cubin_path(compiled, cubins[0])
        try:
            kernel = cls(compiled)
            kernel.load_kernel(device)
        except Exception as exc:  # noqa: BLE001 - not launchable this way: Triton's launcher runs it
            return None, f"{type(exc).__name__}: {exc}"
        src = compiled.src
        names = src.fn.arg_names
        kinds = {names.index(k) if isinstance(k, str) else k: v for k, v in src.signature.items()}
        runtime = [i for i in range(len(names)) if kinds.get(i) != "constexpr"]
        run = kernel.run

        def launch(grid0: int, stream: Any, args: tuple[Any, ...]) -> None:
            run(grid0, 1, 1, stream, *[args[i] for i in runtime])

        launch.via, launch.kernel = "torch", kernel  # type: ignore[attr-defined]
        launch.runtime = runtime  # type: ignore[attr-defined] # runtime: packages
        return launch, None

    def _options(self, cfg: Config, idx64: bool, persistent: bool) -> dict[str, Any]:
        """The kernel's constexprs and Triton's compile options for one config."""
        xb, rb, warps = cfg
        return dict(XBLOCK=xb, RBLOCK=rb, IDX64=idx64, PERSISTENT=persistent, num_warps=warps,
                    enable_fp_fusion=self.facts.fp_fusion, **self.cuda_options)

    def warmup(self, cfg: Config, args: tuple[Any, ...], grid0: int, idx64: bool,
               persistent: bool) -> Any:
        """Compile one (config, specialisation) without launching it: here before a first
        launch, and in compile workers ahead of it (where `args` has dtypes for tensors)."""
        return self.kernel.warmup(*args, grid=(grid0,), **self._options(cfg, idx64, persistent))

    def _from_worker(self, key: Key) -> bool:
        """Whether a compile worker built this (config, specialisation) into Triton's cache. A
        job no worker has started yet is cancelled (compiling here is sooner than waiting), as
        is one that failed or outlived the wait: then the first launch compiles it."""
        future = self.precompiled.pop(key, None)
        if future is None or future.cancel():
            return False
        try:
            return future.result(timeout=600) is None
        except Exception:  # noqa: BLE001 - a worker died or hung: compiled here instead
            return False

    @staticmethod
    def _args(tensors: tuple[Any, ...], sizes: tuple[int, ...], xnumel: int, rnumel: int,
              err: torch.Tensor | None) -> tuple[Any, ...]:
        """The kernel's runtime arguments, in its parameter order (index-check flags last)."""
        return (*tensors, *sizes, xnumel, rnumel) + ((err,) if err is not None else ())

    def _job(self, cfg: Config, args: tuple[Any, ...], xnumel: int, rnumel: int,
             idx64: bool) -> tuple[Key, Job]:
        """(key, warmup arguments) of launching `cfg` with `args`: one computation for the
        launch and the compile workers, whose compiles the launch finds by this key."""
        persistent = cfg[1] >= rnumel  # one block covers the reduction: loop-free
        grid0 = (xnumel + cfg[0] - 1) // cfg[0]
        key = (cfg, idx64, persistent, self._specialisation(args))
        return key, (cfg, args, grid0, idx64, persistent)

    def _compile(self, key: Key, job: Job, device: int) -> Any:
        """The launch function of one (config, specialisation), compiled without launching."""
        if self.packaged is not None:
            return self.packaged.launch(key, device)
        ahead = self._from_worker(key)
        compiled = self.warmup(*job)
        launch, why = self._static(compiled, device)
        launch = launch or self._triton_launch(compiled, str(why))
        launch.compiled, launch.ahead = compiled, ahead  # ahead: a worker compiled it
        return launch

    def _launch(self, cfg: Config, tensors: tuple[Any, ...], sizes: tuple[int, ...],
                xnumel: int, rnumel: int, idx64: bool, err: torch.Tensor | None) -> Any:
        """Launch `cfg`; on GPUs, return what launched it: (launch function, grid, constexprs)."""
        xb, rb, _ = cfg
        args = self._args(tensors, sizes, xnumel, rnumel, err)
        key, job = self._job(cfg, args, xnumel, rnumel, idx64)
        _, _, grid0, _, persistent = job
        if self.direct:
            device = self._device()
            launch = self.compiled.get((device, key))
            if launch is None:
                launch = self.compiled[device, key] = self._compile(key, job, device)
            tail = (xb, rb, idx64, persistent)
            stream = self._stream(device)
            try:
                launch(grid0, stream, (*args, *tail))
            except RuntimeError as exc:  # torch's static launcher refused it: Triton's runs it
                if getattr(launch, "via", "") != "torch":
                    raise
                launch = self._triton_launch(launch.compiled, f"torch's: {exc}")
                self.compiled[device, key] = launch
                launch(grid0, stream, (*args, *tail))
            return launch, grid0, tail
        if self.facts.interpret:
            # numpy computes the interpreted kernel: IEEE overflow, NaN and division by zero
            # are results here as on a GPU, not something to warn about
            import numpy

            with numpy.errstate(all="ignore"):
                self.kernel[(grid0,)](*args, XBLOCK=xb, RBLOCK=rb, IDX64=idx64,
                                      PERSISTENT=persistent)
        else:
            self.kernel[(grid0,)](*args, **self._options(cfg, idx64, persistent))
        return None  # Triton's own launch: nothing to reuse

    def _candidates(self, xnumel: int, rnumel: int, cuda: bool) -> list[Config]:
        """The configs a first launch may compile: all where it tunes, else the heuristic."""
        configs = self.configs(xnumel, rnumel)
        small = xnumel * max(rnumel, 1) < self.TUNE_MIN_NUMEL
        tunes = self.facts.autotune and cuda and not (self.facts.interpret or small)
        return configs if tunes else configs[:1]

    def _pick(self, tensors: tuple[Any, ...], sizes: tuple[int, ...], xnumel: int,
              rnumel: int, idx64: bool, err: torch.Tensor | None) -> Config:
        device = tensors[0].device
        key = (device, pow2(xnumel), pow2(rnumel), idx64)
        packaged = self.packaged
        best = self.best.get(key) if packaged is None else packaged.config(key[1:], xnumel, rnumel)
        if best is not None and not (self.pending and self._tune_ready(key)):
            return best
        shape = (tensors, sizes, xnumel, rnumel, idx64, err)
        if best is not None:  # every candidate has compiled: benchmark them now
            best = self._tuned(key[1:], self.pending.pop(key)[0], *shape)
        else:
            configs = self._candidates(xnumel, rnumel, device.type == "cuda")
            best = configs[0] if len(configs) == 1 else self._remembered(key[1:], configs, *shape)
            if best is None and (futures := self._compiling(configs, *shape)) is not None:
                best, self.pending[key] = configs[0], (configs, futures)
            best = best or self._tuned(key[1:], configs, *shape)
        self.best[key] = best
        return best

    def jobs(self, args: tuple[Any, ...], xnumel: int, rnumel: int,
             idx64: bool) -> list[tuple[Key, Job]]:
        """(key, warmup arguments) of each config the first launch with `args` (dtypes in place
        of tensors) may compile, heuristic first: what compile workers can build ahead of it."""
        if not self.direct or xnumel <= 0:
            return []
        return [self._job(c, args, xnumel, rnumel, idx64)
                for c in self._candidates(xnumel, rnumel, True)]

    def run(self, tensors: tuple[Any, ...], sizes: tuple[int, ...], xnumel: int, rnumel: int,
            idx64: bool, err: torch.Tensor | None) -> None:
        """Launch the kernel on `tensors` and `sizes` (the generated `launch`'s arguments)."""
        direct = self.direct
        if direct:
            device = self._device()
            if (ready := self.ready.get((device, sizes))) is not None and _aligned(tensors, err):
                launch, grid0, tail = ready
                if err is None:
                    launch(grid0, self._stream(device), (*tensors, *sizes, xnumel, rnumel, *tail))
                else:
                    launch(grid0, self._stream(device),
                           (*tensors, *sizes, xnumel, rnumel, err, *tail))
                return
        try:
            with LAUNCH_LOCK:  # the interpreter and tuning are not thread-safe
                cfg = self._pick(tensors, sizes, xnumel, rnumel, idx64, err)
                ready = self._launch(cfg, tensors, sizes, xnumel, rnumel, idx64, err)
        except _SOURCE_ERRORS as exc:
            path = self.facts.path
            text = Path(path).read_text()
            raise KernelCompileError(
                "triton", self.facts.name, path, f"{exc}\n--- source ---\n{text}"
            ) from exc
        if direct and not self.pending and _aligned(tensors, err):  # no tuning left to run
            if len(self.ready) >= self.ready_max:
                self.ready.clear()
            self.ready[device, sizes] = ready

    def _asserts(self, device: torch.device) -> bool:
        """Whether a failed check on `device` is a device-side assert (else it raises)."""
        # While a CUDA graph records, a host check would synchronise (and end the recording)
        return device.type == "cuda" and (
            self.index_errors == "assert" or torch.cuda.is_current_stream_capturing()
        )

    def flags(self, like: torch.Tensor | None, size: int) -> torch.Tensor:
        """The index-check flags (`flag_slot`) of one launch on the device of `like`. Where a
        failure is a device-side assert only word 0 is read, so the buffer starts as ones;
        where it raises, as zeros."""
        device = like.device if like is not None else torch.device("cpu")
        if not self._asserts(device):
            return torch.zeros(size, dtype=torch.int64, device=device)
        kept = self._flags.get(device)
        if kept is None:  # (a CUDA graph may read the kept buffer: it outlives every graph)
            ones = torch.ones(size, dtype=torch.int64, device=device)
            if torch.cuda.is_current_stream_capturing():  # the graph's own memory: not kept
                return ones
            kept = self._flags[device] = ones
        return kept

    def check(self, err: torch.Tensor) -> None:
        """After a launch: on a GPU that asserts, a device-side assert on word 0 (one small
        launch, no waiting: the call returns at once, as eager's and Inductor's do); otherwise
        wait for the flags and raise the first failure as `KernelIndexError` or
        `KernelAssertError`."""
        if self._asserts(err.device):
            torch._assert_async(err[:1], f"{self.facts.name}: index out of bounds")
        elif bool(err[flag_slot(0)::FLAG_WORDS].any()):
            self.raise_index_error(err)

    def raise_index_error(self, err: torch.Tensor) -> None:
        """Raise the error the kernel's first failed index check (or device assert) recorded."""
        flags = err[flag_slot(0):].view(-1, FLAG_WORDS)
        slot = int(torch.nonzero(flags[:, 0]).flatten()[0])
        if slot in self.facts.asserts:
            raise KernelAssertError(self.facts.name, "triton", self.facts.asserts[slot])
        raise KernelIndexError(self.facts.name, self.facts.checked[slot], int(flags[slot, 1]),
                               int(flags[slot, 2]))
