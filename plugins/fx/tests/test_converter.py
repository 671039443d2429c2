"""The FX converter on hand-built programs: printed graphs, lint, results equal eager."""

from __future__ import annotations

import operator

import sympy
import torch
import torch.fx
from helpers import SCALE_SOURCE, PyLoader, add_program, sizes

from polyduct.errors import InputMismatch, WrapperError
from polyduct.wrapper.ir import (
    Allocate,
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
    SizeDef,
    WrapperProgram,
)
from polyduct_fx import FxWrapper, KernelOp


def graph_of(program: WrapperProgram, loader: PyLoader) -> torch.fx.GraphModule:
    gm = FxWrapper().to_graph(program, loader)
    gm.graph.lint()
    print(gm.code)
    return gm


def test_kernel_call_graph(loader: PyLoader) -> None:
    gm = graph_of(add_program(6), loader)
    x, y = torch.randn(6), torch.randn(6)
    (out,) = gm(x, y)
    torch.testing.assert_close(out, (x + y) * 2)
    kernels = [n.target for n in gm.graph.nodes if isinstance(n.target, KernelOp)]
    assert [k.kernel for k in kernels] == ["k_add", "k_scale"]
    assert "torch.empty_strided([6], [1], dtype = torch.float32, device = 'cpu')" in gm.code
    # buf0 is freed by the program: FX's code drops it right after its last use.
    last_use = next(ln for ln in gm.code.splitlines() if "py_k_scale(buf0" in ln)
    assert "buf0 = " in last_use.split(";")[1] and last_use.endswith("None")
    assert loader.calls == 1


def test_kernel_calls_survive_dead_code_elimination(loader: PyLoader) -> None:
    gm = graph_of(add_program(4), loader)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(gm(x, y)[0], (x + y) * 2)


def test_extern_addmm_and_out_variant(loader: PyLoader) -> None:
    program = WrapperProgram(
        (
            GraphInputs(("bias", "a", "w")),
            ExternCall("aten.addmm.default", (Ref("bias"), Ref("a"), Ref("w")), (), "buf0"),
            Allocate("buf1", sizes(3, 5), sizes(5, 1), torch.float32, "cpu"),
            ExternCall("aten.mm.out", (Ref("a"), Ref("w")), (), "buf2", out="buf1"),
            GraphOutputs(("buf0", "buf1")),
        )
    )
    gm = graph_of(program, loader)
    assert "torch.ops.aten.addmm.default(bias, a, w)" in gm.code
    assert "torch.ops.aten.mm.out(a, w, out = buf1)" in gm.code
    bias, a, w = torch.randn(5), torch.randn(3, 4), torch.randn(4, 5)
    got = gm(bias, a, w)
    torch.testing.assert_close(got[0], torch.addmm(bias, a, w))
    torch.testing.assert_close(got[1], a @ w)


def test_topk_multi_output(loader: PyLoader) -> None:
    program = WrapperProgram(
        (
            GraphInputs(("x",)),
            ExternCall("aten.topk.default", (Ref("x"), 3), (("largest", True),), "buf0"),
            MultiOutput("buf1", "buf0", 0),
            MultiOutput("buf2", "buf0", 1),
            KernelDefinition("k_scale", "py", SCALE_SOURCE),
            Allocate("buf3", sizes(4, 3), sizes(3, 1), torch.float32, "cpu"),
            KernelCall("k_scale", ("buf1", "buf3"), sizes(12)),
            GraphOutputs(("buf3", "buf2")),
        )
    )
    gm = graph_of(program, loader)
    assert "buf2 = buf0[1]" in gm.code
    getitems = [n for n in gm.graph.nodes if n.target is operator.getitem]
    assert [n.args[1] for n in getitems] == [0, 1]
    x = torch.randn(4, 9)
    values, indices = torch.topk(x, 3)
    got = gm(x)
    torch.testing.assert_close(got[0], values * 2)
    torch.testing.assert_close(got[1], indices)


def dynamic_program() -> WrapperProgram:
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    shape, stride = (s0, sympy.Integer(3)), sizes(3, 1)
    return WrapperProgram(
        (
            GraphInputs(("x", "y")),
            SizeDef("s0", "x", "size", 0),
            InputAssert("x", shape, stride, torch.float32),
            InputAssert("y", shape, stride, torch.float32),
            KernelDefinition(
                "k_add",
                "py",
                SCALE_SOURCE.replace("* 2", "+ in_ptr1.reshape(-1)[:ks0]").replace(
                    "in_ptr0, out", "in_ptr0, in_ptr1, out"
                ),
            ),
            Allocate("buf0", shape, stride, torch.float32, "cpu"),
            KernelCall("k_add", ("x", "y", "buf0"), (3 * s0,)),
            GraphOutputs(("buf0", "s0")),
        )
    )


def test_dynamic_shape_graph_runs_at_two_sizes(loader: PyLoader) -> None:
    gm = graph_of(dynamic_program(), loader)
    assert "torch.ops.aten.sym_size.int(x, 0)" in gm.code
    for n in (2, 7):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        out, s0 = gm(x, y)
        assert s0 == n
        torch.testing.assert_close(out, x + y)


def test_input_assert_is_kept(loader: PyLoader) -> None:
    gm = graph_of(add_program(6), loader)
    try:
        gm(torch.randn(5), torch.randn(6))
    except InputMismatch as err:
        assert "'x'" in str(err) and "size" in str(err)
    else:
        raise AssertionError("a wrong-sized input ran")
    bad_dtype = torch.randn(6, dtype=torch.float64)
    try:
        gm(torch.randn(6), bad_dtype)
    except InputMismatch as err:
        assert err.attr == "dtype"
    else:
        raise AssertionError("a wrong-dtype input ran")


def test_use_after_free_names_the_line(loader: PyLoader) -> None:
    lines = add_program(6).lines
    bad = WrapperProgram((*lines[:-1], GraphOutputs(("buf0",))))
    try:
        FxWrapper().to_graph(bad, loader)
    except WrapperError as err:
        assert "used after it was freed" in str(err) and "GraphOutputs" in str(err)
    else:
        raise AssertionError("a freed buffer was returned")


def test_render_prints_graph_without_loading() -> None:
    text = FxWrapper().render(add_program(6))
    assert "torch.empty_strided" in text and "py_k_add" in text
    assert Free("buf0") in add_program(6).lines


def test_views_offset_from_the_base_and_int_inputs(loader: PyLoader) -> None:
    k = sympy.Symbol("k", integer=True, positive=True)
    program = WrapperProgram(
        (
            GraphInputs(("x", "n")),
            SizeDef("k", "n", "value"),
            ReinterpretView("v", "x", (k,), sizes(2), k),
            Allocate("buf0", (k,), sizes(1), torch.float32, "cpu"),
            ExternCall("aten.mul.out", (Ref("v"), Ref("k")), (), "buf0", out="buf0"),
            GraphOutputs(("buf0", "k")),
        )
    )
    gm = graph_of(program, loader)
    base = torch.arange(20.0)[3:]  # a view with a storage offset of 3
    out, k_value = gm(base, 4)
    assert k_value == 4
    torch.testing.assert_close(out, base[4::2][:4] * 4)
