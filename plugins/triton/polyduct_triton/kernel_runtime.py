"""The runtime of every generated Triton kernel module: config choice, tuning, compiling (or
loading what a compile worker built), launching, and index-check errors.

This file is not imported as a module: `launcher.install_runtime` compiles it once per process
and executes it in each generated module's namespace (a module's own source is then its kernel
and constants only: 4-6 ms less Python to compile per kernel, in the process and in each compile
worker). Its functions read the module's constants, written by `launcher.render_launcher`:
INTERPRET, NAME, KIND, HEAVY, LIGHT, ITEMSIZE, BLOCK_MERGES, FP_FUSION, AUTOTUNE, WRITTEN, CHECKED,
ASSERTS, `_kernel`, RUNTIME_DIGEST (this file's SHA-256, in the tuning key) and `_LAUNCH_LOCK`.
"""
# ruff: noqa: F821 - the names above are the generated module's

import functools
import json

import torch
import triton

_SOURCE_ERRORS = tuple(
    e for e in (
        getattr(getattr(triton, "compiler", None), "CompilationError", None),
        getattr(getattr(triton.runtime, "errors", None), "InterpreterError", None),
    ) if e is not None
)
_BEST = {}
# Set by the backend: a polyduct.cache.Cache of tuned configs (None: they live in this process).
TUNING_CACHE = None
LAUNCHER = "auto"  # the backend's `launcher` option, set by the module's loader


def _cuda_options():
    # Triton links libdevice in its flush-to-zero flavour by default; torch keeps subnormals
    # (sin, ceil, fmod... of a subnormal float32 or bfloat16 would otherwise see 0).
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return {}
    known = CUDAOptions.__dataclass_fields__
    return {"enable_reflect_ftz": False} if "enable_reflect_ftz" in known else {}


CUDA_OPTIONS = {} if INTERPRET else _cuda_options()
# HEAVY kernels (long bodies, e.g. many fused special functions) take small blocks: Triton's
# code, and its compile time, grow with the elements each thread holds. Autotuning is bounded:
# problems below TUNE_MIN_NUMEL elements take the heuristic config (the first candidate); larger
# ones time at most MAX_CONFIGS candidates for about TUNE_BUDGET_MS each (_time_ms), once per
# (device, pow2 xnumel, pow2 rnumel, idx64). The heuristic is timed first: a kernel it runs in
# under TUNE_MIN_MS keeps it, the others never compiled (0.1-0.8 s each, to save microseconds).
TUNE_MIN_NUMEL = 1 << 20
TUNE_MIN_MS = 0.05
TUNE_BUDGET_MS = 2.0
MAX_CONFIGS = 3
# Reductions up to this many elements per row keep the whole row in registers on GPUs.
PERSISTENT_MAX = 8192


def _pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def _dedup(configs):
    out = []
    for c in configs:
        if c not in out:
            out.append(c)
    return out[:MAX_CONFIGS]


