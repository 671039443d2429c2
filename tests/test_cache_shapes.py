"""The cache against odd shapes on disk: byte-code files, files where directories belong, links,
a root that is a file, and the temporary directories of builds that were killed."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import py_compile
from pathlib import Path

import pytest

from polyduct.cache import STALE_TMP_S, Cache, CacheError, import_module_file

KEY = {"source": "VALUE = 1", "python": "3"}


def _write_module(directory: Path) -> None:
    (directory / "wrapper.py").write_text("VALUE = 1\n")


def _plant_bytecode(source: Path, text: str) -> None:
    """A valid `.pyc` for `source`'s path and stats whose code is `text` (same length)."""
    evil = source.with_name("evil.py")
    evil.write_text(text)
    info = source.stat()
    os.utime(evil, ns=(info.st_atime_ns, info.st_mtime_ns))
    cfile = importlib.util.cache_from_source(str(source))
    py_compile.compile(str(evil), cfile=cfile, doraise=True)
    evil.unlink()


def test_a_planted_bytecode_file_is_never_executed(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c")
    entry = cache.entry("ns", KEY, _write_module)
    assert import_module_file(entry / "wrapper.py", "shape_mod_a").VALUE == 1
    assert not (entry / "__pycache__").exists()  # importing writes no byte-code into an entry
    _plant_bytecode(entry / "wrapper.py", "VALUE = 2\n")
    # imported from the checked bytes, not the .pyc Python's own loader would prefer
    assert import_module_file(entry / "wrapper.py", "shape_mod_b").VALUE == 1
    again = cache.entry("ns", KEY, _write_module)  # an unrecorded file: the entry is rebuilt
    assert cache.builds == 2 and not (again / "__pycache__").exists()


def test_a_corrupt_bytecode_file_does_not_break_later_compiles(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c")
    entry = cache.entry("ns", KEY, _write_module)
    _plant_bytecode(entry / "wrapper.py", "VALUE = 2\n")
    pyc = Path(importlib.util.cache_from_source(str(entry / "wrapper.py")))
    pyc.write_bytes(pyc.read_bytes()[:16] + b"\xff" * 20)  # bad marshal data
    assert import_module_file(entry / "wrapper.py", "shape_mod_c").VALUE == 1


def test_a_file_changed_after_the_check_is_refused_at_import(tmp_path: Path) -> None:
    entry = Cache(tmp_path / "c").entry("ns", KEY, _write_module)
    (entry / "wrapper.py").write_text("VALUE = 3\n")
    with pytest.raises(CacheError, match="does not match the digest"):
        import_module_file(entry / "wrapper.py", "shape_mod_d")


@pytest.mark.parametrize("shape", ["file", "link", "dangling link"])
def test_an_entry_of_another_shape_is_replaced(tmp_path: Path, shape: str) -> None:
    cache = Cache(tmp_path / "c")
    entry = cache.entry("ns", KEY, _write_module)
    elsewhere = tmp_path / "elsewhere"
    os.rename(entry, elsewhere)
    if shape == "file":
        entry.write_text("not a directory")
    else:
        entry.symlink_to(elsewhere if shape == "link" else tmp_path / "missing")
    again = cache.entry("ns", KEY, _write_module)
    assert again.is_dir() and not again.is_symlink() and cache.builds == 2


def test_a_link_inside_an_entry_makes_it_invalid(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c")
    entry = cache.entry("ns", KEY, _write_module)
    target = tmp_path / "same.py"
    target.write_text("VALUE = 1\n")
    (entry / "wrapper.py").unlink()
    (entry / "wrapper.py").symlink_to(target)  # same bytes, but no longer the entry's own file
    again = cache.entry("ns", KEY, _write_module)
    assert not (again / "wrapper.py").is_symlink() and cache.builds == 2


def test_a_namespace_that_is_a_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir(mode=0o700)
    (tmp_path / "c" / "ns").write_text("junk")
    entry = Cache(tmp_path / "c").entry("ns", KEY, _write_module)
    assert (entry / "wrapper.py").read_text() == "VALUE = 1\n"


def test_a_root_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "c").write_text("junk")
    with pytest.raises(CacheError, match="is not a directory"):
        Cache(tmp_path / "c").entry("ns", KEY, _write_module)
    with pytest.raises(CacheError, match="cannot create cache root"):
        Cache(tmp_path / "c" / "below").entry("ns", KEY, _write_module)


def test_killed_builds_are_reaped_and_live_ones_kept(tmp_path: Path) -> None:
    ns = tmp_path / "c" / "ns"
    ns.mkdir(parents=True, mode=0o700)
    (tmp_path / "c").chmod(0o700)
    dead, live, young = ns / ".aaaa-dead", ns / ".bbbb-live", ns / ".cccc-young"
    for path in (dead, live, young):
        path.mkdir()
        (path / "half.o").write_text("partial")
    old = os.path.getmtime(dead) - 2 * STALE_TMP_S
    for path in (dead, live):
        os.utime(path, (old, old))
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a build still running in another process
        Cache(tmp_path / "c").entry("ns", KEY, _write_module)
    finally:
        os.close(fd)
    assert not dead.exists() and live.exists() and young.exists()
