"""In-place reuse: a kernel writes its output into the storage of an input that dies there."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from polyduct.pipeline import CompiledGraph
from polyduct.wrapper.ir import Allocate, KernelCall, Reuse

from .helpers import check, kernels_of, skip_unless_inplace


@pytest.fixture(autouse=True)
def _inplace_backends(request: pytest.FixtureRequest) -> None:
    if "backends" in request.fixturenames:
        skip_unless_inplace(request.getfixturevalue("backends"))


def reuses(graph: CompiledGraph) -> list[tuple[str, str]]:
    """(new buffer, dead buffer whose storage it takes) for every `Reuse` line."""
    return [(ln.name, ln.old) for ln in graph.program.lines if isinstance(ln, Reuse)]


def call_args(graph: CompiledGraph, kernel: str) -> tuple[str, ...]:
    (call,) = [
        ln for ln in graph.program.lines if isinstance(ln, KernelCall) and ln.kernel == kernel
    ]
    return call.args


def inout(graph: CompiledGraph, kernel: int) -> str:
    """The one buffer kernel number `kernel` reads and writes."""
    (name,) = [b.name for b in graph.specs[kernel].buffers if b.role == "inout"]
    return name


def assert_unique_args(graph: CompiledGraph) -> None:
    for spec in graph.specs:
        names = list(spec.arg_names().values())
        assert len(names) == len(set(names)), (spec.name, names)
        args = call_args(graph, spec.name)
        assert len(args) == len(set(args)), (spec.name, args)


def test_softmax_epilogue_reuses_dying_input(backends: tuple[str, str], device: str) -> None:
    """The softmax kernel's `inner` epilogue writes into the scan result it reads."""
    x = torch.randn(6, 33, device=device)
    x[1, 4] = float("nan")
    x[2] = float("-inf")
    (graph,) = check(lambda a: torch.softmax(a.cumsum(1), 1), backends, x)
    assert kernels_of([graph]) == 2
    assert reuses(graph) == [(inout(graph, 1), "buf0")]
    assert sum(isinstance(ln, Allocate) for ln in graph.program.lines) == 1
    assert sorted(graph.specs[1].arg_names().values()) == ["in_out_ptr0"]
    assert_unique_args(graph)


def test_reduction_result_reuses_dying_input(backends: tuple[str, str], device: str) -> None:
    """A reduction's result (copied out of its local) takes the storage of a same-shape input."""
    x, m = torch.randn(7, device=device), torch.randn(7, 5, device=device)

    def fn(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return (m * x.cumsum(0)[:, None]).sum(1)

    (graph,) = check(fn, backends, x, m)
    assert kernels_of([graph]) == 2
    assert [old for _, old in reuses(graph)] == ["buf0"]
    assert sum(isinstance(ln, Allocate) for ln in graph.program.lines) == 1
    assert_unique_args(graph)


def test_layernorm_epilogue_reuse_in_training_shapes(
    backends: tuple[str, str], device: str
) -> None:
    w, b = torch.randn(48, device=device), torch.randn(48, device=device)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x.cumsum(0), (48,), w, b).relu()

    (graph,) = check(fn, backends, torch.randn(10, 48, device=device), atol=1e-4)
    assert [old for _, old in reuses(graph)] == ["buf0"]
    assert_unique_args(graph)


def test_no_reuse_when_read_after_the_store(backends: tuple[str, str], device: str) -> None:
    """Two outputs read the dying input: only the last writer may take its storage."""

    def fn(x: torch.Tensor) -> Any:
        y = x.cumsum(0)
        return y.sin(), y.cos(), y.exp() * 2

    (graph,) = check(fn, backends, torch.randn(5, 3, device=device), atol=1e-6)
    assert reuses(graph) == [(inout(graph, 1), "buf0")]
    assert len([b for b in graph.specs[1].buffers if b.role == "out"]) == 2
    assert_unique_args(graph)


def test_no_reuse_across_rows_or_layouts(backends: tuple[str, str], device: str) -> None:
    """A reduction reading its input at other points, or with another layout, keeps it."""

    def fn(x: torch.Tensor) -> Any:
        y = x.cumsum(1)
        return torch.softmax(y.flip(1), 1), torch.softmax(x.cumsum(0).t(), 1)

    (graph,) = check(fn, backends, torch.randn(6, 6, device=device))
    assert not reuses(graph)


def test_softmax_gradient_reuses_dying_library_result(
    backends: tuple[str, str], device: str
) -> None:
    """A new tensor returned by a library call (`bmm`) that dies at a kernel takes its output:
    attention's softmax, and its gradient in training, are written over the scores."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 9, 4, generator=g).to(device) for _ in range(2))
    q[0, 1, 2] = float("inf")  # a NaN row through the softmax

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(a @ b.transpose(1, 2), -1)

    (graph,) = check(fn, backends, q, k)
    (extern,) = [old for _, old in reuses(graph)]
    assert extern.startswith("extern")
    assert_unique_args(graph)


def test_no_reuse_of_aliasing_or_mutating_library_results() -> None:
    from polyduct.scheduling.plan import returns_new

    assert returns_new("aten.bmm.default") and returns_new("aten.convolution.default")
    assert not returns_new("aten.copy_.default")  # returns (and mutates) its first argument
    assert not returns_new("aten.transpose.int")  # a view of its argument
    assert not returns_new("aten.no_such_op.default")
