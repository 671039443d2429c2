"""The remote cache level on a real redis-server: sharing, verification, a store down/slow/full."""

from __future__ import annotations

import logging
import shutil
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from bench.redis_server import SERVER, RedisServer
from polyduct import remote_cache
from polyduct.cache import Cache, default_cache
from polyduct.remote_cache import RemoteCache, RemoteEntryError, pack, unpack

pytest.importorskip("redis", reason="the remote cache needs the redis client (pip install redis)")
if shutil.which(SERVER) is None:
    pytest.skip(
        f"{SERVER} is not installed (apt-get install -y redis-server; scripts/test.sh does)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()


@pytest.fixture
def remote(server: RedisServer) -> RemoteCache:
    store = RemoteCache(server.url)
    store._client.flushdb()
    return store


def _writer(text: str, calls: list[str]) -> object:
    def build(tmp: Path) -> None:
        calls.append(text)
        (tmp / "sub").mkdir()
        (tmp / "sub" / "lib.so").write_bytes(text.encode() * 100)
        (tmp / "kernel.py").write_text(text)

    return build


def _refuse(tmp: Path) -> None:
    raise AssertionError("built although the remote store held the entry")


def test_a_second_machine_pulls_what_the_first_built(tmp_path: Path, remote: RemoteCache) -> None:
    calls: list[str] = []
    first = Cache(tmp_path / "a", remote=remote)
    built = first.entry("cpp", {"source": "x"}, _writer("x", calls))  # type: ignore[arg-type]
    second = Cache(tmp_path / "b", remote=remote)
    pulled = second.entry("cpp", {"source": "x"}, _refuse)
    assert calls == ["x"] and remote.pushed == 1 and remote.pulled == 1
    assert second.builds == 0 and first.builds == 1
    for name in ("key.json", "kernel.py", "sub/lib.so"):
        assert (pulled / name).read_bytes() == (built / name).read_bytes()
    assert pulled.parent == tmp_path / "b" / "cpp" and pulled.name == built.name


def test_lookup_pulls_tuning_results(tmp_path: Path, remote: RemoteCache) -> None:
    calls: list[str] = []
    key = {"shape": "1024"}
    Cache(tmp_path / "a", remote=remote).entry("triton-tuning", key, _writer("c", calls))  # type: ignore[arg-type]
    other = Cache(tmp_path / "b", remote=remote)
    assert other.lookup("triton-tuning", {"shape": "2048"}) is None
    hit = other.lookup("triton-tuning", key)
    assert hit is not None and (hit / "kernel.py").read_text() == "c"


@pytest.mark.parametrize("damage", ["edited-artifact", "foreign-key", "truncated", "garbage"])
def test_a_bad_remote_entry_is_never_loaded_and_is_overwritten(
    tmp_path: Path, remote: RemoteCache, damage: str
) -> None:
    calls: list[str] = []
    good = Cache(tmp_path / "a", remote=remote).entry("cpp", {"s": "1"}, _writer("1", calls))  # type: ignore[arg-type]
    name = remote.key("cpp", good.name)
    data = remote._client.get(name)
    assert isinstance(data, bytes)
    bad = {
        "edited-artifact": data.replace(b"11111", b"11112", 1),
        "foreign-key": data.replace(b'"s": "1"', b'"s": "2"', 1),
        "truncated": data[:-7],
        "garbage": b"\x00" * 40,
    }[damage]
    assert bad != data
    remote._client.set(name, bad)
    victim = Cache(tmp_path / "b", remote=remote)
    got = victim.entry("cpp", {"s": "1"}, _writer("1", calls))  # type: ignore[arg-type]
    assert remote.rejected == 1 and victim.builds == 1 and calls == ["1", "1"]
    assert (got / "sub" / "lib.so").read_bytes() == b"1" * 100
    assert remote._client.get(name) == data  # the rebuild overwrote the bad value
    third = Cache(tmp_path / "c", remote=remote).entry("cpp", {"s": "1"}, _refuse)
    assert (third / "kernel.py").read_text() == "1"


def test_unpack_refuses_paths_leaving_the_entry(tmp_path: Path) -> None:
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "f").write_text("x")
    data = pack(tmp_path / "e")
    evil = data.replace(b'"f"', b'"../f"')
    with pytest.raises(RemoteEntryError, match="refused path '../f'"):
        unpack(evil, tmp_path / "out")


