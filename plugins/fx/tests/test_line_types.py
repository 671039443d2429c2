"""Static conformance: the FX wrapper handles every Wrapper IR line type, with a correct result."""

from __future__ import annotations

import inspect

import sympy
import torch
from helpers import ADD_SOURCE, PyLoader

from polyduct.wrapper.ir import (
    LINE_TYPES,
    Allocate,
    Comment,
    ExternCall,
    Free,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    MultiOutput,
    Ref,
    ReinterpretView,
    Reuse,
    SizeDef,
    WrapperProgram,
)
from polyduct_fx import FxWrapper
from polyduct_fx.converter import FxConverter


def every_line_program() -> WrapperProgram:
    """x: (s0, 4). Returns x + x (via a reused buffer and a view), its row maxima, and s0."""
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    shape, stride = (s0, sympy.Integer(4)), (sympy.Integer(4), sympy.Integer(1))
    return WrapperProgram(
        (
            GraphInputs(("x",)),
            SizeDef("s0", "x", "size", 0),
            InputAssert("x", shape, stride, torch.float32),
            Comment("x + x, through a kernel"),
            KernelDefinition("k_add", "py", ADD_SOURCE),
            Allocate("buf0", shape, stride, torch.float32, "cpu"),
            KernelCall("k_add", ("x", "x", "buf0"), (4 * s0,)),
            ExternCall("aten.max.dim", (Ref("buf0"), 1), (), "buf1"),
            MultiOutput("buf2", "buf1", 0),
            Allocate("buf3", shape, stride, torch.float32, "cpu"),
            KernelCall("k_add", ("buf0", "buf0", "buf3"), (4 * s0,)),
            Free("buf0"),
            Reuse("buf4", "buf3", (sympy.Integer(4), s0), (s0, sympy.Integer(1))),
            ExternCall("aten.t.default", (Ref("x"),), (), "buf5"),
            KernelCall("k_add", ("buf5", "buf5", "buf4"), (4 * s0,)),
            ReinterpretView("buf6", "buf4", (s0, sympy.Integer(4)), (sympy.Integer(1), s0), 0),
            GraphOutputs(("buf6", "buf2", "s0")),
        )
    )


def test_program_covers_every_line_type() -> None:
    assert {type(line) for line in every_line_program().lines} == set(LINE_TYPES)


def test_every_line_type_converts_and_runs(loader: PyLoader) -> None:
    gm = FxWrapper().to_graph(every_line_program(), loader)
    gm.graph.lint()
    print(gm.code)
    for n in (1, 5):
        x = torch.randn(n, 4)
        got = FxWrapper().build(every_line_program(), loader)(x)
        # buf4 holds (x + x).t(); buf6 views it back as x + x
        torch.testing.assert_close(got[0], x + x)
        torch.testing.assert_close(got[1], (x + x).max(dim=1).values)
        assert got[2] == n


def test_match_names_every_line_type() -> None:
    source = inspect.getsource(FxConverter.emit)
    missing = [t.__name__ for t in LINE_TYPES if f"case {t.__name__}(" not in source]
    assert not missing, f"FxConverter.emit has no case for {missing}"


def test_comments_become_node_metadata(loader: PyLoader) -> None:
    gm = FxWrapper().to_graph(every_line_program(), loader)
    noted = [n.meta["polyduct_comments"] for n in gm.graph.nodes if "polyduct_comments" in n.meta]
    assert noted == [("x + x, through a kernel",)]
