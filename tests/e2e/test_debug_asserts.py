"""Debug asserts (`POLYDUCT_DEBUG_ASSERTS=1`): every kernel's and extern call's outputs are checked
against the size, stride and dtype the IR expects, and a kernel writing the wrong dtype is caught."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from polyduct.errors import InputMismatch
from polyduct.kernel import KernelFn
from polyduct.plugins import Plugins
from polyduct.wrapper.ir import InputAssert, KernelDefinition

from .helpers import assert_same, check, compile_fn
from .test_training import Block


def program(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor) -> Any:
    """Scan, softmax, an extern mm, a scatter, a bool and an int64 result: several kernels."""
    y = x.cumsum(1)
    p = torch.softmax(y @ w, -1)
    s = torch.zeros_like(p).scatter_add(1, idx, p[:, : idx.shape[1]])
    return s * 2, p > 0.1, p.argmax(1)


def inputs(device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 8, generator=g), torch.randn(8, 5, generator=g)
    idx = torch.randint(0, 5, (6, 3), generator=g)
    return x.to(device), w.to(device), idx.to(device)


def output_asserts(lines: Sequence[object]) -> list[InputAssert]:
    return [ln for ln in lines if isinstance(ln, InputAssert) and ln.producer]


def test_every_kernel_output_is_asserted(backends: tuple[str, str], device: str) -> None:
    graphs = check(program, backends, *inputs(device), options={"debug_asserts": True})
    (graph,) = graphs
    asserted = {(a.producer, a.name) for a in output_asserts(graph.program.lines)}
    for spec in graph.specs:
        for buf in spec.buffers:
            if buf.role in ("out", "inout"):
                assert (spec.name, buf.name) in asserted, (spec.name, buf.name)
    assert any(p.startswith("aten.mm") for p, _ in asserted), "extern results are checked too"
    for a in output_asserts(graph.program.lines):
        want = f'assert_input("{a.name}", '
        assert backends[1] != "python" or want in graph.source


def test_asserts_off_by_default(backends: tuple[str, str], device: str) -> None:
    (graph,) = check(program, backends, *inputs(device))
    assert not output_asserts(graph.program.lines)


def test_environment_turns_asserts_on(
    backends: tuple[str, str], device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLYDUCT_DEBUG_ASSERTS", "1")
    (graph,) = check(lambda a: a.exp() + 1, backends, torch.randn(4, 3, device=device))
    assert [(a.producer, a.dtype) for a in output_asserts(graph.program.lines)] == [
        ("kernel0", torch.float32)
    ]


def _wrong_dtype_loader(victim: str) -> Callable[..., Any]:
    """`Plugins.kernel_loader` whose kernel `victim` leaves its last buffer as float64."""
    real = Plugins.kernel_loader

    def kernel_loader(self: Plugins, options: Any = None) -> Any:
        load = real(self, options)

        def load_kernels(defs: Sequence[KernelDefinition]) -> dict[str, KernelFn]:
            kernels = load(defs)
            good = kernels[victim]

            def wrong(*args: Any) -> None:
                good(*args)
                out = [a for a in args if isinstance(a, torch.Tensor)][-1]
                out.data = out.data.to(torch.float64)  # rebinds the storage: a wrong-dtype write

            kernels[victim] = wrong
            return kernels

        return load_kernels

    return kernel_loader


def test_wrong_dtype_kernel_is_caught(
    backends: tuple[str, str], device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.cumsum(0).sin() * 2  # kernel0 (the scan) writes buf0, kernel1 reads it

    x = torch.randn(5, 3, device=device)
    monkeypatch.setattr(Plugins, "kernel_loader", _wrong_dtype_loader("kernel0"))
    compiled, graphs = compile_fn(fn, backends, {"debug_asserts": True})
    with pytest.raises(InputMismatch) as info:
        compiled(x)
    message = str(info.value)
    assert "kernel0" in message and "'buf0" in message and "float64" in message, message
    assert "float32" in message
    lines = graphs[0].program.lines
    assert next((a.producer, a.name) for a in output_asserts(lines)) == ("kernel0", "buf0")

    # without the asserts the same wrong kernel goes unnoticed by the wrapper
    compiled, _ = compile_fn(fn, backends, {"debug_asserts": False})
    compiled(x)


def test_correct_kernels_pass_with_edge_values(backends: tuple[str, str], device: str) -> None:
    x = torch.tensor([[0.0, -0.0, float("inf")], [float("-inf"), float("nan"), 1.0]], device=device)
    ints = torch.tensor([torch.iinfo(torch.int64).max, -1, 0], device=device)

    def fn(a: torch.Tensor, i: torch.Tensor) -> Any:
        return a.isnan() | (a > 0), a.nan_to_num().sum(0) + i, (i % 3).to(torch.int8)

    compiled, graphs = compile_fn(fn, backends, {"debug_asserts": True})
    assert_same(compiled(x, ints), fn(x, ints))
    assert output_asserts(graphs[0].program.lines)


def test_extern_results_copied_into_their_strides_pass(
    backends: tuple[str, str], device: str
) -> None:
    """The CPU flash-attention kernel returns a contiguous result where its meta function
    promises other strides; the copy into the promised strides is asserted, the raw result
    is not (a transformer block forward and backward under debug asserts)."""
    torch.manual_seed(0)
    model = Block().to(device)
    x = torch.randn(2, 6, 32, device=device)
    compiled, graphs = compile_fn(model, backends, options={"debug_asserts": True})
    out = compiled(x)
    out.square().mean().backward()
    assert_same(out, model(x), atol=1e-4)
    assert len(graphs) == 2
