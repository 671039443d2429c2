"""Content-addressed cache for compiled artifacts, shared by every backend.

An entry is a directory named by the full SHA-256 of its key inputs (source, compiler, flags,
versions: whatever changes the artifact). It holds `key.json` (the inputs themselves and the SHA-256
of every other file in the entry) and the files the builder wrote. Entries are built in a unique
temporary directory beside the cache and renamed into place atomically; a concurrent builder of the
same key loses the rename race harmlessly. A build that was killed leaves its temporary directory
behind; the next build in that namespace removes it (a live build holds a lock on its directory).

What the digests protect against: integrity, not authenticity. An entry whose stored key differs
from the inputs asked for (a hash collision), whose files were truncated, edited, added (a
`__pycache__` byte-code file included), removed or swapped for links, or whose directory is some
other kind of file, is removed and rebuilt, never used. Anyone who can write the cache can also
rewrite `key.json` with recomputed digests, and such a planted entry is used: against that, the
cache relies on the directory checks below alone. Python modules in an entry are imported from the
bytes whose digest was checked (`import_module_file`), never from a byte-code cache.

The cache root is per user and outside /tmp: `$POLYDUCT_CACHE_DIR`, else
`$XDG_CACHE_HOME/polyduct`, else `~/.cache/polyduct`. It is created with mode 0700 and refused
(`CacheError`) if it is not a directory, if another user owns it or if others can write it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import CodeType, ModuleType

from polyduct import state
from polyduct.environment import process_value
from polyduct.errors import CodegenError
from polyduct.remote_cache import RemoteCache, default_remote

KEY_FILE = "key.json"
Builder = Callable[[Path], None]


class CacheError(CodegenError):
    """The cache directory is unsafe (foreign owner, writable by others) or unusable."""


def default_root() -> Path:
    """Where the cache lives unless a `Cache` is given another root."""
    if env := process_value("POLYDUCT_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polyduct"


STALE_TMP_S = 10.0  # a build's temporary directory is locked within microseconds of creation


def _secure_root(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise CacheError(
            f"cache root {path} exists and is not a directory; remove it or set "
            "POLYDUCT_CACHE_DIR to a directory"
        )
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:
        raise CacheError(f"cannot create cache root {path}: {err}") from err
    _check_dir(path)


def _secure_namespace(path: Path) -> None:
    """A namespace directory inside the (checked) root; anything else in its place is removed."""
    if os.path.lexists(path) and not _is_real_dir(path):
        _remove(path)
    path.mkdir(mode=0o700, exist_ok=True)
    _check_dir(path)


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _remove(path: Path) -> None:
    """Remove whatever is at `path`: a directory tree, a file or a link (not what it points to)."""
    if _is_real_dir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


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


class _BadShape(Exception):
    """An entry holds something other than plain files and directories."""


def _manifest(entry: Path) -> dict[str, str]:
    """SHA-256 of every file in `entry` but its key file, by relative path.

    Every file counts (a byte-code cache a Python import might prefer included); a link or any
    other non-regular file raises `_BadShape`.
    """
    found: dict[str, str] = {}
    for path in sorted(entry.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise _BadShape(path)
        rel = str(path.relative_to(entry))
        if rel != KEY_FILE:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


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
    _reaped: set[str] = field(default_factory=set, repr=False)

    def entry(self, namespace: str, inputs: Mapping[str, str], build: Builder) -> Path:
        """The directory of the entry for `inputs`, building it with `build(tmp_dir)` if absent.

        `build` writes the artifact's files into the directory it is given. An existing entry
        whose stored key differs from `inputs`, or that is unreadable, is replaced.
        """
        digest, canonical = _key(namespace, inputs)
        ns_dir = self.root / namespace
        _secure_root(self.root)
        _secure_namespace(ns_dir)
        final = ns_dir / digest
        if (hit := self._hit(final, canonical)) is not None:
            return hit
        remote = self.remote or default_remote()
        if (hit := self._pull(namespace, final, canonical, claim=True)) is not None:
            return hit
        if namespace not in self._reaped:
            self._reaped.add(namespace)
            reap_stale_builds(ns_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=ns_dir))
        lock = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # tells `reap_stale_builds` this build is alive
            build(tmp)
            (tmp / KEY_FILE).write_text(_record(canonical, _manifest(tmp)))
            if (hit := self._hit(final, canonical)) is not None:
                return hit  # another process built it meanwhile, and may be loading it
            if os.path.lexists(final):
                _remove(final)
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
            os.close(lock)
        self.builds += 1
        return final

    def lookup(self, namespace: str, inputs: Mapping[str, str]) -> Path | None:
        """The directory of the valid entry for `inputs`, or None: `entry` without building
        (nor creating directories; existing ones are checked as `entry` checks them)."""
        digest, canonical = _key(namespace, inputs)
        ns_dir = self.root / namespace
        if _is_real_dir(ns_dir):
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
        _secure_root(final.parent.parent)
        _secure_namespace(final.parent)
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
        if not _is_real_dir(entry):
            return False
        try:
            stored = (entry / KEY_FILE).read_text()
            return stored == _record(canonical, _manifest(entry))
        except (OSError, UnicodeDecodeError, ValueError, _BadShape):
            return False


def reap_stale_builds(ns_dir: Path) -> list[Path]:
    """Remove the temporary directories of builds that died (no live build holds their lock).

    A directory younger than `STALE_TMP_S` is left alone: its builder may not have locked it yet.
    """
    reaped: list[Path] = []
    now = time.time()
    for path in ns_dir.iterdir():
        if not path.name.startswith(".") or not _is_real_dir(path):
            continue
        try:
            if now - path.lstat().st_mtime < STALE_TMP_S:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live build
        try:
            shutil.rmtree(path, ignore_errors=True)
            reaped.append(path)
        finally:
            os.close(fd)
    return reaped


_DEFAULT = state.Slot("polyduct.cache", dict[Path, Cache])


def default_cache() -> Cache:
    """The process-wide cache for the current root (re-read from the environment on each call)."""
    root = default_root()
    caches = _DEFAULT.get()
    if root not in caches:
        caches[root] = Cache(root)
    return caches[root]


class _VerifiedSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the bytes it was given: never reads nor writes a byte-code cache."""

    def __init__(self, fullname: str, path: str, source: bytes) -> None:
        super().__init__(fullname, path)
        self._source = source

    def get_code(self, fullname: str) -> CodeType:
        return self.source_to_code(self._source, self.path)


def import_module_file(path: Path, module_name: str) -> ModuleType:
    """Import the Python source file `path` as a fresh module called `module_name`.

    The module is compiled from the bytes read here, never from a `__pycache__` file, and no
    byte-code is written. A file directly inside a cache entry (beside its `key.json`) must have
    the digest recorded there, else `CacheError`: the entry changed after it was checked.
    """
    source = path.read_bytes()
    _check_recorded(path, source)
    loader = _VerifiedSourceLoader(module_name, str(path), source)
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    if spec is None:
        raise CacheError(f"cannot import generated module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module


def _check_recorded(path: Path, source: bytes) -> None:
    key_file = path.parent / KEY_FILE
    if not key_file.exists():
        return
    try:
        recorded = json.loads(key_file.read_text())["files"].get(path.name)
    except (OSError, ValueError, KeyError, AttributeError) as err:
        raise CacheError(f"cache entry {path.parent} has an unreadable {KEY_FILE}") from err
    if recorded != hashlib.sha256(source).hexdigest():
        raise CacheError(
            f"{path} does not match the digest its cache entry records; it changed "
            "after the entry was checked"
        )
