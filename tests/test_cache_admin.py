"""`polyduct cache`: sizes, least-recently-used eviction under a cap, and atomic removal."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from polyduct.cache import Cache
from polyduct.cache_admin import auto_prune, entries, info_lines, parse_size, prune
from polyduct.cli import main
from polyduct.errors import InvalidOption


def _fill(root: Path, name: str, size: int, used: float) -> Path:
    def build(directory: Path) -> None:
        (directory / "blob").write_bytes(os.urandom(size))

    path = Cache(root).entry("ns", {"name": name}, build)
    os.utime(path, (used, used))
    return path


def test_parse_size_units_and_mistakes() -> None:
    assert parse_size("512") == 512
    assert parse_size("4K") == 4096
    assert parse_size("1.5MiB") == 3 << 19
    assert parse_size("2G") == 2 << 30
    with pytest.raises(InvalidOption, match="a size such as"):
        parse_size("lots")


def test_prune_evicts_least_recently_used_first(tmp_path: Path) -> None:
    now = time.time()
    old = _fill(tmp_path, "old", 4000, now - 3000)
    mid = _fill(tmp_path, "mid", 4000, now - 2000)
    new = _fill(tmp_path, "new", 4000, now - 1000)
    result = prune(tmp_path, limit=9000, grace=0)
    assert (result.removed, old.exists(), mid.exists(), new.exists()) == (1, False, True, True)
    assert result.kept < 9000 <= result.kept + result.freed


def test_a_hit_marks_the_entry_used(tmp_path: Path) -> None:
    now = time.time()
    first = _fill(tmp_path, "first", 4000, now - 3000)
    second = _fill(tmp_path, "second", 4000, now - 2000)
    assert Cache(tmp_path).lookup("ns", {"name": "first"}) == first  # used now
    prune(tmp_path, limit=5000, grace=0)
    assert first.exists() and not second.exists()


def test_recently_used_entries_survive_and_clear_leaves_no_partial_entry(tmp_path: Path) -> None:
    _fill(tmp_path, "a", 100, time.time())
    assert prune(tmp_path, limit=0).removed == 0  # inside the grace period
    assert prune(tmp_path, limit=0, grace=0).removed == 1
    assert entries(tmp_path) == []
    assert not [p for p in (tmp_path / "ns").iterdir()]  # nothing renamed aside is left


def test_auto_prune_runs_at_most_hourly(tmp_path: Path) -> None:
    _fill(tmp_path, "a", 5000, time.time() - 4000)
    auto_prune(tmp_path, {"POLYDUCT_CACHE_MAX_SIZE": "1K"})
    assert entries(tmp_path) == []
    _fill(tmp_path, "b", 5000, time.time() - 4000)
    auto_prune(tmp_path, {"POLYDUCT_CACHE_MAX_SIZE": "1K"})
    assert len(entries(tmp_path)) == 1  # the stamp says it ran a moment ago


def test_cache_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POLYDUCT_CACHE_DIR", str(tmp_path))
    _fill(tmp_path, "a", 3000, time.time() - 4000)
    _fill(tmp_path, "b", 3000, time.time() - 4000)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "ns" in out and "total: 2 entries" in out
    assert info_lines(tmp_path, 1 << 30)[1].startswith("size cap: 1.0 GiB")
    assert main(["cache", "prune", "--max-size", "4K", "--grace", "0"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert entries(tmp_path) == []
