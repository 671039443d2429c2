"""Plugin discovery through real entry points of throwaway distributions built in the test."""

from __future__ import annotations

import pytest
from conftest import MakeDist

from polyduct import cli, plugins
from polyduct.errors import ContestedName, DuplicateName, PluginLoadError, UnknownName
from polyduct.ops import OP_NAMES
from polyduct.plugins import PluginOptions, load_fresh
from polyduct.registry import Origin, Registry

BACKEND = """
from polyduct.handlers.default import DefaultHandler
from polyduct.hookspecs import KernelBackendSpec, hookimpl
from polyduct.kernel import Capabilities, KernelBackend
import torch


class Ops(DefaultHandler):
    {ops_body}


class Backend(KernelBackend):
    name = {name!r}
    caps = Capabilities(devices=frozenset({{"cpu"}}), dtypes=frozenset({{torch.float32}}))
    ops_cls = Ops

    def codegen(self, spec):
        raise NotImplementedError

    def load(self, sources):
        raise NotImplementedError


@hookimpl
def polyduct_kernel_backends():
    return [KernelBackendSpec({name!r}, Backend, lambda options: Backend())]
"""


def backend_source(name: str, ops_body: str = "pass") -> str:
    return BACKEND.format(name=name, ops_body=ops_body)


def test_throwaway_distribution_is_discovered(make_dist: MakeDist) -> None:
    make_dist("polyduct-fake", backend_source("fake"), version="2.5")
    loaded = load_fresh(PluginOptions())
    assert "fake" in loaded.kernel_backends
    assert loaded.kernel_backends.origin("fake") == Origin("polyduct-fake", "2.5")
    assert loaded.distributions["polyduct-fake"] == "2.5"
    assert loaded.kernel_backend("fake").name == "fake"


def test_import_failure_is_recorded_and_others_load(make_dist: MakeDist) -> None:
    make_dist("polyduct-broken", "raise RuntimeError('boom at import')\n")
    make_dist("polyduct-fake", backend_source("fake"))
    loaded = load_fresh(PluginOptions())
    assert "fake" in loaded.kernel_backends
    (error,) = [e for e in loaded.errors if e.distribution == "polyduct-broken"]
    assert error.stage == "import"
    assert "boom at import" in error.message
    assert "Traceback" in error.traceback and "RuntimeError" in error.traceback


def test_strict_mode_makes_failures_fatal(make_dist: MakeDist) -> None:
    make_dist("polyduct-broken", "raise RuntimeError('boom at import')\n")
    assert PluginOptions.from_env({"POLYDUCT_STRICT_PLUGINS": "1"}).strict
    assert not PluginOptions.from_env({"POLYDUCT_STRICT_PLUGINS": "0"}).strict
    with pytest.raises(PluginLoadError, match="polyduct-broken.*boom at import"):
        load_fresh(PluginOptions(strict=True, only=frozenset({"polyduct-broken"})))


def test_backend_missing_an_op_is_refused_naming_it(make_dist: MakeDist) -> None:
    body = "from polyduct.ops import OpHandler\n    exp = vars(OpHandler)['exp']"
    make_dist("polyduct-partial", backend_source("partial", body))
    loaded = load_fresh(PluginOptions())
    assert "partial" not in loaded.kernel_backends
    (error,) = [e for e in loaded.errors if e.distribution == "polyduct-partial"]
    assert "IncompleteBackend" in error.message and "'exp'" not in error.message
    assert error.message.endswith(": exp")
    with pytest.raises(PluginLoadError, match="missing 1 op.*exp"):
        load_fresh(PluginOptions(strict=True, only=frozenset({"polyduct-partial"})))


