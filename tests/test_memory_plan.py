"""The `plan_memory` pass: reuse only storage nothing can still see; drop dead buffers."""

from __future__ import annotations

import sympy
import torch

from polyduct.wrapper.ir import (
    Allocate,
    ExternCall,
    Free,
    GraphInputs,
    GraphOutputs,
    Line,
    Ref,
    ReinterpretView,
    Reuse,
    WrapperProgram,
)
from polyduct.wrapper.memory_plan import plan_memory, storage_size

I = sympy.Integer
S0 = sympy.Symbol("s0", integer=True, positive=True)


def alloc(name: str, n: int = 8, dtype: torch.dtype = torch.float32) -> Allocate:
    return Allocate(name, (I(n),), (I(1),), dtype, "cpu")


def neg(src: str, dst: str) -> ExternCall:
    return ExternCall("aten.neg.out", (Ref(src),), (), result=dst, out=dst)


def chain(*middle: Line, outputs: tuple[str, ...] = ("b2",)) -> WrapperProgram:
    head: tuple[Line, ...] = (GraphInputs(("x",)), alloc("b0"), neg("x", "b0"))
    return WrapperProgram((*head, *middle, GraphOutputs(outputs)))


def reuses(program: WrapperProgram) -> list[tuple[str, str]]:
    return [(ln.name, ln.old) for ln in plan_memory(program).lines if isinstance(ln, Reuse)]


def test_freed_buffer_is_reused_and_its_free_removed() -> None:
    program = chain(alloc("b1"), neg("b0", "b1"), Free("b0"), alloc("b2"), neg("b1", "b2"))
    planned = plan_memory(program)
    assert reuses(program) == [("b2", "b0")]
    assert Free("b0") not in planned.lines
    assert Reuse("b2", "b0", (I(8),), (I(1),)) in planned.lines


def test_symbolic_sizes_match_by_storage_size() -> None:
    program = WrapperProgram(
        (
            GraphInputs(("x",)),
            Allocate("b0", (S0, I(4)), (I(4), I(1)), torch.float32, "cpu"),
            neg("x", "b0"),
            Free("b0"),
            Allocate("b1", (I(4) * S0,), (I(1),), torch.float32, "cpu"),
            neg("x", "b1"),
            GraphOutputs(("b1",)),
        )
    )
    assert reuses(program) == [("b1", "b0")]
    assert storage_size((S0, I(4)), (I(1), S0)) == 4 * S0
    assert storage_size((I(0), I(4)), (I(4), I(1))) == 0


def test_different_dtype_size_or_device_is_not_reused() -> None:
    for other in (alloc("b2", 9), alloc("b2", dtype=torch.float64)):
        program = chain(Free("b0"), other, neg("x", "b2"))
        assert reuses(program) == []
    gpu = Allocate("b2", (I(8),), (I(1),), torch.float32, "cuda")
    assert reuses(chain(Free("b0"), gpu, neg("x", "b2"))) == []


def test_graph_inputs_are_never_reused() -> None:
    program = WrapperProgram(
        (GraphInputs(("x",)), Free("x"), alloc("b2"), neg("b2", "b2"), GraphOutputs(("b2",)))
    )
    assert reuses(program) == []


def test_storage_seen_by_a_live_view_or_output_is_not_reused() -> None:
    view = ReinterpretView("v", "b0", (I(4),), (I(2),), I(1))
    returned = chain(view, Free("b0"), alloc("b2"), neg("x", "b2"), outputs=("b2", "v"))
    assert reuses(returned) == []
    used_later = chain(view, Free("b0"), alloc("b2"), neg("v", "b2"))
    assert reuses(used_later) == []
    dead_view = chain(view, neg("v", "b0"), Free("v"), Free("b0"), alloc("b2"), neg("x", "b2"))
    assert reuses(dead_view) == [("b2", "b0")]


def test_extern_result_may_alias_its_arguments() -> None:
    view = ExternCall("aten.view.default", (Ref("b0"), (I(2), I(4))), (), result="r")
    program = chain(view, Free("b0"), alloc("b2"), neg("x", "b2"), outputs=("b2", "r"))
    assert reuses(program) == []


def test_unused_allocation_is_removed() -> None:
    program = chain(alloc("dead"), Free("dead"), alloc("b2"), neg("b0", "b2"))
    names = {ln.name for ln in plan_memory(program).lines if isinstance(ln, Allocate | Free)}
    assert "dead" not in names and {"b0", "b2"} <= names
