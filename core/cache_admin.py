"""`polyduct cache info|clear|prune`: the size of the kernel cache, and least-recently-used eviction.

The cache (`polyduct.cache`) marks an entry used by touching its directory on every hit, so an
entry's directory mtime is its last use. Eviction renames an entry out of its namespace in one
atomic step, then deletes it: a concurrent reader sees the whole entry or none (and rebuilds), and
a kernel library already loaded from it stays mapped. Entries used within `grace` seconds are never
evicted, so a process between its lookup and its load keeps its files.

The size cap is `POLYDUCT_CACHE_MAX_SIZE` (bytes, or with a K/M/G suffix; default 4G);
`torch.compile` prunes to it at most once an hour (`auto_prune`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyduct.cache import KEY_FILE, default_root
from polyduct.environment import snapshot
from polyduct.errors import InvalidOption

MAX_SIZE_ENV = "POLYDUCT_CACHE_MAX_SIZE"
DEFAULT_MAX_SIZE = 4 << 30
GRACE_SECONDS = 300.0
AUTO_PRUNE_EVERY = 3600.0
STAMP = ".last-prune"
STALE_TEMP_SECONDS = 86400.0  # a build directory this old belongs to a process that died
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True, slots=True)
class Entry:
    """One cache entry: its directory, namespace, size in bytes and last use (epoch seconds)."""

    path: Path
    namespace: str
    size: int
    used: float


def parse_size(text: str) -> int:
    """`123`, `64K`, `512M`, `4G` (binary units; a trailing `B`/`iB` is accepted) -> bytes."""
    raw = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = (raw[:-1], raw[-1]) if raw[-1:] in _UNITS else (raw, "")
    try:
        value = float(number)
    except ValueError:
        raise InvalidOption("cache", "max_size", text, "a size such as 500M or 4G") from None
    if value < 0:
        raise InvalidOption("cache", "max_size", text, "a size >= 0")
    return int(value * _UNITS[unit])


def max_size(environ: Mapping[str, str] | None = None) -> int:
    """The size cap from the environment, else 4 GiB."""
    value = snapshot(environ).get(MAX_SIZE_ENV, "")
    return parse_size(value) if value else DEFAULT_MAX_SIZE


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:  # removed meanwhile by another process
                continue
    return total


def _namespaces(root: Path) -> Iterator[Path]:
    if root.is_dir():
        yield from sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def entries(root: Path) -> list[Entry]:
    """Every complete entry under `root` (directories holding a key file), oldest use first."""
    found = []
    for ns in _namespaces(root):
        for path in ns.iterdir():
            if path.name.startswith(".") or not (path / KEY_FILE).is_file():
                continue
            try:
                used = path.stat().st_mtime
            except OSError:
                continue
            found.append(Entry(path, ns.name, _tree_size(path), used))
    return sorted(found, key=lambda e: (e.used, str(e.path)))


def stale_temps(root: Path, now: float) -> list[Path]:
    """Build directories (`.<digest>-*`) left behind by processes that died mid-build."""
    stale = []
    for ns in _namespaces(root):
        for path in ns.iterdir():
            if path.name.startswith(".") and path.is_dir():
                try:
                    if now - path.stat().st_mtime > STALE_TEMP_SECONDS:
                        stale.append(path)
                except OSError:
                    continue
    return stale


def _remove(path: Path) -> bool:
    """Rename `path` aside atomically, then delete it; False if another process got there first."""
    aside = path.parent / f".evict-{uuid.uuid4().hex}"
    try:
        os.rename(path, aside)
    except OSError:
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What `prune` did: entries and bytes removed, bytes kept."""

    removed: int
    freed: int
    kept: int


def prune(
    root: Path, limit: int, grace: float = GRACE_SECONDS, now: float | None = None
) -> PruneResult:
    """Evict least-recently-used entries until the cache holds at most `limit` bytes.

    Entries used within `grace` seconds stay even over the limit.
    """
    now = time.time() if now is None else now
    for path in stale_temps(root, now):
        shutil.rmtree(path, ignore_errors=True)
    found = entries(root)
    total = sum(e.size for e in found)
    removed = freed = 0
    for entry in found:  # oldest use first
        if total <= limit:
            break
        if now - entry.used < grace:
            break  # every later entry was used even more recently
        if _remove(entry.path):
            removed += 1
            freed += entry.size
        total -= entry.size
    return PruneResult(removed, freed, total)


def auto_prune(root: Path | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Prune to the size cap at most once per hour (a stamp file records the last run).

    Never fails a compile: a cache that is not this user's, or that changes under the scan, is
    left as it is.
    """
    root = default_root() if root is None else root
    stamp = root / STAMP
    try:
        if root.stat().st_uid != os.getuid():
            return  # the cache refuses such a directory itself; not ours to prune
        if stamp.exists() and time.time() - stamp.stat().st_mtime < AUTO_PRUNE_EVERY:
            return
        stamp.touch()
        prune(root, max_size(environ))
    except OSError:
        return  # no cache yet, or another process is changing it


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def info_lines(root: Path, limit: int) -> list[str]:
    """`polyduct cache info`: the root, the cap, and entries and bytes per namespace."""
    found = entries(root)
    lines = [f"cache: {root}", f"size cap: {_human(limit)} (${MAX_SIZE_ENV})"]
    per_ns: dict[str, list[Entry]] = {}
    for entry in found:
        per_ns.setdefault(entry.namespace, []).append(entry)
    for ns, group in sorted(per_ns.items()):
        lines.append(f"  {ns:<24} {len(group):6d} entries  {_human(sum(e.size for e in group))}")
    total = sum(e.size for e in found)
    lines.append(f"total: {len(found)} entries, {_human(total)}")
    return lines


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the `cache` subcommand on `subparsers` (from `polyduct.cli`)."""
    p = subparsers.add_parser("cache", help="size of the kernel cache; clear or prune it")
    p.add_argument("action", choices=("info", "clear", "prune"))
    p.add_argument("--max-size", help=f"prune to this size (default ${MAX_SIZE_ENV} or 4G)")
    p.add_argument(
        "--grace",
        type=float,
        default=GRACE_SECONDS,
        help="never evict entries used this many seconds ago or less (prune)",
    )
    return p  # type: ignore[no-any-return]


def run(args: argparse.Namespace) -> int:
    """`info` prints sizes; `clear` removes every entry; `prune` evicts down to the cap."""
    root = default_root()
    limit = parse_size(args.max_size) if args.max_size else max_size()
    if args.action == "info":
        print("\n".join(info_lines(root, limit)))
        return 0
    if args.action == "clear":
        result = prune(root, 0, grace=0.0)
    else:
        result = prune(root, limit, grace=args.grace)
    print(f"removed {result.removed} entries ({_human(result.freed)}); {_human(result.kept)} kept")
    return 0
