"""`python -m bench kernels`: the per-kernel profile of a compiled model."""

from __future__ import annotations

import pytest
import torch

from bench.__main__ import main
from bench.model_kernels import _captured, profile_graph


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


class _WithConstant(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * torch.tensor([1.0, -2.0, 3.0])  # a tensor constant of the graph


def test_a_graph_with_tensor_constants_is_profiled() -> None:
    # The profile called the wrapper with the graph's inputs only; the constants that graph.fn
    # appends were missing (DeBERTa-v2: "expected count 60, got 52").
    (graph, args), = _captured(_WithConstant(), {"x": torch.randn(4, 3)}, "cpp", train=False)
    assert graph.attrs
    per_call, parts, _ = profile_graph(graph, args, calls=3)
    assert per_call > 0 and parts
