"""Shared e2e helpers: compile through torch.compile with polyduct and compare with eager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from polyduct.handlers.count import OpCounter
from polyduct.kernel import Capabilities
from polyduct.pipeline import CompiledGraph
from polyduct.scheduling.kernel_key import trace_stages


def compile_fn(
    fn: Callable[..., Any],
    backends: tuple[str, str],
    options: dict[str, Any] | None = None,
    **kw: Any,
) -> tuple[Callable[..., Any], list[CompiledGraph]]:
    """`fn` compiled with polyduct; the list collects each compiled graph (forward, backward).

    `options` adds polyduct options (`debug_asserts`, ...) to the backends under test.
    """
    torch._dynamo.reset()
    graphs: list[CompiledGraph] = []
    kernels, wrapper = backends
    opts = {"kernels": kernels, "wrapper": wrapper, "observer": graphs.append, **(options or {})}
    return torch.compile(fn, backend="polyduct", options=opts, **kw), graphs


SUITE_DEVICE = "cpu"
"""The device the suite runs on (set from `--polyduct-e2e-device` by the conftest)."""


def flat(value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat(v)]
    return [value]


def assert_same(got: Any, want: Any, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Every tensor of `got` matches `want` (dtype, shape, values with NaN equal)."""
    g, w = flat(got), flat(want)
    assert len(g) == len(w)
    for a, b in zip(g, w, strict=True):
        if not isinstance(b, torch.Tensor):
            assert a == b
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, equal_nan=True)


def check(
    fn: Callable[..., Any],
    backends: tuple[str, str],
    *args: Any,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    **kw: Any,
) -> list[CompiledGraph]:
    """Compile `fn`, run it on `args`, compare with eager; returns the compiled graphs.

    Every tensor argument must live on the suite's device: a test that forgot to build an input
    there fails instead of quietly testing the CPU in a CUDA run.
    """
    want = torch.device(SUITE_DEVICE).type
    for arg in flat(args):
        if isinstance(arg, torch.Tensor):
            assert arg.device.type == want, f"input on {arg.device}, the suite runs on {want}"
    compiled, graphs = compile_fn(fn, backends, **kw)
    assert_same(compiled(*args), fn(*args), atol=atol, rtol=rtol)
    assert graphs, "polyduct compiled nothing"
    return graphs


def kernels_of(graphs: list[CompiledGraph]) -> int:
    return sum(g.kernel_count for g in graphs)


def on(device: str, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """`tensors` moved to `device` (inputs built on the CPU from a seeded generator)."""
    return tuple(t.to(device) for t in tensors)


def skip_on_cuda(device: str, reason: str) -> None:
    """Skip the calling test when the suite runs on CUDA, saying why."""
    if torch.device(device).type == "cuda":
        pytest.skip(f"not run on CUDA: {reason}")


def kernel_caps(backends: tuple[str, str]) -> Capabilities:
    """The `Capabilities` the kernel backend under test declares."""
    from polyduct import plugins

    return plugins.load().kernel_backends[backends[0]].backend_cls.caps


def skip_unless_inplace(backends: tuple[str, str]) -> None:
    """Skip the calling test where the kernel backend never writes into an input's storage
    (`Capabilities.inplace`: Halide's pipelines do not)."""
    if not kernel_caps(backends).inplace:
        pytest.skip(f"{backends[0]!r} kernels take no input's storage (caps.inplace)")


def traced_ops(graphs: list[Any], op: str) -> int:
    """How many times the compiled graphs' kernels compute `op` (per element)."""
    total = 0
    for spec in (s for g in graphs for s in g.specs):
        counter = OpCounter()
        trace_stages(spec, counter)
        total += counter.counts.get(op, 0)
    return total
