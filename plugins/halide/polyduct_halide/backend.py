"""`HalideBackend`: KernelSpec -> pipeline module source -> cached, JIT-compiled callable."""

from __future__ import annotations

import functools
import hashlib
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Final

import halide as hl
import torch

import polyduct_halide
from polyduct import state
from polyduct.cache import default_cache, import_module_file
from polyduct.errors import InvalidOption, KernelCompileError
from polyduct.kernel import Capabilities, KernelBackend, KernelFn, KernelSource, KernelSpec
from polyduct_halide import aot
from polyduct_halide.codegen import generate
from polyduct_halide.launch import make_aot_kernel, make_kernel
from polyduct_halide.ops import HalideOps
from polyduct_halide.runtime import AUTOSCHEDULERS
from polyduct_halide.values import DTYPES

SCHEDULES: Final = ("default", "none", *AUTOSCHEDULERS)
# Schedules that do not apply to one kind of device (see docs/backends/halide.md).
NOT_APPLICABLE: Final = {
    "cpu": {"Anderson2021": "schedules GPU targets only"},
    "cuda": {
        "Adams2019": "schedules CPU targets only",
        "none": "runs every stage on the host, which has no access to CUDA tensors' memory",
    },
}
# cuda_capability features Halide 21 knows, newest first: a device gets the newest it supports.
_CUDA_CAPABILITIES: Final = (86, 80, 75, 70, 61, 50, 35, 32, 30)
_DEVICE = re.compile(r'^DEVICE = "(\w+)"$', re.MULTILINE)
_SOURCE_FILE = "pipeline.py"
# Loaded kernels by cache key digest: a second load in the process neither JITs nor dlopens.
_LOADED = state.Slot("polyduct_halide.kernels", dict[str, KernelFn])


@dataclass(frozen=True, slots=True)
class HalideOptions:
    """Options of the Halide backend (keys `schedule`/`halide_schedule`, `target`)."""

    schedule: str = "default"
    target: str = "host"
    strict_float: bool = True
    aot: bool = True  # shared libraries in the polyduct cache (JIT when False or without cc)

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise InvalidOption("halide", "schedule", self.schedule, " or ".join(SCHEDULES))
        try:
            hl.Target(self._base_target())
        except Exception as err:  # Halide reports a bad target string as a generic error
            raise InvalidOption("halide", "target", self.target, "a Halide target") from err

    def _base_target(self) -> str:
        return "host" if self.target == "host" else self.target

    def check_schedule(self, device: str) -> None:
        """Refuse a schedule that does not apply to kernels on `device` (cpu or cuda)."""
        reasons = NOT_APPLICABLE["cuda" if device.startswith("cuda") else "cpu"]
        if self.schedule in reasons:
            usable = [s for s in SCHEDULES if s not in reasons]
            raise InvalidOption(
                "halide",
                "schedule",
                self.schedule,
                f"one of {usable} for kernels on {device} "
                f"({self.schedule} {reasons[self.schedule]})",
            )

    def halide_target(self, device: str = "cpu") -> hl.Target:
        """The target for kernels on `device`: the host (or `target`); for a CUDA device with the
        CUDA feature and the newest cuda_capability the device has (unless `target` names
        cuda); strict IEEE floats unless disabled."""
        if device.startswith("cuda"):
            base = hl.get_host_target() if self.target == "host" else hl.Target(self.target)
            if not base.has_feature(hl.TargetFeature.CUDA):
                base = base.with_feature(hl.TargetFeature.CUDA).with_feature(_capability(device))
        elif self.target == "host":
            base = hl.get_jit_target_from_environment()
        else:
            base = hl.Target(self.target)
        return base.with_feature(hl.TargetFeature.StrictFloat) if self.strict_float else base

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> HalideOptions:
        """Build from a compile-options mapping, refusing unknown keys."""
        known = {
            "schedule": "schedule",
            "halide_schedule": "schedule",
            "target": "target",
            "halide_target": "target",
            "strict_float": "strict_float",
            "aot": "aot",
            "halide_aot": "aot",
        }
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise InvalidOption("halide", key, value, f"one of {sorted(known)}")
            values[known[key]] = value
        return cls(**values)


