"""The cache's second level: whole entries shared by many processes and machines through Redis.

A local miss asks the remote store for the entry under the same full SHA-256 key; what comes back
is unpacked beside the local cache and accepted only if it passes the local entry's check (its
`key.json` equals the key inputs and the SHA-256 of every file it holds), then renamed into place.
A bad remote entry is never loaded: it is counted as rejected, the artifact is built locally, and
the build overwrites it in the store. Every local build is uploaded.

The store is configured by `POLYDUCT_REMOTE_CACHE=redis://host:port/db` or by the compile option
`remote_cache` (which sets it for the whole process: every backend's cache shares it). A store
that is down, slow or full never fails a compile and stalls it at most by the connect and read
timeouts: the first failure is logged once and the process goes on with the local cache only (a
full store, refusing writes, still serves reads).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, final

from polyduct.errors import InvalidOption

REMOTE_ENV: Final = "POLYDUCT_REMOTE_CACHE"
FORMAT: Final = b"polyduct-remote-entry 1\n"
CONNECT_TIMEOUT_S: Final = 0.5
READ_TIMEOUT_S: Final = 2.0
MAX_ENTRY_BYTES: Final = 64 << 20
LOG = logging.getLogger("polyduct.cache")
"""Says once per process that the remote store failed and the local cache goes on alone."""


class RemoteEntryError(ValueError):
    """A remote entry's bytes are not a well-formed packed entry."""


def pack(entry: Path) -> bytes:
    """Every file of the entry directory (key.json included, `__pycache__` not) as one value."""
    files = sorted(
        p
        for p in entry.rglob("*")
        if p.is_file() and "__pycache__" not in p.relative_to(entry).parts
    )
    blobs = [p.read_bytes() for p in files]
    header = [[str(p.relative_to(entry)), len(b)] for p, b in zip(files, blobs, strict=True)]
    return FORMAT + json.dumps(header).encode() + b"\n" + b"".join(blobs)


def unpack(data: bytes, into: Path) -> None:
    """Write the files of a packed entry into the (empty) directory `into`.

    Raises `RemoteEntryError` on a malformed value, a path that leaves `into`, or a size that
    disagrees with the data: a store is not trusted to hold what polyduct put there.
    """
    if not data.startswith(FORMAT):
        raise RemoteEntryError("not a polyduct remote entry (format line missing)")
    head, sep, body = data[len(FORMAT) :].partition(b"\n")
    try:
        header = json.loads(head) if sep else None
    except ValueError as e:
        raise RemoteEntryError(f"unreadable header: {e}") from None
    if not isinstance(header, list):
        raise RemoteEntryError("header is not a list of [path, size]")
    offset = 0
    for item in header:
        name, size = _checked_item(item)
        if offset + size > len(body):
            raise RemoteEntryError(f"{name}: truncated ({size} bytes announced)")
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body[offset : offset + size])
        offset += size
    if offset != len(body):
        raise RemoteEntryError(f"{len(body) - offset} trailing bytes")


def _checked_item(item: Any) -> tuple[str, int]:
    if not (isinstance(item, list) and len(item) == 2):
        raise RemoteEntryError(f"bad header item {item!r}")
    name, size = item
    if not isinstance(name, str) or not isinstance(size, int) or size < 0:
        raise RemoteEntryError(f"bad header item {item!r}")
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts or "__pycache__" in parts:
        raise RemoteEntryError(f"refused path {name!r}")
    return name, size


@final
class RemoteCache:
    """A Redis store at `url` (redis://host:port/db) holding packed cache entries.

    Counts what it did (`pulled`, `pushed`, `rejected`, `missed`) for reports and tests.
    `disabled` holds why the store is no longer used in this process, once it failed.
    """

    def __init__(
        self,
        url: str,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        timeout: float = READ_TIMEOUT_S,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
    ) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidOption("polyduct", "remote_cache", url, "a redis://host:port/db URL")
        import redis  # an optional dependency: only a configured remote cache needs it
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url = url
        self.max_entry_bytes = max_entry_bytes
        self._client = redis.Redis.from_url(
            url,
            socket_connect_timeout=connect_timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0),  # one bounded attempt: a stalled store is given up
            retry_on_timeout=False,
        )
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._oom: type[BaseException] = redis.exceptions.OutOfMemoryError
        self.pulled = self.pushed = self.rejected = self.missed = 0
        self.disabled: str | None = None
        self.read_only: str | None = None

    def key(self, namespace: str, digest: str) -> str:
        return f"polyduct:{namespace}:{digest}"

    def pull(
        self, namespace: str, digest: str, final: Path, valid: Callable[[Path], bool]
    ) -> Path | None:
        """Fetch the entry into `final` (a missing local entry's directory) if the store has a
        valid one (`valid(directory)`, the local cache's check); else None, having built nothing."""
        data = self._get(self.key(namespace, digest))
        if data is None:
            self.missed += 1
            return None
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-remote-", dir=final.parent))
        try:
            try:
                unpack(data, tmp)
            except (RemoteEntryError, OSError):
                self.rejected += 1
                return None
            if not valid(tmp):
                self.rejected += 1
                return None
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.rename(tmp, final)
            except OSError:
                if not valid(final):  # lost a race to a bad entry
                    return None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.pulled += 1
        return final

    def push(self, namespace: str, digest: str, entry: Path) -> None:
        """Upload the local entry (overwriting what the store held under its key)."""
        if self.disabled is not None or self.read_only is not None:
            return
        data = pack(entry)
        if len(data) > self.max_entry_bytes:
            return
        try:
            self._client.set(self.key(namespace, digest), data)
        except self._oom as e:
            self.read_only = str(e)
            LOG.warning(
                "remote cache %s refuses writes (%s); it is only read from now", self.url, e
            )
            return
        except self._errors as e:
            self._disable(e)
            return
        self.pushed += 1

    def _get(self, key: str) -> bytes | None:
        if self.disabled is not None:
            return None
        try:
            data = self._client.get(key)
        except self._errors as e:
            self._disable(e)
            return None
        return data if isinstance(data, bytes) else None

    def _disable(self, error: BaseException) -> None:
        self.disabled = f"{type(error).__name__}: {error}"
        LOG.warning(
            "remote cache %s failed (%s); this process uses the local cache only",
            self.url,
            self.disabled,
        )


_CONFIGURED: dict[str, str | None] = {}
_STORES: dict[str, RemoteCache] = {}


def configure(url: str | None) -> None:
    """Use the store at `url` for every cache of this process (None: back to the environment)."""
    if url is None:
        _CONFIGURED.clear()
    else:
        store(url)  # validates the URL now, at the entry point
        _CONFIGURED["url"] = url


def store(url: str) -> RemoteCache:
    """The process's one client for `url` (its counters and failure state are shared)."""
    if url not in _STORES:
        _STORES[url] = RemoteCache(url)
    return _STORES[url]


def default_remote() -> RemoteCache | None:
    """The configured store, else the one `POLYDUCT_REMOTE_CACHE` names, else None."""
    url = _CONFIGURED.get("url") or os.environ.get(REMOTE_ENV)
    return store(url) if url else None
