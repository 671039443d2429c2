"""`python -m bench kernels`: the per-kernel profile of a compiled model."""

from __future__ import annotations

import pytest

from bench.__main__ import main


def test_profile_names_every_kernel_and_library_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "--model", "mlp_mixer", "--calls", "3", "--top", "100", "--show", "kernel0"]) == 0
    out = capsys.readouterr().out
    assert "inference graph 0:" in out and "ms per call" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  ") and line.endswith(" us")]
    names = {row[0] for row in rows}
    assert {"aten.mm.default", "aten.convolution.default", "kernel0"} <= names
    parts = sum(float(row[-2]) for row in rows if row[0] != "sum")
    total = next(float(row[-2]) for row in rows if row[0] == "sum")
    assert parts == pytest.approx(total, rel=1e-3) and total > 0
    assert '#include "polyduct_cpp.h"' in out  # --show printed kernel0's source
