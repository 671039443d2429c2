"""Wrapper IR: the host-side program around kernels, as a flat list of frozen plain-data lines.

Lines hold names, sympy sizes, dtypes and devices, never objects with behaviour. Buffers and size
symbols are referred to by name. The set of lines is the closed union `Line`: a wrapper backend
lowers it with one exhaustive `match` ending in `assert_never`, so a new line type is a type error
in every wrapper at once. `LINE_TYPES` is derived from `Line`; conformance checks every wrapper
backend handles each.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Final, TypeAlias

import sympy
import torch

Shape: TypeAlias = tuple[sympy.Expr, ...]


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to a buffer or size symbol by name, inside extern-call arguments."""

    name: str


@dataclass(frozen=True, slots=True)
class OpRef:
    """An op passed to a library call as an argument, by qualified name (`aten.mm.default`):
    what torch's rng-state wrappers run."""

    name: str


Constant: TypeAlias = (
    "None | bool | int | float | str | torch.dtype | torch.device | Ref | OpRef | sympy.Expr"
    " | tuple[Constant, ...] | dict[str, Constant]"
)
"""An extern-call argument. A `sympy.Expr` is a size expression over size symbols (`64*s0`),
evaluated where the call runs; a dict has string keys (a higher-order op's options)."""


@dataclass(frozen=True, slots=True)
class GraphInputs:
    """The program's positional inputs, bound to these names (tensors or ints)."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class InputAssert:
    """Check tensor `name`'s size, stride and dtype; a mismatch raises.

    Without `producer` the tensor is a graph input, checked before running. With it, the tensor is
    an intermediate that kernel or extern op `producer` has just written (the debug asserts of
    `POLYDUCT_DEBUG_ASSERTS=1`), and the error names both.
    """

    name: str
    size: Shape
    stride: Shape
    dtype: torch.dtype
    producer: str = ""


@dataclass(frozen=True, slots=True)
class SizeDef:
    """Define size symbol `symbol` as `expr`, an expression over input attributes.

    `source` names an input; `attr` is "size", "stride" or "value" (an int input); `dim` the axis.
    """

    symbol: str
    source: str
    attr: str
    dim: int = 0


@dataclass(frozen=True, slots=True)
class Allocate:
    """Allocate uninitialised buffer `name`."""

    name: str
    size: Shape
    stride: Shape
    dtype: torch.dtype
    device: str


@dataclass(frozen=True, slots=True)
class Free:
    """Buffer `name` is dead: drop the wrapper's reference to it."""

    name: str


@dataclass(frozen=True, slots=True)
class Reuse:
    """Buffer `name` takes over the storage of dead buffer `old` (same device, dtype and bytes)."""

    name: str
    old: str
    size: Shape
    stride: Shape


@dataclass(frozen=True, slots=True)
class ReinterpretView:
    """`name` is a view of `base`'s storage with the given size, stride and element offset."""

    name: str
    base: str
    size: Shape
    stride: Shape
    offset: sympy.Expr


@dataclass(frozen=True, slots=True)
class KernelDefinition:
    """Kernel `name` of kernel backend `backend`, with its self-contained source text."""

    name: str
    backend: str
    source: str


@dataclass(frozen=True, slots=True)
class KernelCall:
    """Run kernel `kernel` on buffers `args` then size symbols `sizes` (names; no grid)."""

    kernel: str
    args: tuple[str, ...]
    sizes: tuple[sympy.Expr, ...] = ()


@dataclass(frozen=True, slots=True)
class ExternCall:
    """Run an aten op as a library call: `op` is its qualified name (`aten.mm.default`).

    With `out` set, the op writes into that preallocated buffer (out= variant); otherwise its
    result is bound to `result` (a tensor, or a tuple unpacked by `MultiOutput`).
    """

    op: str
    args: tuple[Constant, ...]
    kwargs: tuple[tuple[str, Constant], ...]
    result: str
    out: str | None = None


@dataclass(frozen=True, slots=True)
class MultiOutput:
    """Bind `name` to element `index` of the tuple result `source`."""

    name: str
    source: str
    index: int


@dataclass(frozen=True, slots=True)
class Comment:
    """A human-readable note, kept in the rendered output."""

    text: str


@dataclass(frozen=True, slots=True)
class GraphOutputs:
    """Return these, in order: names (buffers or size symbols) or integer size expressions over
    the symbols (a size backward needs, such as `s0*s1`)."""

    names: tuple[str | sympy.Expr, ...]


Line: TypeAlias = (
    GraphInputs
    | InputAssert
    | SizeDef
    | Allocate
    | Free
    | Reuse
    | ReinterpretView
    | KernelDefinition
    | KernelCall
    | ExternCall
    | MultiOutput
    | Comment
    | GraphOutputs
)
LINE_TYPES: Final[tuple[type, ...]] = typing.get_args(Line)


@dataclass(frozen=True)
class WrapperProgram:
    """A whole compiled graph: its lines, in execution order."""

    lines: tuple[Line, ...]

    def kernels(self) -> tuple[KernelDefinition, ...]:
        """Every kernel definition, in order."""
        return tuple(line for line in self.lines if isinstance(line, KernelDefinition))
