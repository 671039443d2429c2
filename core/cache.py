"""Content-addressed cache for compiled artifacts, shared by every backend.

An entry is a directory named by the full SHA-256 of its key inputs (source, compiler, flags,
versions: whatever changes the artifact). It holds `key.json` (the inputs themselves and the SHA-256
of every file the builder wrote, compared on load, so a hash collision, a planted entry or an edited
artifact is rebuilt, never used) and the files the builder wrote. Entries are built in a unique temporary directory beside the cache and renamed into place
atomically; a concurrent builder of the same key loses the rename race harmlessly.

The cache root is per user and outside /tmp: `$POLYDUCT_CACHE_DIR`, else
`$XDG_CACHE_HOME/polyduct`, else `~/.cache/polyduct`. It is created with mode 0700 and refused if
another user owns it or others can write it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType

from polyduct.errors import CodegenError
from polyduct.remote_cache import RemoteCache, default_remote

KEY_FILE = "key.json"
Builder = Callable[[Path], None]


class CacheError(CodegenError):
    """The cache directory is unsafe (foreign owner, writable by others) or unusable."""


def default_root() -> Path:
    """Where the cache lives unless a `Cache` is given another root."""
    if env := os.environ.get("POLYDUCT_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polyduct"


def _secure_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_dir(path)


def _check_dir(path: Path) -> None:
    """Refuse an existing cache directory that another user owns or others can write."""
    info = path.stat()
    if info.st_uid != os.getuid():
        raise CacheError(f"cache directory {path} is owned by uid {info.st_uid}, not by this user")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(f"cache directory {path} is writable by others; refusing to use it")


def _key(namespace: str, inputs: Mapping[str, str]) -> tuple[str, str]:
    canonical = json.dumps({"namespace": namespace, "inputs": dict(inputs)}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest(), canonical


def _manifest(entry: Path) -> dict[str, str]:
    """SHA-256 of every artifact file in `entry`, by relative path.

    The key file and `__pycache__` (written by Python when a cached module is imported) are not
    artifacts.
    """
    return {
        str(path.relative_to(entry)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(entry.rglob("*"))
        if path.is_file() and path.name != KEY_FILE and "__pycache__" not in path.parts
    }


def _record(canonical: str, manifest: Mapping[str, str]) -> str:
    return json.dumps({"key": json.loads(canonical), "files": dict(manifest)}, sort_keys=True)


@dataclass
class Cache:
    """A cache rooted at `root`; counts its hits and builds (for reports and tests).

    `remote`: the second level asked on a local miss and given every build (remote_cache.py);
    None: the process's configured store, if any.
    """

    root: Path = field(default_factory=default_root)
    hits: int = 0
    builds: int = 0
    remote: RemoteCache | None = None

    def entry(self, namespace: str, inputs: Mapping[str, str], build: Builder) -> Path:
        """The directory of the entry for `inputs`, building it with `build(tmp_dir)` if absent.

        `build` writes the artifact's files into the directory it is given. An existing entry
        whose stored key differs from `inputs`, or that is unreadable, is replaced.
        """
        digest, canonical = _key(namespace, inputs)
        ns_dir = self.root / namespace
        _secure_dir(self.root)
        _secure_dir(ns_dir)
        final = ns_dir / digest
        if (hit := self._hit(final, canonical)) is not None:
            return hit
        remote = self.remote or default_remote()
        if (hit := self._pull(namespace, final, canonical, claim=True)) is not None:
            return hit
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=ns_dir))
        try:
            build(tmp)
            (tmp / KEY_FILE).write_text(_record(canonical, _manifest(tmp)))
            if (hit := self._hit(final, canonical)) is not None:
                return hit  # another process built it meanwhile, and may be loading it
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.rename(tmp, final)
            except OSError:
                if not self._valid(final, canonical):  # lost a race to a bad entry: keep ours
                    raise
            if remote is not None:
                remote.push(namespace, digest, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if remote is not None:  # a failed build too: processes waiting for it go on
                remote.release(namespace, digest)
        self.builds += 1
        return final

    def lookup(self, namespace: str, inputs: Mapping[str, str]) -> Path | None:
        """The directory of the valid entry for `inputs`, or None: `entry` without building
        (nor creating directories; existing ones are checked as `entry` checks them)."""
        digest, canonical = _key(namespace, inputs)
        ns_dir = self.root / namespace
        if ns_dir.is_dir():
            _check_dir(self.root)
            _check_dir(ns_dir)
            if (hit := self._hit(ns_dir / digest, canonical)) is not None:
                return hit
        return self._pull(namespace, ns_dir / digest, canonical, claim=False)

    def _pull(self, namespace: str, final: Path, canonical: str, claim: bool) -> Path | None:
        """`final` filled from the remote level if it holds a valid entry, else None (having
        claimed the build for this process where `claim`: see `RemoteCache.pull`)."""
        if (remote := self.remote or default_remote()) is None:
            return None
        _secure_dir(final.parent.parent)
        _secure_dir(final.parent)
        check = partial(self._valid, canonical=canonical)
        return remote.pull(namespace, final.name, final, check, claim)

    def _hit(self, entry: Path, canonical: str) -> Path | None:
        """`entry` if it holds a valid artifact for `canonical` (counted as a hit), else None."""
        if not self._valid(entry, canonical):
            return None
        self.hits += 1
        with contextlib.suppress(OSError):  # the last use, for LRU eviction (polyduct.cache_admin)
            os.utime(entry)
        return entry

    @staticmethod
    def _valid(entry: Path, canonical: str) -> bool:
        """The entry's stored key equals ours and every artifact still has its recorded hash."""
        try:
            stored = (entry / KEY_FILE).read_text()
            return stored == _record(canonical, _manifest(entry))
        except (OSError, UnicodeDecodeError, ValueError):
            return False


_DEFAULT: dict[Path, Cache] = {}


def default_cache() -> Cache:
    """The process-wide cache for the current root (re-read from the environment on each call)."""
    root = default_root()
    if root not in _DEFAULT:
        _DEFAULT[root] = Cache(root)
    return _DEFAULT[root]


def import_module_file(path: Path, module_name: str) -> ModuleType:
    """Import the Python source file `path` as a fresh module called `module_name`."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CacheError(f"cannot import generated module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
