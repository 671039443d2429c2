"""`CppBackend`: C++ kernels compiled with the system compiler into one shared library per graph."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Final, final

from polyduct import state
from polyduct.cache import Cache, default_cache
from polyduct.errors import CodegenError
from polyduct.kernel import Capabilities, KernelBackend, KernelFn, KernelSource, KernelSpec
from polyduct_cpp.codegen import generate, kernel_symbol
from polyduct_cpp.compiler import compile_library
from polyduct_cpp.ctypes_map import STORAGE
from polyduct_cpp.launcher import LAUNCHER_STEM, import_launcher, launcher_module, launcher_path
from polyduct_cpp.loader import make_kernel
from polyduct_cpp.ops import CppOps
from polyduct_cpp.options import CppOptions

_META: Final = "// polyduct-cpp-meta: "
_INCLUDE: Final = '#include "polyduct_cpp.h"'
LIBRARY_FILE: Final = "kernels.so"  # in an AOT package
# this process's loaded libraries, by path (a reset drops the dict, never unloads: kernels point
# into them)
_LIBRARIES = state.Slot("polyduct_cpp.libraries", dict[str, ctypes.CDLL])


@final
class CppBackend(KernelBackend):
    """Fused C++ kernels (gcc/clang, OpenMP, vectorised), loaded through ctypes."""

    name: ClassVar[str] = "cpp"
    caps: ClassVar[Capabilities] = Capabilities(
        devices=frozenset({"cpu"}), dtypes=frozenset(STORAGE), unsupported={}
    )
    ops_cls: ClassVar[type] = CppOps

    def __init__(self, options: CppOptions | None = None, cache: Cache | None = None) -> None:
        self.options = options or CppOptions()
        self._cache = cache

    @property
    def cache(self) -> Cache:
        return self._cache or default_cache()

    def codegen(self, spec: KernelSpec) -> KernelSource:
        body, sites = generate(spec, self.options)
        meta = {
            "symbol": kernel_symbol(spec.name),
            "tensors": len(spec.args),
            "sizes": len(spec.size_args),
            "sites": sites,
        }
        text = f"{_INCLUDE}\n{_META}{json.dumps(meta, ensure_ascii=True)}\n{body}"
        return KernelSource(spec.name, self.name, text)

    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        if not sources:
            return {}
        library, launcher = self._build(sources)
        lib = _load(str(library), library)
        return _bind(lib, sources, launcher)

    def package(self, sources: Sequence[KernelSource]) -> dict[str, bytes]:
        """The graph's shared library and, where it was built, the launcher extension."""
        if not sources:
            return {}
        library, _ = self._build(sources)
        files = {LIBRARY_FILE: library.read_bytes()}
        if (launcher := launcher_path(self.cache.root, self.options.compiler)) is not None:
            files[launcher.name] = launcher.read_bytes()
        return files

    def load_packaged(self, sources: Sequence[KernelSource], files: Path) -> dict[str, KernelFn]:
        if not sources:
            return {}
        lib = _load(str(files), files / LIBRARY_FILE)
        found = [p for p in files.iterdir() if p.name.startswith(LAUNCHER_STEM)]
        launcher = import_launcher(found[0]) if found else None
        return _bind(lib, sources, launcher)

    def _build(self, sources: Sequence[KernelSource]) -> tuple[Path, ModuleType | None]:
        """The shared library of all of `sources` (one translation unit) and the launcher."""
        parts, spans = [_INCLUDE, ""], []
        line = 3
        for src in sources:
            body = src.source.replace(_INCLUDE + "\n", "", 1)
            spans.append((line, src.name))
            parts.append(body)
            line += body.count("\n") + (0 if body.endswith("\n") else 1)
        # The launcher extension (built once per cache) compiles beside the kernels, not after.
        with ThreadPoolExecutor(max_workers=1) as pool:
            launcher_job = pool.submit(launcher_module, self.cache.root, self.options.compiler)
            library = compile_library(self.cache, "\n".join(parts) + "\n", spans, self.options)
            return library, launcher_job.result()


def _load(key: str, path: Path) -> ctypes.CDLL:
    """The library at `path`, loaded once per process state (under `key`)."""
    libraries = _LIBRARIES.get()
    if key not in libraries:
        libraries[key] = ctypes.CDLL(str(path))
    return libraries[key]


def _bind(
    lib: ctypes.CDLL, sources: Sequence[KernelSource], launcher: ModuleType | None
) -> dict[str, KernelFn]:
    """Each kernel of `sources` as a callable over its symbol in the loaded library `lib`."""
    kernels: dict[str, KernelFn] = {}
    for src in sources:
        meta = _meta(src)
        fn = getattr(lib, meta["symbol"])
        kernels[src.name] = make_kernel(
            src.name, fn, meta["tensors"], meta["sizes"], meta["sites"], launcher
        )
    return kernels


def _meta(src: KernelSource) -> dict[str, Any]:
    for text in src.source.splitlines():
        if text.startswith(_META):
            meta: dict[str, Any] = json.loads(text[len(_META) :])
            return meta
    raise CodegenError(f"kernel {src.name!r} was not generated by the cpp backend (no metadata)")


def make_backend(options: Mapping[str, Any]) -> CppBackend:
    """Factory used by the plugin registration: options mapping -> backend."""
    return CppBackend(CppOptions.from_mapping(options))