class HalideBackend(KernelBackend):
    """Fused kernels as Halide pipelines, JIT-compiled for the host through the halide package."""

    name: ClassVar[str] = "halide"
    # a pipeline realises its outputs one after another: no output overwrites an input in place
    caps: ClassVar[Capabilities] = Capabilities(
        devices=frozenset({"cpu", "cuda"}), dtypes=DTYPES, inplace=False, prologues=False
    )
    ops_cls: ClassVar[type] = HalideOps

    def __init__(self, options: HalideOptions | None = None) -> None:
        self.options = options or HalideOptions()

    def codegen(self, spec: KernelSpec) -> KernelSource:
        self.options.check_schedule(spec.device)
        device = torch.device(spec.device).type
        text = generate(spec, self.options.schedule, self.options.strict_float, device)
        return KernelSource(spec.name, self.name, text)

    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        return {src.name: self._load_one(src) for src in sources}

    def _key(self, source: KernelSource, target: hl.Target, device: str) -> dict[str, str]:
        """Cache key inputs: the source (which names the schedule and the device), versions,
        the plugin's own modules that the source imports (`hlmath`, `runtime`, ...), the target
        (with its cuda_capability) and the device."""
        return {
            "source": source.source,
            "halide": aot.halide_version(),
            "polyduct_halide": polyduct_halide.__version__,
            "modules": _modules_digest(),
            "target": str(target),
            "device": device,
            "torch": torch.__version__,
        }

    def _located(self, source: KernelSource) -> tuple[str, hl.Target, dict[str, str], str]:
        """The kernel's device, Halide target, cache key inputs and their digest."""
        found = _DEVICE.search(source.source)
        device = found.group(1) if found else "cpu"
        target = self.options.halide_target(device)
        key = self._key(source, target, device)
        return device, target, key, hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()

    def _load_one(self, source: KernelSource) -> KernelFn:
        device, target, key, digest = self._located(source)
        compiler = aot.compiler() if self.options.aot or device == "cuda" else None
        if compiler is None and device == "cuda":
            raise KernelCompileError(
                self.name, source.name, "", "CUDA kernels need a C compiler (set CC or install cc)"
            )
        memo = f"{digest}:{compiler or 'jit'}"
        loaded = _LOADED.get()
        if memo in loaded:
            return loaded[memo]
        path = self._source_entry(source, key) / _SOURCE_FILE
        module = import_module_file(path, f"polyduct_halide_pipeline_{digest[:24]}")

        def compile_for(schedule: str) -> KernelFn:
            try:
                if compiler is None:
                    return make_kernel(module, self._jit(module, target, schedule), self.name)
                runtime = aot.runtime(target)  # loaded globally before a kernel library binds
                entry, fn = self._library(module, key, digest, compiler, target, schedule)
                return make_aot_kernel(module, aot.load_function(entry, fn), runtime, self.name)
            except Exception as err:  # Halide raises HalideError or RuntimeError
                raise KernelCompileError(
                    self.name,
                    source.name,
                    str(path),
                    f"{type(err).__name__}: {err}\npipeline:\n{source.source}",
                ) from err

        if module.SCHEDULE not in AUTOSCHEDULERS:
            kernel = compile_for(module.SCHEDULE)
        else:
            try:
                kernel = _with_fallback(
                    compile_for(module.SCHEDULE), lambda: compile_for("default")
                )
            except KernelCompileError as err:  # Halide refused the autoscheduler's schedule
                reason = str(err.__cause__ or err).splitlines()[0]
                warnings.warn(
                    f"halide: kernel {source.name!r}: the {module.SCHEDULE} schedule was refused "
                    f"({reason}); using the default schedule",
                    RuntimeWarning,
                    stacklevel=2,
                )
                kernel = compile_for("default")
        loaded[memo] = kernel
        return kernel

    def _source_entry(self, source: KernelSource, key: dict[str, str]) -> Path:
        """The cache entry holding the kernel's pipeline module."""
        return default_cache().entry("halide", key, _writer(source.source))

    def _jit(self, module: ModuleType, target: hl.Target, schedule: str) -> Any:
        pipeline, arguments = module.build(target, schedule)
        return pipeline.compile_to_callable(arguments, target)

    def _library(
        self,
        module: ModuleType,
        key: dict[str, str],
        digest: str,
        compiler: str,
        target: hl.Target,
        schedule: str,
    ) -> tuple[Path, str]:
        """The cache entry holding the pipeline's shared library for `schedule`, and its
        entry point's name."""
        fn_name = f"polyduct_halide_{digest[:24]}_{schedule.lower()}"

        def build(directory: Path) -> None:
            pipeline, arguments = module.build(target, schedule)
            aot.compile_library(pipeline, arguments, fn_name, target, directory)

        inputs = {**key, "artifact": aot.LIBRARY, "function": fn_name, "cc": compiler}
        return default_cache().entry("halide-aot", inputs, build), fn_name

    def package(self, sources: Sequence[KernelSource]) -> dict[str, bytes]:
        """Each kernel's pipeline module and shared libraries, and the Halide runtime."""
        from polyduct_halide.package import package_kernels

        return package_kernels(self, sources)

    def load_packaged(self, sources: Sequence[KernelSource], files: Path) -> dict[str, KernelFn]:
        from polyduct_halide.package import load_packaged_kernels

        return load_packaged_kernels(self, sources, files)