def test_a_store_that_is_down_costs_one_connect_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = RemoteCache(f"redis://127.0.0.1:{_closed_port()}/0")
    calls: list[str] = []
    cache = Cache(tmp_path, remote=store)
    with caplog.at_level(logging.WARNING, logger="polyduct.cache"):
        for key in "abc":
            cache.entry("cpp", {"k": key}, _writer(key, calls))  # type: ignore[arg-type]
    assert calls == ["a", "b", "c"] and store.disabled is not None
    said = f"remote cache {store.url} failed ({store.disabled}); this process uses the local"
    assert [r.message for r in caplog.records if "remote cache" in r.message] == [
        f"{said} cache only"
    ]


def test_a_store_that_never_answers_stalls_at_most_the_read_timeout(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        store = RemoteCache(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", timeout=0.3)
        calls: list[str] = []
        start = time.monotonic()
        for key in "ab":
            Cache(tmp_path, remote=store).entry("cpp", {"k": key}, _writer(key, calls))  # type: ignore[arg-type]
        assert time.monotonic() - start < 1.5
    assert calls == ["a", "b"] and store.disabled is not None and "Timeout" in store.disabled


def test_a_full_store_is_only_read(tmp_path: Path, server: RedisServer) -> None:
    store = RemoteCache(server.url)
    store._client.flushdb()
    calls: list[str] = []
    Cache(tmp_path / "a", remote=store).entry("cpp", {"k": "small"}, _writer("s", calls))  # type: ignore[arg-type]
    used = int(store._client.info("memory")["used_memory"])
    store._client.config_set("maxmemory", str(used + 1024))
    try:
        big = Cache(tmp_path / "a", remote=store)
        big.entry("cpp", {"k": "big"}, _writer("b" * 50000, calls))  # type: ignore[arg-type]
        assert store.read_only is not None and store.disabled is None
        Cache(tmp_path / "b", remote=store).entry("cpp", {"k": "small"}, _refuse)
    finally:
        store._client.config_set("maxmemory", "0")
    assert len(calls) == 2


def test_compiled_programs_share_kernels_through_the_option(
    tmp_path: Path, server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * y + 1.5, dim=-1).sum(0)

    x, y = torch.randn(7, 33), torch.randn(7, 33)
    store = remote_cache.store(server.url)
    store._client.flushdb()
    opts = {"remote_cache": server.url}
    results, builds = [], []
    try:
        for machine in ("a", "b"):
            monkeypatch.setenv("POLYDUCT_CACHE_DIR", str(tmp_path / machine))
            torch._dynamo.reset()
            results.append(torch.compile(fn, backend="polyduct", options=opts)(x, y))
            builds.append(default_cache().builds)
    finally:
        remote_cache.configure(None)
    assert builds[0] >= 2 and builds[1] == 0  # the C++ library and the wrapper module
    assert store.pulled >= 2 and store.rejected == 0
    for got in results:
        torch.testing.assert_close(got, fn(x, y))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_processes_starting_together_build_once(tmp_path: Path, server: RedisServer) -> None:
    """The first to miss claims the build; the others wait for its upload instead of building."""
    RemoteCache(server.url)._client.flushdb()
    calls: list[str] = []

    def slow(tmp: Path) -> None:
        time.sleep(0.4)
        _writer("k", calls)(tmp)  # type: ignore[operator]

    stores = [RemoteCache(server.url) for _ in range(3)]  # one client each, as in 3 processes
    caches = [Cache(tmp_path / str(i), remote=s) for i, s in enumerate(stores)]
    with ThreadPoolExecutor(3) as pool:
        entries = list(pool.map(lambda c: c.entry("cpp", {"k": "v"}, slow), caches))
    assert calls == ["k"] and sum(c.builds for c in caches) == 1
    assert sum(s.waited for s in stores) == 2 and sum(s.pulled for s in stores) == 2
    assert len({(e / "kernel.py").read_text() for e in entries}) == 1


def test_a_failed_build_releases_its_claim_at_once(tmp_path: Path, server: RedisServer) -> None:
    RemoteCache(server.url)._client.flushdb()
    first, second = RemoteCache(server.url), RemoteCache(server.url)

    def fail(tmp: Path) -> None:
        time.sleep(0.3)
        raise RuntimeError("compiler error")

    calls: list[str] = []
    with ThreadPoolExecutor(2) as pool:
        failing = pool.submit(Cache(tmp_path / "a", remote=first).entry, "cpp", {"k": "v"}, fail)
        time.sleep(0.1)
        start = time.monotonic()
        later = Cache(tmp_path / "b", remote=second)
        later.entry("cpp", {"k": "v"}, _writer("v", calls))  # type: ignore[arg-type]
        waited = time.monotonic() - start
    with pytest.raises(RuntimeError, match="compiler error"):
        failing.result()
    assert calls == ["v"] and later.builds == 1 and waited < 2.0
    assert not second._client.keys("building:*")
