"""`TritonBackend`: KernelSpec -> Triton module source -> cached file -> launcher callable."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, final

import torch
import triton

from polyduct.cache import Cache, default_cache, import_module_file
from polyduct.errors import InvalidOption, KernelCompileError, PackagingUnsupported
from polyduct.kernel import Capabilities, KernelBackend, KernelFn, KernelSource, KernelSpec
from polyduct_triton import package, precompile
from polyduct_triton.codegen import generate
from polyduct_triton.ops import UNSUPPORTED, TritonOps

_DTYPES = frozenset(
    {
        torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
        torch.float16, torch.bfloat16, torch.float32, torch.float64,
    }
)


@dataclass(frozen=True, slots=True)
class TritonOptions:
    """Options of the Triton backend: `interpret` runs kernels in Triton's CPU interpreter;
    `autotune=False` launches every kernel with its heuristic config (one Triton compile per
    kernel instead of one per candidate: faster to compile, possibly slower to run).
    `launcher="triton"` launches through Triton's own launcher, never torch's static CUDA
    launcher (`POLYDUCT_TRITON_LAUNCHER`); `compile_workers`: how many processes compile kernels
    ahead of their launch (`POLYDUCT_TRITON_COMPILE_WORKERS`; None: the CPUs less one).
    `index_errors` (`POLYDUCT_TRITON_INDEX_ERRORS`): what a failed index check does on a GPU.
    `"assert"`: a device-side assert, as eager's and Inductor's kernels do, and no waiting for
    the GPU (the CUDA context is lost when it fires); `"raise"`: the launch waits for the kernel
    and raises `KernelIndexError` naming the kernel, the buffer, the index and the size. Under
    the interpreter kernels always raise."""

    interpret: bool = False
    autotune: bool = True
    cache: Cache | None = field(default=None, compare=False)
    launcher: str = "auto"
    compile_workers: int | None = None
    index_errors: str = "assert"

    def __post_init__(self) -> None:
        for name in ("interpret", "autotune"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOption("triton", name, getattr(self, name), "a bool")
        if self.launcher not in ("auto", "triton"):
            raise InvalidOption("triton", "launcher", self.launcher, "'auto' or 'triton'")
        if self.index_errors not in ("assert", "raise"):
            raise InvalidOption("triton", "index_errors", self.index_errors, "'assert' or 'raise'")
        workers = self.compile_workers
        if workers is not None and (not isinstance(workers, int) or workers < 0):
            raise InvalidOption("triton", "compile_workers", workers, "a worker count >= 0")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> TritonOptions:
        """Build options from a plain mapping (an environment variable's text included);
        unknown keys are refused."""
        known = {"interpret", "autotune", "cache", "launcher", "compile_workers", "index_errors"}
        for key in options:
            if key not in known:
                raise InvalidOption("triton", key, options[key], f"one of {sorted(known)}")
        opts = dict(options)
        workers = opts.get("compile_workers")
        if isinstance(workers, str):
            try:
                opts["compile_workers"] = int(workers.strip())
            except ValueError:
                raise InvalidOption("triton", "compile_workers", workers, "a worker count") from None
        return cls(**opts)


# The longest dim a generated sort network handles; past it sort and topk are library calls. On
# an H100 a first call of a 32 x n descending sort, stable sort or topk(5) (fresh caches, compile
# included) took 4.6-9.6 s for n = 16 to 128 and over 60 s for n = 256, each of the three (LLVM
# and ptxas; issue 28 saw 171 s at 300 and no end at 513); the interpreter refuses blocks past
# 1024 elements.
SORT_LIMITS = {"cuda": 128, "cpu": 1024}


NOT_INTERPRETING = (
    "the kernel is for CPU tensors (or interpret=True), which Triton runs only in its "
    "interpreter, and this process runs Triton without it: set TRITON_INTERPRET=1 in the "
    "environment before the program starts, or compile CPU tensors with kernels='cpp'"
)


def interpreting() -> bool:
    """Whether Triton's `jit` makes interpreted kernels in this process (TRITON_INTERPRET=1)."""
    return bool(triton.knobs.runtime.interpret)  # (knobs since Triton 3.4; this plugin needs 3.6)


@final
class TritonBackend(KernelBackend):
    """Triton kernels for CUDA tensors, or CPU tensors under the Triton interpreter."""

    name: ClassVar[str] = "triton"
    caps: ClassVar[Capabilities] = Capabilities(
        devices=frozenset({"cuda", "cpu"}),
        dtypes=_DTYPES,
        unsupported=UNSUPPORTED,
        sort_limits=SORT_LIMITS,
    )
    ops_cls: ClassVar[type] = TritonOps

    def __init__(self, options: TritonOptions | None = None) -> None:
        self.options = options or TritonOptions()

    def codegen(self, spec: KernelSpec) -> KernelSource:
        # CPU tensors can only run in the interpreter, whatever the options say.
        interpret = self.options.interpret or not spec.device.startswith("cuda")
        source = generate(spec, TritonOps, interpret, self.options.autotune)
        return KernelSource(spec.name, self.name, source)

    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        loaded = []
        for src in sources:
            path, name = self._write(src)
            if "\nINTERPRET = True\n" in src.source and not interpreting():
                raise KernelCompileError("triton", src.name, str(path), NOT_INTERPRETING)
            # compile workers start on this kernel's heuristic config while this process imports
            # it and writes the next kernel; tuning candidates queue behind every heuristic config
            workers = self.options.compile_workers
            early = precompile.ahead(path, name, workers) if _compiles_ahead(src.source) else None
            module = import_module_file(path, name)
            module.RUNTIME.tuning_cache = self._cache()  # tuned configs outlive the process
            module.RUNTIME.launcher = self.options.launcher
            module.RUNTIME.index_errors = self.options.index_errors
            precompile.attach(module, early)
            loaded.append((module, path))
        precompile.submit(loaded, slice(1, None), self.options.compile_workers)
        return {src.name: m.launch for src, (m, _) in zip(sources, loaded, strict=True)}

    def settle(self) -> None:
        precompile.settle()

    def package(self, sources: Sequence[KernelSource]) -> dict[str, bytes]:
        """Each kernel's configs and compiled cubins, as the program's run here left its module
        (polyduct_triton.package)."""
        modules = []
        for src in sources:
            module = sys.modules.get(_module_name(src))
            if module is None:
                raise PackagingUnsupported(self.name, f"kernel {src.name!r} is not loaded here")
            modules.append((src, module))
        return package.package_kernels(modules)

    def load_packaged(self, sources: Sequence[KernelSource], files: Path) -> dict[str, KernelFn]:
        return package.load_packaged_kernels(
            sources, files, self.options.launcher, self.options.index_errors
        )

    def _cache(self) -> Cache:
        return self.options.cache or default_cache()

    def _write(self, src: KernelSource) -> tuple[Path, str]:
        """The module file of `src` in the cache, and the name to import it as."""
        cache = self._cache()
        device = src.source.split("\n", 1)[0].rsplit(" on ", 1)[-1]
        key = {
            "source": src.source,
            "triton": triton.__version__,
            "torch": torch.__version__,
            "device": device,
            "device_name": _device_name(device),
        }

        def build(tmp: Path) -> None:
            (tmp / "kernel.py").write_text(src.source)

        entry = cache.entry("triton", key, build)
        return entry / "kernel.py", _module_name(src)


def _module_name(src: KernelSource) -> str:
    """The name `load` imports the module of `src` as (the last import's is in sys.modules)."""
    return f"polyduct_triton_k_{hashlib.sha256(src.source.encode()).hexdigest()[:16]}"


def _compiles_ahead(source: str) -> bool:
    """Whether compile workers can build a generated module's first config before its launch:
    a compiled kernel (not interpreted) whose sizes are static (its launcher's constants)."""
    return "\nINTERPRET = False\n" in source and "\nSTATIC_SIZES = True\n" in source


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return device
