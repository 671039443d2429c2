"""Mistakes are loud: selections of nothing, unknown option keys, modes, plugins that fail to load."""

from __future__ import annotations

import re
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import torch

from polyduct.builtin import _reference_factory
from polyduct.cli import main
from polyduct.errors import InvalidOption
from polyduct.frontend.entry_checks import check_arguments
from polyduct.frontend.options import FrontendOptions
from polyduct.overrides import scope_from_set


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ops", "nosuchop"], "matches no case"),
        (["--dtypes", "float33"], "unknown dtype.*float33.*float32"),
        (["--ops", "exp(("], "not a regular expression"),
    ],
)
def test_conformance_selection_of_nothing_fails(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "--backend", "reference", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")

    assert re.search(message, err), err


def test_conformance_output_is_quiet_and_junit_counts_are_right(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "out.xml"
    argv = ["conformance", "--backend", "reference", "--ops", "^(exp|sin)$", "--junit", str(junit)]
    assert main([*argv, "--dtypes", "float32,int8"]) == 0
    out = capsys.readouterr().out
    assert "SKIPPED" not in out and "skipped sin" not in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert int(suite.get("tests", -1)) == len(cases) > 2
    assert int(suite.get("skipped", -1)) == sum(c.find("skipped") is not None for c in cases)
    assert int(suite.get("failures", -1)) == sum(c.find("failure") is not None for c in cases)


def test_unknown_option_keys_raise_naming_the_known_ones() -> None:
    with pytest.raises(InvalidOption, match="kernal.*one of kernels, wrapper"):
        FrontendOptions.from_mapping({"kernal": "cpp"})
    with pytest.raises(InvalidOption, match="reference: option fast=True"):
        _reference_factory({"fast": True})
    with pytest.raises(InvalidOption, match="exp.kernal.*one of kernels, extern, fuse, lowering"):
        scope_from_set("mine", {"exp": {"kernal": "cpp"}})


def test_unknown_torch_compile_mode_raises_and_others_warn_once() -> None:
    with pytest.raises(InvalidOption, match="mode='fastest'.*max-autotune"):
        check_arguments({"mode": "fastest"})
    with pytest.raises(InvalidOption, match="dynamic_shapes"):
        check_arguments({"dynamic_shapes": True})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            check_arguments({"mode": "max-autotune-no-cudagraphs"})
        check_arguments({"mode": "default"})
        check_arguments({"mode": "reduce-overhead"})  # implemented: CUDA graphs
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "does not tune matmul templates" in str(caught[0].message)


def test_torch_compile_mode_max_autotune_is_warned_about() -> None:
    torch._dynamo.reset()
    with pytest.warns(UserWarning, match="mode='max-autotune'.*compiling as mode='reduce-overhead'"):
        out = torch.compile(torch.sin, backend="polyduct", mode="max-autotune")(torch.ones(3))
    torch._dynamo.reset()
    torch.testing.assert_close(out, torch.sin(torch.ones(3)))


def test_plugin_load_failure_is_warned_about_at_torch_compile(
    make_dist: Any, monkeypatch: pytest.MonkeyPatch, fresh_process: object
) -> None:
    make_dist("polyduct-broken", "raise RuntimeError('no compiler here')\n")
    monkeypatch.delenv("POLYDUCT_STRICT_PLUGINS", raising=False)  # CI makes failures fatal
    torch._dynamo.reset()
    with pytest.warns(UserWarning, match="polyduct-broken.*failed to load.*no compiler here"):
        torch.compile(torch.cos, backend="polyduct", options={"kernels": "reference"})(
            torch.ones(2)
        )
    torch._dynamo.reset()
