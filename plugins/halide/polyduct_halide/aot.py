"""Ahead-of-time pipelines: a shared library per kernel in the polyduct cache, called through ctypes.

A pipeline is compiled to an object file with the `NoRuntime` target feature and linked into
`libkernel.so`; the Halide runtime (thread pool, error reporting) is one shared library per
target, loaded once per process with `RTLD_GLOBAL` so every kernel library binds to it. A process
that finds the library in the cache therefore neither builds the Halide pipeline nor runs LLVM.

The C entry point is `int fn(halide_buffer_t *inputs..., int32_t sizes..., halide_buffer_t
*outputs...)`; buffers are 1-D views over a tensor's memory from its first element (as the JIT
path), described by `HalideBuffer` below (the layout of `halide_buffer_t` in HalideRuntime.h).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final

import halide as hl
import torch

from polyduct.cache import default_cache
from polyduct_halide import cuda

LIBRARY: Final = "libkernel.so"
_RUNTIME: Final = "libhalide_runtime.so"


class HalideDimension(ctypes.Structure):
    """`halide_dimension_t`."""

    _fields_ = [
        ("min", ctypes.c_int32),
        ("extent", ctypes.c_int32),
        ("stride", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    ]


class HalideType(ctypes.Structure):
    """`halide_type_t`: code (0 int, 1 uint, 2 float), bits, lanes."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class HalideBuffer(ctypes.Structure):
    """`halide_buffer_t`."""

    _fields_ = [
        ("device", ctypes.c_uint64),
        ("device_interface", ctypes.c_void_p),
        ("host", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("type", HalideType),
        ("dimensions", ctypes.c_int32),
        ("dim", ctypes.POINTER(HalideDimension)),
        ("padding", ctypes.c_void_p),
    ]


# Element types as the pipelines store them (values.py): bf16 as int16 bits, bool as uint8.
_TYPES: Final[dict[torch.dtype, tuple[int, int]]] = {
    torch.float16: (2, 16),
    torch.bfloat16: (0, 16),
    torch.float32: (2, 32),
    torch.float64: (2, 64),
    torch.int8: (0, 8),
    torch.int16: (0, 16),
    torch.int32: (0, 32),
    torch.int64: (0, 64),
    torch.uint8: (1, 8),
    torch.bool: (1, 8),
}
_SCRATCH = ctypes.create_string_buffer(8)  # host memory of empty tensors (never read or written)


def buffer(
    tensor: torch.Tensor, dtype: torch.dtype, device_interface: int = 0
) -> tuple[HalideBuffer, HalideDimension]:
    """A 1-D buffer of the kernel's `dtype` over the memory `tensor` addresses from its first
    element (no copy; like a C kernel's pointer, the memory is read as the kernel declares it).

    A CUDA tensor's memory is the buffer's device memory (`device_interface`: the CUDA runtime's,
    marked device-dirty, no host memory). The dimension is returned too: the buffer points at
    it, so it must live as long.
    """
    code, bits = _TYPES[dtype]
    if tensor.numel() == 0:
        extent = 1
        address = cuda.scratch(tensor.device) if tensor.is_cuda else ctypes.addressof(_SCRATCH)
    else:
        address = tensor.data_ptr()
        extent = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    dim = HalideDimension(0, extent, 1, 0)  # min 0: GPU kernels use it as a zero (runtime.nofuse)
    kind = HalideType(code, bits, 1)
    if tensor.is_cuda:
        buf = HalideBuffer(
            address, device_interface, None, cuda.DEVICE_DIRTY, kind, 1, ctypes.pointer(dim), None
        )
    else:
        buf = HalideBuffer(0, None, address, 0, kind, 1, ctypes.pointer(dim), None)
    return buf, dim


def compiler() -> str | None:
    """The C compiler that links kernel libraries: `$CC`, else `cc` on the PATH, else None."""
    return shutil.which(os.environ.get("CC", "cc"))


def _link(objects: Sequence[Path], out: Path, libraries: Sequence[str] = ()) -> None:
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (set CC or install cc) to link Halide objects")
    cmd = [cc, "-shared", "-fPIC", "-o", str(out), *map(str, objects), *libraries]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")


def aot_target(target: hl.Target) -> hl.Target:
    """`target` for object files: without the JIT feature, without the runtime."""
    base = target.without_feature(hl.TargetFeature.JIT)
    return base.with_feature(hl.TargetFeature.NoRuntime)


def compile_library(
    pipeline: hl.Pipeline, arguments: list[Any], fn_name: str, target: hl.Target, directory: Path
) -> None:
    """Compile `pipeline` to `directory/libkernel.so` exporting `fn_name`."""
    obj = directory / "kernel.o"
    pipeline.compile_to(
        {hl.OutputFileType.object: str(obj)}, arguments, fn_name, aot_target(target)
    )
    _link([obj], directory / LIBRARY)
    obj.unlink()


# The runtimes are loaded RTLD_GLOBAL and hold the error handler, which the process cannot undo:
# they and their messages stay module state, outside `polyduct.state` (a reset keeps them).
_MESSAGES: list[str] = []


class Runtime:
    """The Halide runtime library of one target, loaded globally; collects error messages."""

    def __init__(self, path: Path, gpu: bool = False) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL)
        # One list for every runtime: with a host and a CUDA runtime loaded, the symbols both
        # export (halide_error among them) bind to the first one loaded, whose handler reports.
        self.messages = _MESSAGES
        handler_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
        self._handler = handler_t(self._on_error)  # kept alive as long as the runtime
        self.lib.halide_set_error_handler.restype = ctypes.c_void_p
        self.lib.halide_set_error_handler.argtypes = [handler_t]
        self.lib.halide_set_error_handler(self._handler)
        # the CUDA runtime's device interface (0: a host-only runtime)
        self.device_interface = cuda.install(self.lib) if gpu else 0

    def _on_error(self, _user_context: int | None, message: bytes | None) -> None:
        self.messages.append((message or b"").decode(errors="replace"))


