"""A `Probe`: one op on one dtype in one variant, as kernel stages plus inputs and an oracle.

Probes are plain data. Their stage bodies are frozen dataclasses holding buffer names and strides,
never closures over tensors, so many probes can be merged into one `KernelSpec` by giving each a
distinct buffer-name prefix (`with_prefix`).
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from polyduct.conformance.tolerance import EXACT, Tol
from polyduct.kernel import StageKind
from polyduct.ops import OpHandler


@dataclass(frozen=True, slots=True)
class Access:
    """A buffer as a body addresses it: name and per-dimension strides (element units)."""

    name: str
    strides: tuple[int, ...]

    def index(self, idx: Sequence[sympy.Expr]) -> sympy.Expr:
        return sympy.Add(*(i * s for i, s in zip(idx, self.strides, strict=True)))


# The device the eager oracle of table ops runs on (`--device`); inputs are always made on the CPU.
ORACLE_DEVICE: contextvars.ContextVar[str] = contextvars.ContextVar("oracle_device", default="cpu")

NO_ACCESS = Access("", ())  # default of body fields; every real body sets its own


def access(name: str, t: torch.Tensor | OutSpec) -> Access:
    """The `Access` for tensor (or output spec) `t` bound to buffer `name`."""
    return Access(name, tuple(int(s) for s in t.stride()))


@dataclass(frozen=True)
class BodyBase:
    """Base of stage bodies: `prefix` makes buffer names unique inside a batched kernel."""

    prefix: str = field(default="", kw_only=True)

    def __call__(
        self, ops: OpHandler[Any], x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]
    ) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no body")

    def buf(self, a: Access | str) -> str:
        return self.prefix + (a if isinstance(a, str) else a.name)

    def load(self, ops: OpHandler[Any], a: Access, idx: Sequence[sympy.Expr]) -> Any:
        return ops.load(self.buf(a), a.index(idx))

    def store(self, ops: OpHandler[Any], a: Access, idx: Sequence[sympy.Expr], v: Any) -> None:
        ops.store(self.buf(a), a.index(idx), v)


@dataclass(frozen=True)
class OpBody(BodyBase):
    """out_k[x] = op(*(load(arg)[x]), *params)[k]: the body of every elementwise case."""

    op: str = ""
    args: tuple[Access, ...] = ()
    outs: tuple[Access, ...] = ()
    params: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __call__(
        self, ops: OpHandler[Any], x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]
    ) -> None:
        values = [self.load(ops, a, x) for a in self.args]
        result = getattr(ops, self.op)(*values, *self.params, **dict(self.kwargs))
        results = result if len(self.outs) > 1 else (result,)
        for out, value in zip(self.outs, results, strict=True):
            self.store(ops, out, x, value)


@dataclass(frozen=True, slots=True)
class OutSpec:
    """An output buffer the wrapper allocates: shape, strides and dtype."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype

    def stride(self) -> tuple[int, ...]:
        return self.strides


Checker = Callable[["Probe", dict[str, torch.Tensor]], list[str]]


@dataclass(frozen=True)
class Probe:
    """One matrix cell's worth of testing (op x dtype), in one `variant`."""

    op: str
    dtype: torch.dtype
    category: str
    variant: str
    ranges: tuple[int, ...]
    stages: tuple[tuple[StageKind, BodyBase], ...]
    inputs: dict[str, torch.Tensor]
    outputs: dict[str, OutSpec]
    expected: dict[str, torch.Tensor] = field(default_factory=dict)
    tol: Tol = EXACT
    reduction_ranges: tuple[int, ...] = ()
    locals: dict[str, torch.dtype] = field(default_factory=dict)
    inouts: tuple[str, ...] = ()  # inputs the kernel also writes (checked like outputs)
    check: Checker | None = None  # replaces the expected/tol comparison when set
    expect_error: type[BaseException] | None = None  # the kernel must raise this
    batchable: bool = True

    @property
    def id(self) -> str:
        return f"{self.op}[{dtype_name(self.dtype)}:{self.variant}]"

    def with_prefix(self, prefix: str) -> tuple[tuple[StageKind, BodyBase], ...]:
        return tuple((kind, dataclasses.replace(body, prefix=prefix)) for kind, body in self.stages)

    def describe_inputs(self) -> str:
        parts = [
            f"{n}: {dtype_name(t.dtype)}{tuple(t.shape)} strides={tuple(t.stride())}"
            for n, t in self.inputs.items()
        ]
        parts += [
            f"{n} (out): {dtype_name(o.dtype)}{o.shape} strides={o.strides}"
            for n, o in self.outputs.items()
        ]
        return "; ".join(parts)


def dtype_name(dtype: torch.dtype) -> str:
    """`float32` for torch.float32."""
    return str(dtype).removeprefix("torch.")


def out_like(shape: tuple[int, ...], dtype: torch.dtype, layout: str = "contiguous") -> OutSpec:
    """An `OutSpec` of `shape` in `layout` ("contiguous" or "transposed", 2-d only)."""
    if layout == "transposed" and len(shape) == 2:
        return OutSpec(shape, (1, shape[0]), dtype)
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return OutSpec(shape, tuple(reversed(strides)), dtype)
