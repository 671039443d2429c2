"""The conformance suite itself: case coverage, comparison rules, and each way of running it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from polyduct.conformance.runner import SPECIAL, Selection, all_probes, run_backend
from polyduct.conformance.table import CASES
from polyduct.conformance.tolerance import Tol, compare, mismatch_mask, ulp_distance
from polyduct.ops import OP_NAMES
from polyduct.plugins import load

HERE = Path(__file__).parent
BROKEN = "test_conformance_helpers:BrokenBackend"
FLOAT_DTYPES = {"float16", "bfloat16", "float32", "float64"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return env


def test_cases_cover_the_op_set_exactly_once() -> None:
    names = [c.op for c in CASES] + [s.op for s in SPECIAL]
    assert len(names) == len(set(names)), "an op has two rows"
    assert set(names) == OP_NAMES


def test_every_op_has_probes_on_every_domain_dtype() -> None:
    probes = all_probes(Selection())
    cells = {(p.op, p.dtype) for p in probes}
    for case in (*CASES, *SPECIAL):
        for dtype in case.domain:
            assert (case.op, dtype) in cells


def test_ulps_and_signed_zero() -> None:
    one = torch.tensor([1.0], dtype=torch.float32)
    nxt = torch.nextafter(one, torch.tensor([2.0]))
    assert ulp_distance(nxt, one).item() == 1
    zeros, negzeros = torch.zeros(2), -torch.zeros(2)
    assert not mismatch_mask(zeros, negzeros, Tol()).any()
    assert mismatch_mask(zeros, negzeros, Tol(signed_zero=True)).all()
    nan = torch.tensor([float("nan"), float("inf")])
    assert not mismatch_mask(nan, nan.clone(), Tol()).any()
    assert mismatch_mask(nan, torch.tensor([1.0, -float("inf")]), Tol(ulps=99)).all()


def test_mismatch_names_position_inputs_and_both_values() -> None:
    a = torch.arange(6.0).reshape(2, 3)
    got = a.clone()
    got[1, 2] = 99.0
    bad = compare("o0", got, a, Tol(), {"a0": a})
    assert bad is not None and bad.count == 1
    assert "at (1, 2): inputs(a0=5.0) got 99.0 want 5.0" in str(bad)


def test_reference_backend_passes_every_cell() -> None:
    plugins = load()
    report = run_backend(
        "reference",
        plugins.kernel_backend("reference"),
        plugins.wrapper_backend("python"),
        Selection(),
    )
    failed = {(c.op, c.dtype) for c in report.cells.values() if c.status == "failed"}
    assert failed == set()
    assert report.static is not None and report.static.missing == []
    assert report.counts()["skipped"] == 0
    assert report.modules < 40, "cases are not batched"


def _broken_report(ops: str = "^(sub|hypot|add)$"):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(HERE))
    from test_conformance_helpers import BrokenBackend

    return run_backend("broken", BrokenBackend(), None, Selection(ops=ops))


def test_runner_names_the_broken_op_and_dtype() -> None:
    report = _broken_report()
    failed = {(c.op, c.dtype) for c in report.cells.values() if c.status == "failed"}
    assert failed == {("sub", "int16")} | {("hypot", d) for d in FLOAT_DTYPES}
    assert report.static is not None and report.static.missing == ["hypot"]
    cell = report.cells[("sub", "int16")]
    result = next(r for r in cell.results if r.status == "failed")
    assert "elements differ" in result.message and "def " in result.source


def test_cli_catches_broken_backend_and_writes_reports(tmp_path: Path) -> None:
    out = {k: tmp_path / f"r.{k}" for k in ("json", "junit", "html")}
    cmd = [
        sys.executable,
        "-m",
        "polyduct.conformance.cli",
        "conformance",
        "--backend",
        BROKEN,
        "--ops",
        "^(sub|hypot|add)$",
        "--wrapper",
        "none",
    ]
    for key, path in out.items():
        cmd += [f"--{key}", str(path)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    # 22 cells (add, sub: 9 dtypes; hypot: 4); failed: sub[int16], 4 hypot cells, static (hypot)
    assert lines[-1] == "17 passed, 6 failed, 0 skipped"
    assert "FAILED sub[int16:contiguous]" in proc.stdout
    assert "MISSING ops (1): hypot" in proc.stdout
    doc = json.loads(out["json"].read_text())
    cells = {(c["op"], c["dtype"]): c["status"] for c in doc["backends"][0]["cells"]}
    assert cells[("sub", "int16")] == "failed" and cells[("sub", "int32")] == "passed"
    failures = {
        tc.get("name")
        for tc in ET.parse(out["junit"]).iter("testcase")
        if tc.find("failure") is not None
    }
    assert "sub[int16]" in failures and "hypot[float32]" in failures
    html = out["html"].read_text()
    assert 'id="broken-sub-int16"' in html and 'class="failed"' in html


def test_pytest_plugin_catches_broken_backend(tmp_path: Path) -> None:
    # No conftest: the plugin loads through polyduct's pytest11 entry point, in any directory.
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(tmp_path),
        f"--polyduct-backend={BROKEN}",
        "--polyduct-ops=^(sub|hypot)$",
    ]
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED ::conformance[" in proc.stdout
    assert "conformance[test_conformance_helpers:BrokenBackend-sub-int16]" in proc.stdout
    assert "hypot-float64]" in proc.stdout
    assert "6 failed" in proc.stdout.splitlines()[-1]  # static, 4 hypot dtypes, sub[int16]


def test_graph_cases_skip_a_backend_torch_compile_cannot_name() -> None:
    report = _broken_report(ops="^graph\\.")
    assert len(report.cells) >= 6
    for cell in report.cells.values():
        assert cell.status == "skipped" and "torch.compile" in cell.reason


@pytest.mark.parametrize("category", ["random", "scan", "graph"])
def test_category_selection(category: str) -> None:
    probes = all_probes(Selection(categories=(category,)))
    assert probes and {p.category for p in probes} == {category}