# Halide's buffer checks at pipeline entry, before anything is computed or written.
_BOUNDS_ERROR = re.compile(r"is accessed at -?\d+, which is (before the min|beyond the max)")


# a fact of the installed package, fixed while the process runs: not process state
@functools.cache
def _modules_digest() -> str:
    """A digest of this package's Python and C sources: generated pipelines import the helper
    modules and the CUDA runtime links the glue, so a change to either must miss the cache."""
    digest = hashlib.sha256()
    root = Path(polyduct_halide.__file__).parent
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".c", ".h")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _with_fallback(kernel: KernelFn, fallback: Callable[[], KernelFn]) -> KernelFn:
    """`kernel`, rerun with the default schedule when its buffer checks refuse the call.

    Autoschedulers tile for the estimated sizes (symbolic sizes count as 1024); on smaller
    tensors their tiles reach outside the buffers, which Halide refuses at entry, before any
    element is computed or written. The default-schedule kernel is compiled on first need.
    """
    spare: list[KernelFn] = []

    def guarded(*args: Any) -> None:
        try:
            kernel(*args)
        except KernelCompileError as err:
            if not _BOUNDS_ERROR.search(str(err)):
                raise
            if not spare:
                spare.append(fallback())
            spare[0](*args)

    guarded.__name__ = getattr(kernel, "__name__", "kernel")
    return guarded


def _capability(device: str) -> hl.TargetFeature:
    """The newest cuda_capability feature Halide knows that `device` has."""
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    have = 10 * major + minor
    best = next((c for c in _CUDA_CAPABILITIES if c <= have), _CUDA_CAPABILITIES[-1])
    return getattr(hl.TargetFeature, f"CUDACapability{best}")


def _writer(text: str) -> Any:
    def write(directory: Path) -> None:
        (directory / _SOURCE_FILE).write_text(text)

    return write


def factory(options: Mapping[str, Any]) -> HalideBackend:
    """Build the backend from compile options (see `HalideOptions.from_mapping`)."""
    return HalideBackend(HalideOptions.from_mapping(options))
