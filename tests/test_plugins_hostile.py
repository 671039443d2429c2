"""Plugins that misbehave at import or claim what is not theirs: reported, never in charge."""

from __future__ import annotations

import pytest
from conftest import MakeDist
from test_plugins import backend_source

from polyduct import cli
from polyduct.plugins import PluginOptions, load_fresh

HANGS = "import threading\nthreading.Event().wait()\n"


@pytest.mark.parametrize(
    "source",
    ["raise SystemExit(3)\n", "class Odd(BaseException):\n    pass\nraise Odd('odd')\n"],
    ids=["SystemExit", "BaseException"],
)
def test_any_import_failure_is_a_load_error(make_dist: MakeDist, source: str) -> None:
    make_dist("polyduct-exits", source)
    make_dist("polyduct-fake", backend_source("fake"))
    loaded = load_fresh(PluginOptions())  # the process goes on
    assert "fake" in loaded.kernel_backends
    (error,) = [e for e in loaded.errors if e.distribution == "polyduct-exits"]
    assert error.stage == "import" and ("SystemExit: 3" in error.message or "Odd" in error.message)


def test_a_plugin_hanging_at_import_is_reported_after_the_time_limit(make_dist: MakeDist) -> None:
    make_dist("polyduct-hangs", HANGS)
    make_dist("polyduct-fake", backend_source("fake"))
    loaded = load_fresh(PluginOptions(import_timeout=0.5))
    assert "fake" in loaded.kernel_backends
    (error,) = [e for e in loaded.errors if e.distribution == "polyduct-hangs"]
    assert error.stage == "import" and "did not finish within 0.5 s" in error.message


def test_cli_backends_survives_a_hanging_plugin(
    make_dist: MakeDist, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POLYDUCT_STRICT_PLUGINS", raising=False)
    monkeypatch.setenv("POLYDUCT_PLUGIN_TIMEOUT", "0.5")
    make_dist("polyduct-hangs", HANGS)
    assert cli.main(["backends"]) == 1
    out = capsys.readouterr().out
    assert "polyduct-hangs 1.0" in out and "did not finish within 0.5 s" in out


def test_an_entry_point_name_never_stands_in_for_a_backend(make_dist: MakeDist) -> None:
    make_dist("polyduct-aaa", backend_source("other"), entry="twin")
    make_dist("polyduct-zzz", backend_source("twin"), entry="twin")
    loaded = load_fresh(PluginOptions())
    assert loaded.errors == []
    assert loaded.kernel_backends.origin("twin").distribution == "polyduct-zzz"
    assert loaded.kernel_backends.origin("other").distribution == "polyduct-aaa"


def test_a_third_claimant_is_named_too(make_dist: MakeDist) -> None:
    for dist in ("polyduct-a", "polyduct-b", "polyduct-c"):
        make_dist(dist, backend_source("twin"))
    loaded = load_fresh(PluginOptions())
    assert "twin" not in loaded.kernel_backends
    assert len(loaded.errors) == 3
    assert all(
        "polyduct-a 1.0 and by polyduct-b 1.0 and by polyduct-c 1.0" in e.message
        for e in loaded.errors
    )
