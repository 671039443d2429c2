"""A backend of twelve ops, loaded from docs/backend-authors.md and installed as a distribution:
the conformance suite passes it with everything else skipped and reported, and torch.compile runs
the kernels it cannot build on a fallback backend, named in the graph's fallback report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from doc_blocks import ROOT, example

from polyduct import plugins
from polyduct.conformance.runner import Selection, run_backend
from polyduct.kernel import check_complete

DOC = ROOT / "docs" / "backend-authors.md"


@pytest.fixture
def tiny(make_dist: Any, isolated_cache: Path, fresh_process: object) -> Any:
    """The docs' backend, installed as distribution `polyduct-tiny`; fresh plugin loading."""
    module = make_dist("polyduct-tiny", example(DOC, "polyduct_tiny.py"), entry="tiny")
    loaded = plugins.load()
    assert "tiny" in loaded.kernel_backends.names(), loaded.errors
    return __import__(module)


def test_the_docs_backend_has_twelve_ops_and_registers(tiny: Any) -> None:
    assert len(tiny.TINY_OPS) == 12
    check_complete(tiny.TinyBackend)  # 135 ops declared unsupported, none missing


def test_conformance_passes_what_it_has_and_skips_the_rest(tiny: Any) -> None:
    """Every op and graph case (two dtypes keep it short): nothing fails, the twelve ops pass,
    and every other cell is skipped with the reason its backend declared."""
    report = run_backend(
        "tiny",
        tiny.TinyBackend(),
        plugins.load().wrapper_backend("python"),
        Selection(dtypes=("float32", "int64")),
    )
    cells = report.cells.values()
    assert report.counts()["failed"] == 0, [c.reason for c in cells if c.status == "failed"]
    passed = {c.op for c in cells if c.status == "passed"}
    assert passed <= {*tiny.TINY_OPS, "graph.views"}, passed
    assert {"exp", "add", "maximum", "graph.views"} <= passed
    skipped = [c for c in cells if c.status == "skipped"]
    assert len(skipped) > 150  # 135 ops declared unsupported, most in both dtypes
    assert all(c.reason.startswith("declared unsupported") for c in skipped), {
        c.reason for c in skipped if not c.reason.startswith("declared unsupported")
    }
    fusion = report.cells[("graph.pointwise_fusion", "float32")]
    assert fusion.status == "skipped"
    assert "declares" in fusion.reason and "sin" in fusion.reason and "ran on" in fusion.reason


def _program(
    x: torch.Tensor, y: torch.Tensor, z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.exp(x * y + 1) - x / 3  # tiny's ops only
    return a, torch.sin(z).sum(dim=1)  # sin and a reduction: not tiny's (another kernel)


def test_torch_compile_falls_back_for_unsupported_ops_and_says_so(tiny: Any) -> None:
    torch._dynamo.reset()
    graphs: list[Any] = []
    options = {"kernels": "tiny", "observer": graphs.append}
    x, y, z = torch.randn(13, 29), torch.randn(13, 29), torch.randn(5, 7)
    x[0, :3] = torch.tensor([0.0, -0.0, 1e-38])
    got = torch.compile(_program, backend="polyduct", options=options)(x, y, z)
    torch._dynamo.reset()
    for g, w in zip(got, _program(x, y, z), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    (graph,) = graphs
    backends = {s.backend for s in graph.sources.values()}
    assert "tiny" in backends and len(backends) == 2, backends
    (fallback,) = [b for b in backends if b != "tiny"]
    (line,) = graph.report.kernels
    assert "tiny declares" in line and "sin" in line and f"ran on {fallback}" in line
    assert line in str(graph.report)
