"""The Python wrapper's per-call input checks: a learned C guard for inputs of static layout, an
inline test for inputs with size symbols, and the full `assert_input` whenever either fails."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import sympy
import torch

from polyduct.cache import Cache
from polyduct.errors import InputMismatch
from polyduct.plugins import PluginOptions, load_fresh
from polyduct.wrapper.ir import (
    Allocate,
    ExternCall,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    Ref,
    SizeDef,
    WrapperProgram,
)
from polyduct.wrapper.python import (
    UNCHECKED,
    PythonWrapper,
    PythonWrapperOptions,
    empty_strided_cpu,
    input_guards,
)

S0 = sympy.Symbol("s0", integer=True, positive=True)
I = sympy.Integer


def add_program(device: str = "cpu") -> WrapperProgram:
    """out = x + y, x of static layout (4, 1) and y with a size symbol (s0, 3)."""
    return WrapperProgram(
        (
            GraphInputs(("x", "y")),
            SizeDef("s0", "y", "size", 0),
            InputAssert("x", (I(4), I(1)), (I(1), I(1)), torch.float32),
            InputAssert("y", (S0, I(3)), (I(3), I(1)), torch.float32),
            Allocate("out", (I(4), I(3)), (I(3), I(1)), torch.float32, device),
            ExternCall("aten.add.out", (Ref("x"), Ref("y")), (), result="out", out="out"),
            GraphOutputs(("out",)),
        )
    )


@pytest.fixture
def wrapper(tmp_path: Path) -> PythonWrapper:
    return PythonWrapper(PythonWrapperOptions(cache=Cache(tmp_path / "cache")))


def test_rendered_checks_are_deterministic_and_guarded(wrapper: PythonWrapper) -> None:
    source = wrapper.render(add_program())
    assert source == wrapper.render(add_program())
    assert "nonlocal input_guard" in source
    assert "input_guard = UNCHECKED" in source
    assert "if not (\n            input_guard.check(x)\n" in source
    assert "input_guard = input_guards(x)" in source
    assert "y.shape == (s0, 3)" in source
    assert "out = empty_strided_cpu((4, 3), (3, 1), torch.float32)" in source


def test_a_cuda_program_runs_with_its_device_current_and_allocates_directly(
    wrapper: PythonWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program on "cuda:1" allocates through torch's direct allocator on the current device,
    and its `call` first makes cuda:1 current where another device is (the CUDA parts are
    simulated: the program's extern op runs on CPU tensors)."""
    source = wrapper.render(add_program("cuda:1"))
    assert "out = empty_strided_cuda((4, 3), (3, 1), torch.float32)" in source
    assert "if cuda_device() != 1:\n            with cuda_device_scope(1):" in source
    fn = wrapper.build(add_program("cuda:1"), load_fresh(PluginOptions()).kernel_loader())
    current, scopes, allocated = [0], [], []

    @contextlib.contextmanager
    def scope(index: int) -> Iterator[None]:
        scopes.append(index)
        before, current[0] = current[0], index
        try:
            yield
        finally:
            current[0] = before

    def allocate(size: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        allocated.append(current[0])
        return torch.empty_strided(size, stride, dtype=dtype)

    monkeypatch.setattr(fn.module, "cuda_device", lambda: current[0])
    monkeypatch.setattr(fn.module, "cuda_device_scope", scope)
    monkeypatch.setattr(fn.module, "empty_strided_cuda", allocate)
    x, y = torch.randn(4, 1), torch.randn(4, 3)
    torch.testing.assert_close(fn(x, y)[0], x + y)
    assert (scopes, allocated, current) == ([1], [1], [0])
    current[0] = 1  # already current: no scope
    torch.testing.assert_close(fn(x, y)[0], x + y)
    assert (scopes, allocated) == ([1], [1, 1])

    plain = wrapper.render(add_program("cuda"))  # whichever device is current
    assert "out = empty_strided_cuda(" in plain and "cuda_device()" not in plain.split("def call")[1]


def test_guarded_checks_still_reject_and_name_the_input(wrapper: PythonWrapper) -> None:
    fn = wrapper.build(add_program(), load_fresh(PluginOptions()).kernel_loader())
    x, y = torch.randn(4, 1), torch.randn(4, 3)
    for _ in range(2):  # the first call learns the guard, the second passes through it
        torch.testing.assert_close(fn(x, y)[0], x + y)
    with pytest.raises(InputMismatch, match="input 'x': expected dtype torch.float32"):
        fn(x.double(), y)
    with pytest.raises(InputMismatch, match=r"input 'x': expected size \(4, 1\), got \(4, 2\)"):
        fn(torch.randn(4, 2), y)
    with pytest.raises(InputMismatch, match=r"input 'y': expected stride \(3, 1\), got \(1, 4\)"):
        fn(x, torch.randn(3, 4).t())
    with pytest.raises(InputMismatch, match="input 'x': expected type torch.Tensor, got float"):
        fn(1.0, y)
    torch.testing.assert_close(fn(x, y)[0], x + y)


def test_inputs_the_guard_rejects_but_assert_input_accepts_still_run(
    wrapper: PythonWrapper,
) -> None:
    """A stride of a size-1 dimension, requires_grad, another size symbol: full asserts, run."""
    fn = wrapper.build(add_program(), load_fresh(PluginOptions()).kernel_loader())
    x, y = torch.randn(4, 1), torch.randn(4, 3)
    fn(x, y)
    odd = torch.randn(1, 4).t()  # stride (1, 4): dimension 1 has size 1
    grad = torch.randn(4, 1, requires_grad=True)
    with torch.no_grad():
        for a, b in ((odd, y), (grad, y), (x, y), (x, torch.randn(1, 3))):
            torch.testing.assert_close(fn(a, b)[0], a + b)


def test_input_guards_match_exact_layout() -> None:
    x = torch.randn(3, 4)
    guard = input_guards(x)
    assert guard.check(torch.randn(3, 4))
    assert not guard.check(torch.randn(4, 3).t())
    assert not guard.check(torch.randn(3, 4, dtype=torch.float64))
    assert not guard.check(torch.randn(3, 5))
    assert not UNCHECKED.check(x)


def test_empty_strided_cpu_layout() -> None:
    t = empty_strided_cpu((2, 3), (1, 2), torch.float16)
    cpu = torch.device("cpu")
    assert (t.shape, t.stride(), t.dtype, t.device) == ((2, 3), (1, 2), torch.float16, cpu)
    assert not t.requires_grad


def test_input_guards_accept_a_tensor_passed_twice() -> None:
    """Dynamo's guard rejects one tensor given twice; repeats are checked as the same object."""
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    guard = input_guards(a, b, a)
    assert guard.check(a, b, a)
    assert guard.check(b, a, b)  # the same layouts, repeated at the same positions
    assert not guard.check(a, b, b)
    assert not guard.check(a, b, a.clone())
    assert not guard.check(a, b, a.double())


def test_a_lone_input_with_size_symbols_is_still_checked(wrapper: PythonWrapper) -> None:
    """With no input of static layout, the inline layout test is the whole condition: `if not`
    must negate all of it (it negated only `isinstance`, so no input was ever rejected: an
    exported ResNet, its pooled 1x1 dims specialised, ran on 2x2 maps and returned garbage)."""
    program = WrapperProgram(
        (
            GraphInputs(("y",)),
            SizeDef("s0", "y", "size", 0),
            InputAssert("y", (S0, I(3)), (I(3), I(1)), torch.float32),
            Allocate("out", (S0, I(3)), (I(3), I(1)), torch.float32, "cpu"),
            ExternCall("aten.add.out", (Ref("y"), Ref("y")), (), result="out", out="out"),
            GraphOutputs(("out",)),
        )
    )
    fn = wrapper.build(program, load_fresh(PluginOptions()).kernel_loader())
    y = torch.randn(5, 3)
    torch.testing.assert_close(fn(y)[0], y + y)
    with pytest.raises(InputMismatch, match=r"input 'y': expected size \(5, 3\), got \(5, 4\)"):
        fn(torch.randn(5, 4))
    with pytest.raises(InputMismatch, match="input 'y': expected dtype torch.float32"):
        fn(y.double())
