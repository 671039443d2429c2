"""Kernel values and dtype facts of the Triton target.

A kernel value is a `polyduct.codegen.Value`: a named temporary of the generated kernel plus
the polyduct dtype it stands for. float16/bfloat16 values are held in float32 (docs/conventions.md); `dtype` still names the
storage dtype so stores and casts round correctly.
"""

from __future__ import annotations

from typing import Final

import torch

from polyduct.codegen import float_literal
from polyduct.handlers.dtypes import FLOATS, LOW_PRECISION

TL_DTYPE: Final[dict[torch.dtype, str]] = {
    torch.bool: "tl.int1",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.uint16: "tl.uint16",
    torch.uint32: "tl.uint32",
    torch.uint64: "tl.uint64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
}
BITS: Final[dict[torch.dtype, torch.dtype]] = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


def compute_tl(dtype: torch.dtype) -> str:
    """The Triton type a value of `dtype` is held in (float32 for float16/bfloat16)."""
    return "tl.float32" if dtype in LOW_PRECISION else TL_DTYPE[dtype]


def is_float(dtype: torch.dtype) -> bool:
    """Whether `dtype` is a floating-point dtype."""
    return dtype in FLOATS


def is_signed(dtype: torch.dtype) -> bool:
    """Whether `dtype` is a signed integer or float dtype."""
    return dtype.is_floating_point or dtype in (torch.int8, torch.int16, torch.int32, torch.int64)


def bit_width(dtype: torch.dtype) -> int:
    """Bits of one element of `dtype` (bool counts as 8, its storage)."""
    return 8 if dtype == torch.bool else dtype.itemsize * 8


def literal(value: bool | float, dtype: torch.dtype) -> str:
    """A Python literal for `value` usable inside a Triton function."""
    if dtype == torch.bool:
        return "True" if value else "False"
    if is_float(dtype):
        return float_literal(float(value))
    return str(int(value))


def type_min(dtype: torch.dtype) -> bool | float | int:
    """The lowest value of `dtype` (-inf for floats)."""
    if dtype == torch.bool:
        return False
    if is_float(dtype):
        return float("-inf")
    return int(torch.iinfo(dtype).min)


def type_max(dtype: torch.dtype) -> bool | float | int:
    """The highest value of `dtype` (+inf for floats)."""
    if dtype == torch.bool:
        return True
    if is_float(dtype):
        return float("inf")
    return int(torch.iinfo(dtype).max)
