"""Callables that FX nodes of a converted program target at run time.

`KernelOp` wraps one compiled kernel of any kernel backend (cpp, triton, halide, reference...): the
kernel is whatever the program's `load_kernels` returned, so the graph never depends on how a
backend launches. `check_input` keeps the Wrapper IR's input asserts in the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

import torch
import torch.fx

from polyduct.codegen import identifier
from polyduct.errors import UnknownName
from polyduct.kernel import KernelFn
from polyduct.wrapper import library
from polyduct.wrapper.runtime import assert_input

WRAPPER = "fx"


@final
class KernelOp:
    """One compiled kernel as an FX call target: `op(*tensors, *sizes)` mutates its out buffers.

    It is registered as side-effecting, so `eliminate_dead_code` keeps kernel calls that nothing
    reads (they communicate through the buffers they write, like Inductor's mutation HOP).
    """

    __module__ = "polyduct_fx.kernels"

    def __init__(self, name: str, backend: str, fn: KernelFn) -> None:
        self.kernel, self.backend, self.fn = name, backend, fn
        self.__name__ = identifier(f"{backend}_{name}", prefix="kernel")
        self.__qualname__ = self.__name__
        torch.fx.node.has_side_effect(self)

    def __call__(self, *args: Any) -> None:
        self.fn(*args)

    def __repr__(self) -> str:
        return f"KernelOp({self.kernel!r}, backend={self.backend!r})"


def check_input(
    x: object,
    name: str,
    size: Sequence[int],
    stride: Sequence[int],
    dtype: torch.dtype,
    producer: str = "",
) -> None:
    """The Wrapper IR's input assert: the rule of the Python wrapper (`assert_input`: strides of
    size-1 dims and of empty tensors are not compared; `producer`: an intermediate that kernel
    or extern op wrote, an `OutputMismatch`)."""
    assert_input(name, x, size, stride, dtype, producer)


torch.fx.node.has_side_effect(check_input)


def resolve_op(qualname: str) -> Any:
    """`torch.ops.<ns>.<op>.<overload>` for a qualified name such as `aten.mm.default`, or one
    of the core's library functions that are no registered op (`library.UNREGISTERED`)."""
    if qualname in library.UNREGISTERED:
        return library.UNREGISTERED[qualname]
    parts = qualname.split(".")
    if len(parts) == 2 and parts[0] == "higher_order":  # no overloads
        try:
            return getattr(torch.ops.higher_order, parts[1])
        except AttributeError as err:
            raise UnknownName("higher-order op", qualname, ()) from err
    if len(parts) != 3:
        raise UnknownName("aten overload", qualname, ())
    namespace, op, overload = parts
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
        return getattr(packet, overload)  # type: ignore[no-any-return]
    except (AttributeError, RuntimeError) as err:
        raise UnknownName("aten overload", qualname, ()) from err