def test_duplicate_backend_name_is_refused_for_both_distributions(make_dist: MakeDist) -> None:
    make_dist("polyduct-one", backend_source("twin"), version="1.0")
    make_dist("polyduct-two", backend_source("twin"), version="2.0")
    loaded = load_fresh(PluginOptions())
    assert "twin" not in loaded.kernel_backends  # the first to sort does not win silently
    with pytest.raises(ContestedName, match="polyduct-one 1.0 and by polyduct-two 2.0"):
        loaded.kernel_backend("twin")
    for dist in ("polyduct-one", "polyduct-two"):
        (error,) = [e for e in loaded.errors if e.distribution == dist]
        assert "polyduct-one 1.0" in error.message and "polyduct-two 2.0" in error.message
    chosen = load_fresh(PluginOptions.from_env({"POLYDUCT_CHOOSE": "twin=polyduct-two"}))
    assert chosen.kernel_backends.origin("twin") == Origin("polyduct-two", "2.0")
    assert chosen.errors == []


def test_raising_hook_and_misspelled_hook_are_recorded(make_dist: MakeDist) -> None:
    make_dist(
        "polyduct-raises",
        "from polyduct.hookspecs import hookimpl\n"
        "@hookimpl\ndef polyduct_lowerings():\n    raise ValueError('bad lowering table')\n",
    )
    make_dist(
        "polyduct-typo",
        "from polyduct.hookspecs import hookimpl\n"
        "@hookimpl\ndef polyduct_kernel_backend():\n    return []\n",
    )
    loaded = load_fresh(PluginOptions())
    by_dist = {e.distribution: e for e in loaded.errors}
    assert by_dist["polyduct-raises"].stage == "polyduct_lowerings"
    assert "bad lowering table" in by_dist["polyduct-raises"].message
    assert by_dist["polyduct-typo"].stage == "register"
    assert "polyduct_kernel_backend" in by_dist["polyduct-typo"].message


def test_builtin_plugin_registers_python_wrapper() -> None:
    loaded = load_fresh(PluginOptions())
    assert loaded.wrapper_backends.origin("python").distribution == "polyduct"
    assert loaded.wrapper_backend("python").name == "python"


def test_allowlist_loads_only_named_distributions(make_dist: MakeDist) -> None:
    make_dist("polyduct-fake", backend_source("fake"))
    options = PluginOptions.from_env({"POLYDUCT_PLUGINS": "polyduct-fake"})
    assert options.only == frozenset({"polyduct-fake"})
    loaded = load_fresh(options)
    assert loaded.kernel_backends.names() == ["fake"]
    assert "python" not in loaded.wrapper_backends and loaded.errors == []


def test_load_is_cached_per_process() -> None:
    assert plugins.load(PluginOptions()) is plugins.load(PluginOptions())


def test_registry_refuses_duplicates_and_lists_known_names() -> None:
    registry: Registry[int] = Registry("widget")
    registry.add("a", 1, Origin("dist-a", "1"))
    with pytest.raises(DuplicateName, match="'a' is registered twice: by dist-a 1 and by dist-b 2"):
        registry.add("a", 2, Origin("dist-b", "2"))
    with pytest.raises(UnknownName, match="unknown widget 'zz'; installed: a"):
        registry.get("zz")


def test_cli_backends_reports_errors_with_traceback(
    make_dist: MakeDist, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POLYDUCT_STRICT_PLUGINS", raising=False)  # CI sets it; tolerant here
    make_dist("polyduct-broken", "raise RuntimeError('boom at import')\n")
    make_dist("polyduct-fake", backend_source("fake"), version="3.1")
    assert cli.main(["backends"]) == 1
    out = capsys.readouterr().out
    assert "fake" in out and "polyduct-fake 3.1" in out and "devices: cpu" in out
    assert "polyduct-broken 1.0" in out and "boom at import" in out and "Traceback" not in out
    cli.main(["backends", "-v"])
    assert "Traceback (most recent call last)" in capsys.readouterr().out
    assert cli.main(["backends", "--strict"]) == 1
    assert "boom at import" in capsys.readouterr().err


def test_cli_ops_lists_every_op(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ops"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"{len(OP_NAMES)} ops")
    assert all(f"\n{name}(" in "\n" + out for name in OP_NAMES)