_RUNTIMES: dict[str, Runtime] = {}


def runtime(target: hl.Target) -> Runtime:
    """The process's runtime for `target`, built into the cache on first use."""
    base = runtime_target(target)
    key = str(base)
    if key in _RUNTIMES:
        return _RUNTIMES[key]

    def build(directory: Path) -> None:
        obj = directory / "runtime.o"
        hl.compile_standalone_runtime(str(obj), base)
        objects = [obj]
        if base.has_gpu_feature():  # context and stream hooks: see cuda.py
            objects.append(directory / "cuda_glue.c")
            objects[-1].write_text(cuda.GLUE)
        _link(objects, directory / _RUNTIME, ["-lpthread", "-ldl", "-lm"])
        for path in objects:
            path.unlink()

    entry = default_cache().entry(
        "halide-runtime", {"halide": halide_version(), "target": key, **_glue(base)}, build
    )
    _RUNTIMES[key] = Runtime(entry / _RUNTIME, base.has_gpu_feature())
    return _RUNTIMES[key]


def runtime_target(target: hl.Target) -> hl.Target:
    """The target of `target`'s runtime library (`_RUNTIMES` holds one per such target)."""
    # The runtime's own code does not depend on strict floats (and Halide refuses to build it so).
    return target.without_feature(hl.TargetFeature.JIT).without_feature(
        hl.TargetFeature.StrictFloat
    )


def packaged_runtime(path: Path, target: str, gpu: bool) -> Runtime:
    """The runtime for `target` (a `runtime_target` string): the process's own if it has one
    (two runtimes would bind their shared symbols to the first), else the one at `path`."""
    if target not in _RUNTIMES:
        _RUNTIMES[target] = Runtime(path, gpu)
    return _RUNTIMES[target]


def _glue(target: hl.Target) -> dict[str, str]:
    return {"glue": cuda.GLUE} if target.has_gpu_feature() else {}


# memo of a fact about the installed Halide (a stat at most): not process state
@functools.cache
def halide_version() -> str:
    """Halide's version, for cache keys: its distribution's, else (a Halide built from source
    and put on the path, with no package metadata) the name, size and modification time of its
    extension modules, so a rebuilt Halide still misses the cache."""
    try:
        return version("halide")
    except PackageNotFoundError:
        found = sorted(Path(hl.__file__).parent.glob("*.so"))
        stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in found]
        return "unpackaged " + " ".join(f"{n}:{size}:{mtime}" for n, size, mtime in stats)


def load_function(directory: Path, fn_name: str) -> Any:
    """The entry point `fn_name` of `directory/libkernel.so` (loaded locally)."""
    lib = ctypes.CDLL(str(directory / LIBRARY))
    fn = getattr(lib, fn_name)
    fn.restype = ctypes.c_int
    return fn
