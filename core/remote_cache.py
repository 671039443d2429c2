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
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, final

from polyduct import state
from polyduct.environment import process_value
from polyduct.errors import InvalidOption

REMOTE_ENV: Final = "POLYDUCT_REMOTE_CACHE"
FORMAT: Final = b"polyduct-remote-entry 1\n"
CONNECT_TIMEOUT_S: Final = 0.5
READ_TIMEOUT_S: Final = 2.0
MAX_ENTRY_BYTES: Final = 64 << 20
CLAIM_S: Final = 120.0  # how long a claim on a build lasts, and a waiter waits for it
_POLL_S: Final = 0.05
_LOCK: Final = "building:"
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

    Counts what it did (`pulled`, `pushed`, `rejected`, `missed`, and `waited`: pulls that
    waited for another process's build) for reports and tests.
    `disabled` holds why the store is no longer used in this process, once it failed.
    """

    def __init__(
        self,
        url: str,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        timeout: float = READ_TIMEOUT_S,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
        claim_s: float = CLAIM_S,
    ) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidOption("polyduct", "remote_cache", url, "a redis://host:port/db URL")
        try:
            import redis  # an optional dependency: only a configured remote cache needs it
        except ImportError:
            raise InvalidOption(
                "polyduct",
                "remote_cache",
                url,
                "usable once the client is installed: pip install 'polyduct[remote]' (redis>=5,<9)",
            ) from None
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url = url
        self.max_entry_bytes, self.claim_s = max_entry_bytes, claim_s
        self._claims: dict[str, bytes] = {}
        self.pulled_from: Counter[str] = Counter()  # pulls by namespace
        self._client = redis.Redis.from_url(
            url,
            socket_connect_timeout=connect_timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0),  # one bounded attempt: a stalled store is given up
            retry_on_timeout=False,
        )
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._oom: type[BaseException] = redis.exceptions.OutOfMemoryError
        self.pulled = self.pushed = self.rejected = self.missed = self.waited = 0
        self.disabled: str | None = None
        self.read_only: str | None = None

    def key(self, namespace: str, digest: str) -> str:
        return f"polyduct:{namespace}:{digest}"

    def pull(
        self,
        namespace: str,
        digest: str,
        final: Path,
        valid: Callable[[Path], bool],
        claim: bool = False,
    ) -> Path | None:
        """Fetch the entry into `final` (a missing local entry's directory) if the store has a
        valid one (`valid(directory)`, the local cache's check); else None, having built nothing.

        With `claim`, a miss claims the build for this process (released by `push` or
        `release`); where another process holds the claim, this waits for its upload (at most
        `claim_s`, and no longer once the claim is released without one), so that a fleet
        starting together compiles each artifact once.
        """
        key = self.key(namespace, digest)
        data = self._get(key)
        if data is None and claim and not self._claim(key):
            data = self._wait(key)
        if data is None:
            self.missed += 1
            return None
        if self._install(data, final, valid):
            self.pulled += 1
            self.pulled_from[namespace] += 1
            return final
        self.rejected += 1
        return None

    def _install(self, data: bytes, final: Path, valid: Callable[[Path], bool]) -> bool:
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{final.name[:16]}-remote-", dir=final.parent))
        except OSError:  # a full disk: the local build will say so
            return False
        try:
            try:
                unpack(data, tmp)
            except (RemoteEntryError, OSError):
                return False
            if not valid(tmp):
                return False
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.rename(tmp, final)
            except OSError:
                return valid(final)  # lost a race: fine unless the winner is bad
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return True

    def push(self, namespace: str, digest: str, entry: Path) -> None:
        """Upload the local entry (overwriting what the store held under its key)."""
        if self.disabled is not None or self.read_only is not None:
            return
        try:
            data = pack(entry)
        except OSError:  # the entry went away meanwhile: nothing to share
            return
        if len(data) > self.max_entry_bytes:
            return
        try:
            self._client.set(self.key(namespace, digest), data)
        except self._errors as e:
            self._write_failed(e)
            return
        self.pushed += 1

    def release(self, namespace: str, digest: str) -> None:
        """Give up this process's claim on the key, if it holds one (after pushing, or failing)."""
        token = self._claims.pop(self.key(namespace, digest), None)
        if token is None or self.disabled is not None:
            return
        lock = _LOCK + self.key(namespace, digest)
        try:
            if self._client.get(lock) == token:
                self._client.delete(lock)
        except self._errors as e:
            self._disable(e)

    def _claim(self, key: str) -> bool:
        """Whether this process is to build `key`: it took the claim, or cannot take one."""
        if self.disabled is not None or self.read_only is not None:
            return True
        token = secrets.token_hex(8).encode()
        try:
            taken = self._client.set(_LOCK + key, token, nx=True, px=int(self.claim_s * 1000))
        except self._errors as e:
            self._write_failed(e)
            return True
        if taken:
            self._claims[key] = token
        return bool(taken)

    def _wait(self, key: str) -> bytes | None:
        """The entry another process is building, once uploaded; None if it gives up."""
        deadline = time.monotonic() + self.claim_s
        while time.monotonic() < deadline and self.disabled is None:
            time.sleep(_POLL_S)
            pipe = self._client.pipeline()
            pipe.get(key)
            pipe.exists(_LOCK + key)
            try:
                data, held = pipe.execute()
            except self._errors as e:
                self._disable(e)
                return None
            if data is not None:
                self.waited += 1
                return data if isinstance(data, bytes) else None
            if not held:
                return None
        return None

    def _get(self, key: str) -> bytes | None:
        if self.disabled is not None:
            return None
        try:
            data = self._client.get(key)
        except self._errors as e:
            self._disable(e)
            return None
        return data if isinstance(data, bytes) else None

    def _write_failed(self, error: BaseException) -> None:
        """A full store (refusing writes) is still read from; any other failure disables it."""
        if not isinstance(error, self._oom):
            self._disable(error)
            return
        self.read_only = str(error)
        LOG.warning(
            "remote cache %s refuses writes (%s); it is only read from now", self.url, error
        )

    def _disable(self, error: BaseException) -> None:
        self.disabled = f"{type(error).__name__}: {error}"
        LOG.warning(
            "remote cache %s failed (%s); this process uses the local cache only",
            self.url,
            self.disabled,
        )


_CONFIGURED = state.Slot("polyduct.remote_cache.configured", dict[str, str])
_STORES = state.Slot("polyduct.remote_cache.stores", dict[str, RemoteCache])


def configure(url: str | None) -> None:
    """Use the store at `url` for every cache of this process (None: back to the environment)."""
    if url is None:
        _CONFIGURED.get().clear()
    else:
        store(url)  # validates the URL now, at the entry point
        _CONFIGURED.get()["url"] = url


def store(url: str) -> RemoteCache:
    """The process's one client for `url` (its counters and failure state are shared)."""
    stores = _STORES.get()
    if url not in stores:
        stores[url] = RemoteCache(url)
    return stores[url]


def default_remote() -> RemoteCache | None:
    """The configured store, else the one `POLYDUCT_REMOTE_CACHE` names, else None."""
    url = _CONFIGURED.get().get("url") or process_value(REMOTE_ENV)
    return store(url) if url else None
