"""Shared fixtures of the core tests: throwaway plugin distributions and an isolated cache."""

from __future__ import annotations

import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polyduct import state

MakeDist = Callable[..., str]
_COUNTER = itertools.count()


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """POLYDUCT_CACHE_DIR pointed at a fresh directory for this test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("POLYDUCT_CACHE_DIR", str(root))
    return root


@pytest.fixture
def fresh_process() -> Iterator[state.ProcessState]:
    """A cold process state for this test (plugins, caches and libraries load afresh); the warm
    one comes back after it."""
    with state.isolated() as fresh:
        yield fresh


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeDist]:
    """Build an installed-looking distribution (dist-info + entry point) on sys.path.

    `make_dist(name, source, version="1.0", entry="...")` writes `source` as the plugin module
    and returns the module's (unique) name. The module and sys.path entry go away after the test.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    modules: list[str] = []

    def make(name: str, source: str, version: str = "1.0", entry: str | None = None) -> str:
        module = f"{name.replace('-', '_')}_plugin_{next(_COUNTER)}"
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[polyduct]\n{entry or module} = {module}\n")
        modules.append(module)
        return module

    yield make
    for module in modules:
        sys.modules.pop(module, None)
