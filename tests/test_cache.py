"""The content-addressed cache: hits, tampered entries rebuilt, unsafe directories refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from polyduct.cache import Cache, CacheError, default_root

KEY = {"source": "int f(void) { return 1; }", "compiler": "cc 1.0", "flags": "-O2"}


class Builder:
    """Writes `artifact.txt`; counts how often it ran."""

    def __init__(self, text: str = "built") -> None:
        self.text, self.calls = text, 0

    def __call__(self, directory: Path) -> None:
        self.calls += 1
        (directory / "artifact.txt").write_text(self.text)


def test_second_lookup_is_a_hit(tmp_path: Path) -> None:
    cache, build = Cache(tmp_path / "c"), Builder()
    first = cache.entry("ns", KEY, build)
    assert cache.entry("ns", KEY, build) == first
    assert (build.calls, cache.builds, cache.hits) == (1, 1, 1)
    assert cache.entry("ns", {**KEY, "flags": "-O3"}, build) != first  # every input is keyed


def test_lookup_finds_valid_entries_and_builds_nothing(tmp_path: Path) -> None:
    cache, build = Cache(tmp_path / "c"), Builder()
    assert cache.lookup("ns", KEY) is None
    assert not (tmp_path / "c").exists()  # a miss writes nothing
    entry = cache.entry("ns", KEY, build)
    assert cache.lookup("ns", KEY) == entry and cache.hits == 1
    (entry / "artifact.txt").write_text("planted")  # no longer what was built: a miss
    assert cache.lookup("ns", KEY) is None and build.calls == 1


def test_an_entry_built_meanwhile_by_another_process_is_kept(tmp_path: Path) -> None:
    """Two processes building one entry at once: the second to finish keeps the first's entry
    (which the first may be importing) instead of replacing it."""
    ours, theirs = Cache(tmp_path / "c"), Cache(tmp_path / "c")
    first = Builder("theirs")

    def build(directory: Path) -> None:
        (directory / "artifact.txt").write_text("ours")
        entry = theirs.entry("ns", KEY, first)  # finishes while ours is still building
        kept.append((entry / "artifact.txt").stat().st_ino)

    kept: list[int] = []
    entry = ours.entry("ns", KEY, build)
    assert (entry / "artifact.txt").read_text() == "theirs"
    assert (entry / "artifact.txt").stat().st_ino == kept[0]  # the same file, never replaced
    assert [p.name for p in (tmp_path / "c" / "ns").iterdir()] == [entry.name]  # no leftovers


def test_tampered_key_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    cache, build = Cache(tmp_path / "c"), Builder()
    entry = cache.entry("ns", KEY, build)
    (entry / "key.json").write_text('{"namespace": "ns", "inputs": {"source": "evil"}}')
    (entry / "artifact.txt").write_text("planted")
    again = cache.entry("ns", KEY, build)
    assert build.calls == 2
    assert (again / "artifact.txt").read_text() == "built"


def test_tampered_artifact_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    cache, build = Cache(tmp_path / "c"), Builder()
    entry = cache.entry("ns", KEY, build)
    (entry / "artifact.txt").write_text("planted")
    again = cache.entry("ns", KEY, build)
    assert (again / "artifact.txt").read_text() == "built"


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c")

    def broken(directory: Path) -> None:
        (directory / "half.txt").write_text("partial")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        cache.entry("ns", KEY, broken)
    assert list((tmp_path / "c" / "ns").iterdir()) == []


def test_cache_directories_are_private(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c")
    cache.entry("ns", KEY, Builder())
    for directory in (tmp_path / "c", tmp_path / "c" / "ns"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_foreign_writable_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(CacheError, match="writable by others"):
        Cache(root).entry("ns", KEY, Builder())
    (root / "ns").mkdir()
    with pytest.raises(CacheError, match="writable by others"):  # a lookup trusts it no more
        Cache(root).lookup("ns", KEY)


@pytest.mark.skipif(os.getuid() != 0, reason="changing a directory's owner needs root")
def test_foreign_owned_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    os.chown(root, 54321, 54321)
    with pytest.raises(CacheError, match="owned by uid 54321"):
        Cache(root).entry("ns", KEY, Builder())


def test_default_root_is_per_user_and_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLYDUCT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/someone/.cache")
    assert default_root() == Path("/home/someone/.cache/polyduct")
    monkeypatch.setenv("POLYDUCT_CACHE_DIR", "/srv/cache")
    assert default_root() == Path("/srv/cache")
