"""Traced values and dtype facts: how torch dtypes map to Halide storage and compute types."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

import torch

from polyduct.codegen import Value, float_literal
from polyduct.handlers.dtypes import FLOATS, LOW_PRECISION

SIGNED: Final = frozenset({torch.int8, torch.int16, torch.int32, torch.int64})
UNSIGNED: Final = frozenset({torch.uint8})
INTS: Final = SIGNED | UNSIGNED
DTYPES: Final = FLOATS | INTS | {torch.bool}

# Halide type expressions (source text) of values as ops compute them: f16/bf16 compute in f32
# (docs/conventions.md), bool is Halide's 1-bit bool.
_COMPUTE: Final[dict[torch.dtype, str]] = {
    torch.float16: "hl.Float(32)",
    torch.bfloat16: "hl.Float(32)",
    torch.float32: "hl.Float(32)",
    torch.float64: "hl.Float(64)",
    torch.int8: "hl.Int(8)",
    torch.int16: "hl.Int(16)",
    torch.int32: "hl.Int(32)",
    torch.int64: "hl.Int(64)",
    torch.uint8: "hl.UInt(8)",
    torch.bool: "hl.Bool()",
}
# How buffers hold elements: bf16 as int16 bits (numpy has no bf16), bool as one byte.
_STORAGE: Final[dict[torch.dtype, str]] = {
    **_COMPUTE,
    torch.float16: "hl.Float(16)",
    torch.bfloat16: "hl.Int(16)",
    torch.bool: "hl.UInt(8)",
}
_CONST: Final[dict[torch.dtype, str]] = {
    torch.float16: "hl.f32",
    torch.bfloat16: "hl.f32",
    torch.float32: "hl.f32",
    torch.float64: "hl.f64",
    torch.int8: "hl.i8",
    torch.int16: "hl.i16",
    torch.int32: "hl.i32",
    torch.int64: "hl.i64",
    torch.uint8: "hl.u8",
}


def compute_type(dtype: torch.dtype) -> str:
    """Halide type (source) that values of `dtype` are computed in."""
    return _COMPUTE[dtype]


def storage_type(dtype: torch.dtype) -> str:
    """Halide type (source) of buffer elements of `dtype`."""
    return _STORAGE[dtype]


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float32` -> `float32`."""
    return str(dtype).removeprefix("torch.")


def bits(dtype: torch.dtype) -> int:
    """Width of `dtype` in bits."""
    return torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits


def literal(value: bool | float, dtype: torch.dtype) -> str:
    """Source of a Halide constant `value` of `dtype` (f16/bf16 rounded, then held in f32)."""
    if dtype == torch.bool:
        return f"hl.Expr({bool(value)})"
    if dtype in FLOATS:
        number = float(value)
        if dtype in LOW_PRECISION and math.isfinite(number):
            number = float(torch.tensor(number, dtype=dtype).float())
        if number == 0 and math.copysign(1.0, number) < 0:
            return f"_m.negative_zero(ZERO, {compute_type(dtype)})"
        return f"{_CONST[dtype]}({float_literal(number)})"
    info = torch.iinfo(dtype)
    number = int(value)
    number = (number - info.min) % (info.max - info.min + 1) + info.min  # wrap like torch
    return f"{_CONST[dtype]}({number})"


@dataclass
class Emitter:
    """Lines of one traced function body; names come from a counter shared by the kernel."""

    counter: list[int] = field(default_factory=lambda: [0])
    lines: list[str] = field(default_factory=list)

    def fresh(self, prefix: str = "t") -> str:
        """A name unique within the kernel."""
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def emit(self, expr: str, dtype: torch.dtype) -> Value:
        """Bind `expr` to a fresh temporary and return it as a value of `dtype`."""
        name = self.fresh()
        self.lines.append(f"{name} = {expr}")
        return Value(name, dtype)
