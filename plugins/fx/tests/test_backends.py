"""Kernels of every installed kernel backend, called from FX graphs, against eager."""

from __future__ import annotations

from typing import Any

import pytest
import sympy
import torch

from polyduct.indexing import size_symbol
from polyduct.kernel import KernelBuffer, KernelSpec, Stage
from polyduct.plugins import PluginOptions, Plugins, load
from polyduct.wrapper.ir import (
    Allocate,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    SizeDef,
    WrapperProgram,
)
from polyduct_fx import FxWrapper

PLUGINS: Plugins = load(PluginOptions())
BACKENDS = PLUGINS.kernel_backends.names()


def _body(ops: Any, x: Any, r: Any) -> None:
    a, b = ops.load("a", x[0]), ops.load("b", x[0])
    ops.store("out", x[0], ops.mul(ops.add(a, b), ops.sigmoid(b)))


def program_for(backend_name: str) -> WrapperProgram:
    """out = (a + b) * sigmoid(b) over a dynamic length s0."""
    s0 = size_symbol("s0")
    bufs = tuple(KernelBuffer(n, torch.float32, r, s0) for n, r in (("a", "in"), ("b", "in")))
    out = KernelBuffer("out", torch.float32, "out", s0)
    spec = KernelSpec("k_fused", (s0,), (), (Stage("outer", _body),), (*bufs, out), (s0,))
    source = PLUGINS.kernel_backend(backend_name).codegen(spec)
    one = (sympy.Integer(1),)
    return WrapperProgram(
        (
            GraphInputs(("a", "b")),
            SizeDef("s0", "a", "size", 0),
            InputAssert("a", (s0,), one, torch.float32),
            InputAssert("b", (s0,), one, torch.float32),
            KernelDefinition(source.name, backend_name, source.source),
            Allocate("buf0", (s0,), one, torch.float32, "cpu"),
            KernelCall(source.name, ("a", "b", "buf0"), (s0,)),
            GraphOutputs(("buf0",)),
        )
    )


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_kernel_of_each_backend_runs_in_the_graph(backend_name: str) -> None:
    if "cpu" not in PLUGINS.kernel_backends.get(backend_name).backend_cls.caps.devices:
        pytest.skip(f"{backend_name} declares no cpu device")
    run = FxWrapper().build(program_for(backend_name), PLUGINS.kernel_loader())
    print(run.code)
    for n in (1, 17, 64):
        a, b = torch.randn(n), torch.randn(n)
        b[:1] = float("nan") if n > 1 else 0.0
        (got,) = run(a, b)
        torch.testing.assert_close(got, (a + b) * torch.sigmoid(b), equal_nan=True)
