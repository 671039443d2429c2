"""The `polyduct` command: --version and the JSON forms of `backends` and `ops`."""

from __future__ import annotations

import json

import pytest
import torch

import polyduct
from polyduct.cli import main
from polyduct.ops import OP_NAMES


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"polyduct {polyduct.__version__}" in out and f"torch {torch.__version__}" in out


def test_backends_json(capsys: pytest.CaptureFixture[str]) -> None:
    main(["backends", "--json"])
    data = json.loads(capsys.readouterr().out)
    kernels = {k["name"]: k for k in data["kernel_backends"]}
    assert kernels["reference"]["distribution"] == "polyduct"
    assert "float32" in kernels["reference"]["dtypes"] and "cpu" in kernels["reference"]["devices"]
    assert kernels["reference"]["defaults"] == {"cpu": 0, "cuda": 0}  # the last resort of auto
    assert "python" in {w["name"] for w in data["wrapper_backends"]}
    assert isinstance(data["load_errors"], list)


def test_ops_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == OP_NAMES
    assert all(r["semantics"] and r["signature"].startswith(r["name"] + "(") for r in rows)