def _configs(xnumel, rnumel):
    """Candidate (XBLOCK, RBLOCK, num_warps) for this kernel kind and shape, heuristic first.

    On GPUs a pointwise thread holds 8 bytes of the kernel's widest type (ITEMSIZE bytes; float32:
    2 elements), 16 in LIGHT kernels of 16-bit or narrower types (short, memory-bound: 16-byte
    loads ran bfloat16's pointwise3 2-5% faster; float32 ran alike at 8 and 16), 8 bytes of
    32-bit values in longer kernels of narrower types (which compute in float32); a persistent
    reduction row 32 bytes. In long kernels more elements per thread run no faster and cost
    Triton more to compile (H200, bench/triton_configs.py: the 30-op chain took 2.0 s at 8
    float32 elements per thread, 0.47 s at 2, with a faster kernel; in bfloat16, for sm_90 on
    the 2-core CPU, 2.1 s at 4 elements and 0.66 s at 2).
    """
    xp, rp = _pow2(xnumel), _pow2(rnumel)
    if KIND == "pointwise":
        if INTERPRET:
            return [(min(1024, xp), 1, 4)]
        if HEAVY:  # one element per thread: compile time grows with elements per thread
            xb = min(128, xp)
            return [(xb, 1, max(1, min(4, xb // 32)))]
        width = ITEMSIZE if LIGHT else max(ITEMSIZE, 4)  # longer bodies compute in 32 bits
        per_thread = max(1, min(8, (16 if LIGHT and ITEMSIZE <= 2 else 8) // width))
        xb = min(1024, 512 * per_thread)

        def fit(xb, warps):  # small problems: a smaller block, no more warps than it fills
            xb = min(xb, xp)
            return xb, 1, max(1, min(warps, xb // 32))

        warps = xb // (32 * per_thread)
        configs = [fit(xb, warps), fit(xb // 2, warps // 2)]
        if per_thread > 1:  # half the elements per thread: compute-heavy kernels prefer it
            configs.append(fit(xb, 2 * warps))
        return _dedup(configs)
    if KIND == "sort":
        budget = 1 << 16 if INTERPRET else 1 << 14
        return [(max(1, min(xp, budget // (rp * rp))), rp, 8)]
    budget = 1 << 14 if INTERPRET else (1024 if HEAVY else 4096)
    if KIND == "scan" or rp <= (4096 if INTERPRET else 1024):
        rb = rp
    else:
        rb = 4096 if INTERPRET else 1024
    first = (max(1, min(xp, budget // rb)), rb, 8 if rb >= 512 else 4)
    if INTERPRET:
        return [first]
    if not HEAVY and KIND == "reduction" and 1024 < rp <= PERSISTENT_MAX:
        # Persistent: a row of up to PERSISTENT_MAX elements is read from memory once, however
        # many stages (max, sum, normalise) use it; looping would read it once per stage.
        warps = max(4, min(16, rp * ITEMSIZE // 1024))  # 32 bytes per thread
        if ITEMSIZE <= 2:  # 8 and 16 warps; two rows per program: bfloat16 softmax's fastest
            return _dedup([(1, rp, warps), (1, rp, 8), (1, rp, 16), (2, rp, 16)])
        # Wider types never ran fastest at two rows, nor at 8 warps where 16 fit (float32 4096-
        # element rows: within 0.4% at best, and 10-50% longer to compile). The row in two looped
        # halves at 16 warps reads it from L2 after the first pass (float32 rmsnorm: 0.130 ms
        # against 0.134 persistent, Inductor's 0.129); not where a reduction merges per block,
        # a reduction across warps per half (float32 layernorm's welford: 0.167 against 0.133).
        configs = [(1, rp, warps), (1, rp, 16)]
        return _dedup(configs if BLOCK_MERGES else [*configs, (1, rp // 2, 16)])
    if rb == rp and rb < 64:
        return _dedup([first, (max(1, min(xp, 1024 // rb)), rb, 4)])
    if rb == rp:
        return [first]
    return _dedup([first, (max(1, min(xp, budget // 256)), 256, 4)])


# Launches on GPUs (Triton >= 3.4, which has `triton.knobs`): a (config, specialisation) compiles
# through the JIT's warmup; launches then skip the JIT's argument binding (most of a small kernel's
# cost) through torch's precompiled CUDA launcher, as Inductor does, else the kernel's own one.
DIRECT = not INTERPRET and hasattr(triton, "knobs")
_COMPILED = {}
# Torch's current device and stream, as Triton's CUDA driver reads them, without building that
# driver (a C compile): packaged kernels launch where no compiler is. PACKAGED: set in a module
# loaded from an AOT package (polyduct_triton.package), its tuned configs and compiled launches.
_device, _device_name = torch.cuda.current_device, torch.cuda.get_device_name
_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
PACKAGED = None
# (device, sizes) -> (launch function, grid, constexprs) of launches whose config is final: one of
# known sizes with 16-byte aligned tensors calls it directly (1.2 us of Python instead of 3.8).
_READY, READY_MAX = {}, 4096
# Set by the backend after import: (config, idx64, persistent, specialisation) -> the Future of
# that compile in a worker process (polyduct_triton.precompile), awaited by its first launch.
PRECOMPILED = {}


def _specialisation(args):
    # What Triton specialises a kernel on: 16-byte aligned pointers (a dtype: an aligned tensor,
    # as in Triton's warmup); integers equal to 1, divisible by 16, or wider than 32 bits.
    return tuple(
        a.data_ptr() % 16 == 0 if isinstance(a, torch.Tensor)
        else True if isinstance(a, torch.dtype)
        else (a == 1, a % 16 == 0, -(2**31) <= a < 2**31)
        for a in args
    )


def _torch_launcher_class():
    import importlib

    for module in ("torch._inductor.runtime.static_triton_launcher",
                   "torch._inductor.runtime.static_cuda_launcher"):
        try:
            return importlib.import_module(module).StaticallyLaunchedCudaKernel
        except (ImportError, AttributeError):
            continue
    return None


def _static(compiled, device):
    """(`launch(grid0, stream, args)` through torch's static CUDA launcher, None), or (None,
    why not): torch has none, or it does not take this kernel (launch hooks set, scratch
    memory, other argument types)."""
    if LAUNCHER == "triton":
        return None, "launcher='triton'"
    cls = _torch_launcher_class()
    cubins = [p for name, p in getattr(compiled, "metadata_group", {}).items()
              if name.endswith(".cubin")]
    if cls is None or not cubins:
        return None, "no static CUDA launcher in torch" if cls is None else "no cubin"
    compiled._cubin_path = cubins[0]
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

    def launch(grid0, stream, args):
        run(grid0, 1, 1, stream, *[args[i] for i in runtime])

    launch.via, launch.kernel, launch.runtime = "torch", kernel, runtime  # runtime: packages
    return launch, None


def _triton_launch(compiled, why):
    """`launch(grid0, stream, args)` through the kernel's own launcher (`why`: not torch's)."""
    hooks = triton.knobs.runtime

    def launch(grid0, stream, args):
        enter = hooks.launch_enter_hook
        meta = None if enter is None else compiled.launch_metadata((grid0, 1, 1), stream, *args)
        compiled.run(grid0, 1, 1, stream, compiled.function, compiled.packed_metadata, meta,
                     enter, hooks.launch_exit_hook, *args)

    launch.via, launch.compiled = f"triton ({why})", compiled
    return launch


def _options(cfg, idx64, persistent):
    """The kernel's constexprs and Triton's compile options for one config."""
    xb, rb, warps = cfg
    return dict(XBLOCK=xb, RBLOCK=rb, IDX64=idx64, PERSISTENT=persistent, num_warps=warps,
                enable_fp_fusion=FP_FUSION, **CUDA_OPTIONS)


def warmup(cfg, args, grid0, idx64, persistent):
    """Compile one (config, specialisation) without launching it: here before a first launch,
    and in compile workers ahead of it (where `args` has dtypes in place of tensors)."""
    return _kernel.warmup(*args, grid=(grid0,), **_options(cfg, idx64, persistent))


def _from_worker(key):
    """Whether a compile worker built this (config, specialisation) into Triton's cache. A job
    no worker has started yet is cancelled (compiling here is sooner than waiting), as is one
    that failed or outlived the wait: then the first launch compiles it (and reports errors)."""
    future = PRECOMPILED.pop(key, None)
    if future is None or future.cancel():
        return False
    try:
        return future.result(timeout=600) is None
    except Exception:  # noqa: BLE001 - a worker died or hung: compiled here instead
        return False


def _args(tensors, sizes, xnumel, rnumel, err):
    """The kernel's runtime arguments, in its parameter order (index-check flags last)."""
    return (*tensors, *sizes, xnumel, rnumel) + ((err,) if err is not None else ())


def _job(cfg, args, xnumel, rnumel, idx64):
    """(key, warmup arguments) of launching `cfg` with `args`: one computation for the launch
    and the compile workers, whose compiles the launch finds by this key."""
    persistent = cfg[1] >= rnumel  # one block covers the reduction: the kernel runs it loop-free
    grid0 = (xnumel + cfg[0] - 1) // cfg[0]
    return (cfg, idx64, persistent, _specialisation(args)), (cfg, args, grid0, idx64, persistent)


def _compile(key, job, device):
    """The launch function of one (config, specialisation), compiled without launching."""
    if PACKAGED is not None:
        return PACKAGED.launch(key, device)
    ahead = _from_worker(key)
    compiled = warmup(*job)
    launch, why = _static(compiled, device)
    launch = launch or _triton_launch(compiled, why)
    launch.compiled, launch.ahead = compiled, ahead  # ahead: a worker compiled it (cache hit)
    return launch


def _launch(cfg, tensors, sizes, xnumel, rnumel, idx64, err):
    """Launch `cfg`; on GPUs, return what launched it: (launch function, grid, constexprs)."""
    xb, rb, _ = cfg
    args = _args(tensors, sizes, xnumel, rnumel, err)
    key, job = _job(cfg, args, xnumel, rnumel, idx64)
    _, _, grid0, _, persistent = job
    if DIRECT:
        device = _device()
        launch = _COMPILED.get((device, key))
        if launch is None:
            launch = _COMPILED[device, key] = _compile(key, job, device)
        tail = (xb, rb, idx64, persistent)
        stream = _stream(device)
        try:
            launch(grid0, stream, (*args, *tail))
        except RuntimeError as exc:  # torch's static launcher refused it: Triton's runs it
            if getattr(launch, "via", "") != "torch":
                raise
            launch = _COMPILED[device, key] = _triton_launch(launch.compiled, f"torch's: {exc}")
            launch(grid0, stream, (*args, *tail))
        return launch, grid0, tail
    if INTERPRET:
        # numpy computes the interpreted kernel: IEEE overflow, NaN and division by zero are
        # results here as on a GPU, not something to warn about
        import numpy

        with numpy.errstate(all="ignore"):
            _kernel[(grid0,)](*args, XBLOCK=xb, RBLOCK=rb, IDX64=idx64, PERSISTENT=persistent)
    else:
        _kernel[(grid0,)](*args, **_options(cfg, idx64, persistent))
    return None  # Triton's own launch: nothing to reuse


def _time_ms(run):
    """Mean milliseconds of `run` on the GPU: one warm launch, one timed launch to size the
    sample, then as many back-to-back launches as fill TUNE_BUDGET_MS (at most 50). Tuning is
    part of a first call: a few milliseconds per candidate rank configs whose kernels differ by
    10% or more, where a full benchmark (L2 flushes, repetitions) costs 15 ms each."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def batch(count):  # milliseconds of `count` launches back to back
        start.record()
        for _ in range(count):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    run()
    count = max(1, min(50, int(TUNE_BUDGET_MS / max(batch(1), 1e-3))))
    return batch(count) / count


def _tune(configs, tensors, sizes, xnumel, rnumel, idx64, err):
    # Benchmark on copies of written buffers so tuning never changes the caller's data.
    scratch = [t.clone() if i in WRITTEN else t for i, t in enumerate(tensors)]
    scratch_err = None if err is None else err.clone()

    def timed(c):
        return _time_ms(lambda: _launch(c, scratch, sizes, xnumel, rnumel, idx64, scratch_err))

    times = [timed(configs[0])]
    if times[0] < TUNE_MIN_MS:  # too short for another config to repay its compile
        _drop_jobs(configs[1:], tensors, sizes, xnumel, rnumel, idx64, err)
        return configs[0]
    times += [timed(c) for c in configs[1:]]
    return configs[times.index(min(times))]


def _drop_jobs(configs, tensors, sizes, xnumel, rnumel, idx64, err):
    """Cancel the compile workers' jobs for `configs`, which this process will not launch (a
    short kernel kept its heuristic config, or the tuning cache named the winner): workers
    take other kernels' jobs instead. A job a worker has started runs to its end."""
    if not PRECOMPILED:  # no compile workers, or every job already taken
        return
    args = _args(tensors, sizes, xnumel, rnumel, err)
    for cfg in configs:
        future = PRECOMPILED.pop(_job(cfg, args, xnumel, rnumel, idx64)[0], None)
        if future is not None:
            future.cancel()


@functools.cache
def _module_key():
    """The SHA-256 of this module's file and of the runtime, read once."""
    import hashlib

    with open(__file__, "rb") as src:
        return hashlib.sha256(src.read() + RUNTIME_DIGEST.encode()).hexdigest()


def _tuning_inputs(shape_class, tensors):
    """The tuning cache's key of `shape_class` (pow2 xnumel, pow2 rnumel, idx64) on this
    device: the kernel's module and runtime, the device's name and Triton's version."""
    return {"kernel": _module_key(), "device": _device_name(tensors[0].device),
            "triton": triton.__version__, "class": repr(shape_class)}


def _stored(entry, configs, tensors, sizes, xnumel, rnumel, idx64, err):
    """The winner a tuning cache entry holds (the heuristic if it names no candidate); the
    compile jobs of the configs it beat are cancelled."""
    best = tuple(json.loads((entry / "config.json").read_text()))
    best = best if best in configs else configs[0]
    _drop_jobs([c for c in configs if c != best], tensors, sizes, xnumel, rnumel, idx64, err)
    return best


def _remembered(shape_class, configs, tensors, sizes, xnumel, rnumel, idx64, err):
    """The winner an earlier process stored in TUNING_CACHE for `shape_class`, or None."""
    entry = None if TUNING_CACHE is None else TUNING_CACHE.lookup(
        "triton-tuning", _tuning_inputs(shape_class, tensors))
    if entry is None:
        return None
    return _stored(entry, configs, tensors, sizes, xnumel, rnumel, idx64, err)


def _tuned(shape_class, configs, tensors, sizes, xnumel, rnumel, idx64, err):
    """The fastest candidate for `shape_class` on this device: benchmarked once, then read from
    TUNING_CACHE by later processes, which compile only the winner."""
    if TUNING_CACHE is None:
        return _tune(configs, tensors, sizes, xnumel, rnumel, idx64, err)

    def build(tmp):
        best = _tune(configs, tensors, sizes, xnumel, rnumel, idx64, err)
        (tmp / "config.json").write_text(json.dumps(list(best)))

    entry = TUNING_CACHE.entry("triton-tuning", _tuning_inputs(shape_class, tensors), build)
    return _stored(entry, configs, tensors, sizes, xnumel, rnumel, idx64, err)


def _candidates(xnumel, rnumel, cuda):
    """The configs a first launch may compile: all candidates where it tunes, else the heuristic."""
    configs = _configs(xnumel, rnumel)
    small = xnumel * max(rnumel, 1) < TUNE_MIN_NUMEL
    return configs if AUTOTUNE and cuda and not (INTERPRET or small) else configs[:1]


# Tuning in the background: where compile workers build every other candidate of a shape class,
# its launches run the heuristic config until those compiles have all finished; the first launch
# after that benchmarks the candidates (loading each from Triton's cache) and keeps the fastest.
# A first call then waits for one compile per kernel, not for its slowest candidate and a
# benchmark. Shape class -> (configs, the candidates' compile Futures).
_PENDING = {}


def _compiling(configs, tensors, sizes, xnumel, rnumel, idx64, err):
    """The compile workers' Futures for configs[1:], or None where a candidate has no job (this
    process would compile it: tuning now costs the same as later)."""
    if not PRECOMPILED:  # no compile workers, or none of their jobs left
        return None
    args = _args(tensors, sizes, xnumel, rnumel, err)
    futures = [PRECOMPILED.get(_job(c, args, xnumel, rnumel, idx64)[0]) for c in configs[1:]]
    return None if None in futures else futures


def _tune_ready(key):
    """Whether the shape class `key` waits for tuning and all its candidates have compiled (and
    no CUDA graph is being captured: a benchmark synchronises)."""
    pending = _PENDING.get(key)
    return (pending is not None and all(f.done() for f in pending[1])
            and not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()))


def _pick(tensors, sizes, xnumel, rnumel, idx64, err):
    device = tensors[0].device
    key = (device, _pow2(xnumel), _pow2(rnumel), idx64)
    best = _BEST.get(key) if PACKAGED is None else PACKAGED.config(key[1:], xnumel, rnumel)
    if best is not None and not (_PENDING and _tune_ready(key)):
        return best
    shape = (tensors, sizes, xnumel, rnumel, idx64, err)
    if best is not None:  # every candidate has compiled: benchmark them now
        best = _tuned(key[1:], _PENDING.pop(key)[0], *shape)
    else:
        configs = _candidates(xnumel, rnumel, device.type == "cuda")
        best = configs[0] if len(configs) == 1 else _remembered(key[1:], configs, *shape)
        if best is None and (futures := _compiling(configs, *shape)) is not None:
            best, _PENDING[key] = configs[0], (configs, futures)
        best = best or _tuned(key[1:], configs, *shape)
    _BEST[key] = best
    return best


def _jobs(args, xnumel, rnumel, idx64):
    """(key, warmup arguments) of each config the first launch with `args` (dtypes in place of
    tensors) may compile, heuristic first: what compile workers can build ahead of it."""
    if not DIRECT or xnumel <= 0:
        return []
    return [_job(cfg, args, xnumel, rnumel, idx64) for cfg in _candidates(xnumel, rnumel, True)]


def _aligned(tensors, err):
    for t in tensors if err is None else (*tensors, err):  # noqa: SIM110 - all() is slower
        if t.data_ptr() & 15:
            return False
    return True


def _run(tensors, sizes, xnumel, rnumel, idx64, err):
    if DIRECT:
        device = _device()
        if (ready := _READY.get((device, sizes))) is not None and _aligned(tensors, err):
            launch, grid0, tail = ready
            launch(grid0, _stream(device), (*_args(tensors, sizes, xnumel, rnumel, err), *tail))
            return
    try:
        with _LAUNCH_LOCK:  # launcher.LAUNCH_LOCK: the interpreter and tuning are not thread-safe
            cfg = _pick(tensors, sizes, xnumel, rnumel, idx64, err)
            ready = _launch(cfg, tensors, sizes, xnumel, rnumel, idx64, err)
    except _SOURCE_ERRORS as exc:
        from polyduct.errors import KernelCompileError

        with open(__file__) as src:
            text = src.read()
        raise KernelCompileError("triton", NAME, __file__, f"{exc}\n--- source ---\n{text}") from exc
    if DIRECT and not _PENDING and _aligned(tensors, err):  # no tuning left to run
        if len(_READY) >= READY_MAX:
            _READY.clear()
        _READY[device, sizes] = ready


def _raise_index_error(err):
    from polyduct.errors import KernelIndexError

    flags = err.view(-1, 3)
    slot = int(torch.nonzero(flags[:, 0]).flatten()[0])
    if slot in ASSERTS:
        from polyduct.errors import KernelAssertError

        raise KernelAssertError(NAME, "triton", ASSERTS[slot])
    raise KernelIndexError(NAME, CHECKED[slot], int(flags[slot, 1]), int(flags[slot, 2]))
