"""AOT packages of Halide kernels: each pipeline's shared libraries and the Halide runtime.

`package_kernels` builds (or finds in the cache) every kernel's library as an ahead-of-time load
does, for its schedule and, where an autoscheduler picked it, for the default schedule its
buffer-check fallback runs; `load_packaged_kernels` loads them with no compiler: the pipeline
module (for its argument layout) is imported from the kernel source, the runtime is loaded once
per target (the process's own where it has one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from polyduct.cache import import_module_file
from polyduct.errors import PackagingUnsupported
from polyduct.kernel import KernelFn, KernelSource
from polyduct_halide import aot
from polyduct_halide.launch import make_aot_kernel
from polyduct_halide.runtime import AUTOSCHEDULERS

if TYPE_CHECKING:
    from polyduct_halide.backend import HalideBackend

INDEX: Final = "kernels.json"


def package_kernels(backend: HalideBackend, sources: Sequence[KernelSource]) -> dict[str, bytes]:
    """The files `load_packaged_kernels` needs, by relative path."""
    compiler = aot.compiler()
    if not backend.options.aot or compiler is None:  # JIT kernels live in memory only
        raise PackagingUnsupported(backend.name)
    files: dict[str, bytes] = {}
    index: dict[str, Any] = {}
    for src in sources:
        _, target, key, digest = backend._located(src)
        module = _module(backend._source_entry(src, key) / "pipeline.py", digest)
        schedules = [module.SCHEDULE]
        if module.SCHEDULE in AUTOSCHEDULERS:
            schedules.append("default")
        runtime = aot.runtime(target)
        runtime_key = str(aot.runtime_target(target))
        runtime_file = f"runtime-{hashlib.sha256(runtime_key.encode()).hexdigest()[:16]}.so"
        files[runtime_file] = runtime.path.read_bytes()
        entries = {}
        for schedule in schedules:
            entry, fn_name = backend._library(module, key, digest, compiler, target, schedule)
            files[f"{src.name}/{schedule}/{aot.LIBRARY}"] = (entry / aot.LIBRARY).read_bytes()
            entries[schedule] = fn_name
        index[src.name] = {
            "functions": entries,
            "runtime": runtime_file,
            "runtime_target": runtime_key,
            "gpu": target.has_gpu_feature(),
        }
    files[INDEX] = json.dumps(index, sort_keys=True).encode()
    return files


def load_packaged_kernels(
    backend: HalideBackend, sources: Sequence[KernelSource], files: Path
) -> dict[str, KernelFn]:
    """The kernels of `sources` from the packaged files under `files` (no compiler, no LLVM)."""
    from polyduct_halide.backend import _with_fallback

    index = json.loads((files / INDEX).read_text())
    kernels: dict[str, KernelFn] = {}
    for src in sources:
        info = index[src.name]
        runtime = aot.packaged_runtime(files / info["runtime"], info["runtime_target"], info["gpu"])
        path = files / src.name / "pipeline.py"
        path.write_text(src.source)
        digest = hashlib.sha256(src.source.encode()).hexdigest()
        module = _module(path, digest)
        made = {
            schedule: make_aot_kernel(
                module, aot.load_function(files / src.name / schedule, fn), runtime, backend.name
            )
            for schedule, fn in info["functions"].items()
        }
        kernel = made[module.SCHEDULE]
        if "default" in made and module.SCHEDULE != "default":
            kernel = _with_fallback(kernel, _returning(made["default"]))
        kernels[src.name] = kernel
    return kernels


def _module(path: Path, digest: str) -> Any:
    return import_module_file(path, f"polyduct_halide_packaged_{digest[:24]}")


def _returning(kernel: KernelFn) -> Any:
    def get() -> KernelFn:
        return kernel

    return get
