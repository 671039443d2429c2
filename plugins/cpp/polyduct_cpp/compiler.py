"""Compile one translation unit of kernels into a shared library through `polyduct.cache`.

The cache key holds the full source, the kernel header's text, the compiler's resolved path and
file identity (so a warm hit never runs the compiler), the flags and the host CPU (for -march).
A failed compile keeps the source beside the cache and raises `KernelCompileError` naming the kernel
at the first error line.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from polyduct import state
from polyduct.cache import Cache
from polyduct.errors import KernelCompileError
from polyduct_cpp.options import CppOptions

INCLUDE_DIR = Path(__file__).parent / "include"
SOURCE_NAME = "kernels.cpp"
LIBRARY_NAME = "kernels.so"


_COMPILERS = state.Slot("polyduct_cpp.compilers", dict[str, str])  # compiler -> its identity


def compiler_identity(compiler: str) -> str:
    """Resolved path, size and mtime of the compiler binary (no process is started); read once
    per process."""
    known = _COMPILERS.get()
    if compiler not in known:
        found = shutil.which(compiler)
        if found is None:
            msg = f"compiler {compiler!r} not found"
            raise KernelCompileError("cpp", "*", "(not written)", msg)
        info = os.stat(real := os.path.realpath(found))
        known[compiler] = f"{real}:{info.st_size}:{int(info.st_mtime)}"
    return known[compiler]


# a fact of the machine, fixed while the process runs: not process state
@functools.lru_cache(maxsize=1)
def host_cpu() -> str:
    """The host CPU model and feature flags (what -march=native resolves against)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    wanted = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()


# a fact of the installed package, fixed while the process runs: not process state
@functools.lru_cache(maxsize=1)
def header_text() -> str:
    """All kernel headers, concatenated (their content is part of the cache key)."""
    return "".join(p.read_text() for p in sorted(INCLUDE_DIR.glob("*.h")))


def compile_library(
    cache: Cache, source: str, spans: list[tuple[int, str]], options: CppOptions
) -> Path:
    """The shared library built from `source`; `spans` maps first source lines to kernel names."""
    flags = options.flags()
    inputs = {
        "source": source,
        "headers": hashlib.sha256(header_text().encode()).hexdigest(),
        "compiler": compiler_identity(options.compiler),
        "flags": " ".join((*flags, *options.libraries())),
        "cpu": host_cpu() if options.march == "native" else options.march,
    }

    def build(directory: Path) -> None:
        src = directory / SOURCE_NAME
        src.write_text(source)
        pch = (
            precompiled_headers(cache, options, inputs["cpu"])
            if options.precompile_headers
            else None
        )
        cmd = [
            options.compiler,
            *flags,
            *([f"-I{pch}"] if pch else []),
            f"-I{INCLUDE_DIR}",
            str(src),
            "-o",
            str(directory / LIBRARY_NAME),
            *options.libraries(),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if options.precompile_headers and pch is None:
            # started only now, so that it does not take a core from this first compile
            start_precompiled_headers(cache, options, inputs["cpu"])
        if done.returncode != 0:
            kept = _keep_failed(cache, source)
            log = done.stderr.replace(str(src), str(kept))
            raise KernelCompileError("cpp", _culprit(log, spans, str(kept)), str(kept), log[-8000:])

    return cache.entry("cpp", inputs, build) / LIBRARY_NAME


# precompiled-header builds started by this process, by cache root and inputs
_PCH_BUILDS = state.Slot("polyduct_cpp.pch_builds", dict[str, threading.Thread])


def _pch_inputs(options: CppOptions, cpu: str) -> tuple[list[str], dict[str, str]]:
    flags = [f for f in options.flags() if f != "-shared"]
    inputs = {
        "headers": header_text(),
        "compiler": compiler_identity(options.compiler),
        "flags": " ".join(flags),
        "cpu": cpu,
    }
    return flags, inputs


def precompiled_headers(cache: Cache, options: CppOptions, cpu: str) -> Path | None:
    """A directory holding the kernel headers and their GCC precompiled header for these flags,
    or None while it does not exist yet (`start_precompiled_headers` builds it).

    Parsing the headers is about half of a small graph's compile; the .gch (built once per
    compiler, flags and header text) removes it.
    """
    _, inputs = _pch_inputs(options, cpu)
    # a lookup, not a build: it never waits on another process's claim to build it (remote_cache)
    return cache.lookup("cpp-pch", inputs)


def start_precompiled_headers(cache: Cache, options: CppOptions, cpu: str) -> None:
    """Build the precompiled header on a background thread (once per cache, flags and headers):
    the compile that found none does not wait for it; later compiles use it.

    The thread is not a daemon: a process that exits meanwhile waits for it, so the header lands
    instead of leaving a half-built temporary directory (one killed outright leaves one, which the
    cache's next build in the namespace removes).
    """
    flags, inputs = _pch_inputs(options, cpu)

    def build(directory: Path) -> None:
        for header in INCLUDE_DIR.glob("*.h"):
            (directory / header.name).write_text(header.read_text())
        header = directory / "polyduct_cpp.h"
        cmd = [options.compiler, *flags, "-x", "c++-header", str(header), "-o", f"{header}.gch"]
        subprocess.run(cmd, capture_output=True, text=True, check=True)

    key = f"{cache.root}:{sorted(inputs.items())}"
    builds = _PCH_BUILDS.get()
    if key not in builds:
        builds[key] = threading.Thread(
            target=_build_quietly,
            args=(cache, inputs, build),
            daemon=False,
            name="polyduct-cpp-pch",
        )
        builds[key].start()


def _build_quietly(cache: Cache, inputs: dict[str, str], build: Callable[[Path], None]) -> None:
    try:
        cache.entry("cpp-pch", inputs, build)
    except (subprocess.CalledProcessError, OSError):
        return  # kernels keep compiling from the plain headers


def _keep_failed(cache: Cache, source: str) -> Path:
    directory = cache.root / "cpp-failed"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{hashlib.sha256(source.encode()).hexdigest()[:20]}.cpp"
    path.write_text(source)
    return path


def _culprit(log: str, spans: list[tuple[int, str]], path: str) -> str:
    match = re.search(re.escape(path) + r":(\d+):\d*:? *(fatal )?error", log)
    if match is None:
        return ", ".join(name for _, name in spans) or "?"
    line = int(match.group(1))
    owner = "?"
    for first, name in spans:
        if first <= line:
            owner = name
    return owner
