"""A compile imports only the plugins it needs, once the plugin index knows who registers what."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import MakeDist
from test_plugins import backend_source
from test_plugins_hostile import HANGS

from polyduct import state
from polyduct.errors import ContestedName
from polyduct.plugin_index import AUTO, load_for
from polyduct.plugins import PluginOptions


@pytest.fixture
def fresh(isolated_cache: Path, monkeypatch: pytest.MonkeyPatch, fresh_process: object) -> None:
    monkeypatch.delenv("POLYDUCT_STRICT_PLUGINS", raising=False)
    monkeypatch.setenv("POLYDUCT_PLUGIN_TIMEOUT", "0.5")


def _forget(*modules: str) -> None:
    state.reset()
    for module in modules:
        sys.modules.pop(module, None)


def test_only_the_needed_distributions_are_imported(make_dist: MakeDist, fresh: None) -> None:
    fake = make_dist("polyduct-fake", backend_source("fake"))
    other = make_dist("polyduct-other", backend_source("other"))
    first = load_for({"fake", "python"})  # no index yet: everything loads, the index is written
    assert {"fake", "other"} <= set(first.kernel_backends.names())
    _forget(fake, other)
    second = load_for({"fake", "python"})
    assert "fake" in second.kernel_backends and "python" in second.wrapper_backends
    assert other not in sys.modules and "other" not in second.kernel_backends


def test_a_hanging_plugin_blocks_one_load_only(make_dist: MakeDist, fresh: None) -> None:
    hangs = make_dist("polyduct-hangs", HANGS)
    fake = make_dist("polyduct-fake", backend_source("fake"))
    first = load_for({"fake", "python"})
    assert [e.distribution for e in first.errors] == ["polyduct-hangs"]
    _forget(fake)
    second = load_for({"fake", "python"})  # importing it again would time out again
    assert "fake" in second.kernel_backends
    # reported from the record, as the first load met it: not imported a second time
    assert [e.distribution for e in second.errors] == ["polyduct-hangs"]
    assert hangs in sys.modules  # imported (and stuck) the first time only


def test_every_claimant_of_a_needed_contested_name_is_loaded(
    make_dist: MakeDist, fresh: None
) -> None:
    one = make_dist("polyduct-one", backend_source("twin"))
    two = make_dist("polyduct-two", backend_source("twin"))
    load_for({"twin", "python"})
    _forget(one, two)
    with pytest.raises(ContestedName, match="polyduct-one 1.0 and by polyduct-two 1.0"):
        load_for({"twin", "python"}).kernel_backend("twin")


def test_the_index_can_be_switched_off(make_dist: MakeDist, fresh: None) -> None:
    fake = make_dist("polyduct-fake", backend_source("fake"))
    other = make_dist("polyduct-other", backend_source("other"))
    load_for({"fake"})
    _forget(fake, other)
    assert "other" in load_for({"fake"}, PluginOptions(), use_index=False).kernel_backends


def test_auto_loads_the_backends_that_declare_device_defaults(
    make_dist: MakeDist, fresh: None
) -> None:
    fake = make_dist("polyduct-fake", backend_source("fake"))  # declares no defaults
    load_for({AUTO, "python"})
    _forget(fake)
    second = load_for({AUTO, "python"})
    assert "reference" in second.kernel_backends and "fake" not in second.kernel_backends
    assert all(spec.defaults for _, spec in second.kernel_backends.items())
