"""The extension point through entry points: a throwaway distribution overrides compile_graph."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from helpers import PyLoader, add_program

from polyduct.plugins import PluginOptions, load_fresh
from polyduct_fx import FxWrapper

PLUGIN = '''
"""Adds 1 to every output: a post-processing FX backend in one hook."""
from __future__ import annotations

import operator

import torch.fx

from polyduct.hookspecs import WrapperBackendSpec, hookimpl
from polyduct_fx import FxWrapper


class PlusOneFx(FxWrapper):
    name = "fx_plus1"

    def compile_graph(self, gm: torch.fx.GraphModule):
        output = next(n for n in gm.graph.nodes if n.op == "output")
        with gm.graph.inserting_before(output):
            bumped = [gm.graph.call_function(operator.add, (v, 1)) for v in output.args[0]]
        output.args = (bumped,)
        gm.graph.lint()
        gm.recompile()
        return gm


@hookimpl
def polyduct_wrapper_backends():
    return [WrapperBackendSpec("fx_plus1", PlusOneFx, lambda options: PlusOneFx())]
'''


def make_distribution(site: Path) -> None:
    (site / "plusone_fx.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "plusone_fx-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plusone-fx\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[polyduct]\nfx_plus1 = plusone_fx\n")


def test_fx_is_found_through_its_entry_point() -> None:
    plugins = load_fresh(PluginOptions())
    assert isinstance(plugins.wrapper_backend("fx"), FxWrapper)
    assert plugins.distributions["polyduct-fx"] == "0.1.0"


def test_compile_graph_override_from_another_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: PyLoader
) -> None:
    make_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = load_fresh(PluginOptions())
    assert not [e for e in plugins.errors if e.distribution in ("plusone-fx", "polyduct-fx")]
    wrapper = plugins.wrapper_backend("fx_plus1")
    run = wrapper.build(add_program(5), loader)
    x, y = torch.randn(5), torch.randn(5)
    torch.testing.assert_close(run(x, y)[0], (x + y) * 2 + 1)
    print(run.code)


def test_unknown_fx_option_is_refused() -> None:
    from polyduct.errors import InvalidOption
    from polyduct.plugins import load

    with pytest.raises(InvalidOption, match="fx: option dump=True.*takes none"):
        load().wrapper_backend("fx", {"dump": True})
