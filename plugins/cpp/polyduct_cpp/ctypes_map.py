"""torch dtype -> C++ types: the storage type in memory and the compute type of values."""

from __future__ import annotations

import math
from typing import Final

import torch

from polyduct.errors import UnsupportedOp
from polyduct.handlers.dtypes import LOW_PRECISION
from polyduct.indexing import CIndexPrinter

STORAGE: Final[dict[torch.dtype, str]] = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "pd_half",
    torch.bfloat16: "pd_bf16",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.uint8: "uint8_t",
    torch.bool: "bool",
}


def storage_type(dtype: torch.dtype) -> str:
    """The C++ type of one element of a buffer of `dtype`."""
    if dtype not in STORAGE:
        raise UnsupportedOp("dtype", "cpp", f"dtype {dtype} has no C++ type")
    return STORAGE[dtype]


def compute_type(dtype: torch.dtype) -> str:
    """The C++ type values of `dtype` are computed in (float for float16/bfloat16)."""
    return "float" if dtype in LOW_PRECISION else storage_type(dtype)


def is_float(dtype: torch.dtype) -> bool:
    """Floating point (including the 16-bit formats)."""
    return dtype.is_floating_point


def from_storage(expr: str, dtype: torch.dtype) -> str:
    """A loaded element as its compute value."""
    if dtype == torch.bfloat16:
        return f"pd_bf16_to_f32({expr})"
    if dtype == torch.float16:
        return f"static_cast<float>({expr})"
    if dtype == torch.bool:  # a byte compared with 0: GCC vectorises that, not a bool load
        return f"(*reinterpret_cast<const uint8_t*>(&{expr}) != 0)"
    return expr


def to_storage(expr: str, dtype: torch.dtype) -> str:
    """A compute value converted for a store into a buffer of `dtype` (round to nearest even)."""
    if dtype == torch.bfloat16:
        return f"pd_f32_to_bf16({expr})"
    return f"static_cast<{storage_type(dtype)}>({expr})"


def literal(value: bool | float, dtype: torch.dtype) -> str:
    """An exact C++ literal of `value` in the compute type of `dtype`."""
    ctype = compute_type(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        number = float(value)
        if math.isnan(number):
            text = "std::numeric_limits<double>::quiet_NaN()"
        elif math.isinf(number):
            text = ("-" if number < 0 else "") + "std::numeric_limits<double>::infinity()"
        else:
            text = number.hex()  # hex floats are exact
        if dtype in LOW_PRECISION:
            rounder = "pd_round_bf16" if dtype == torch.bfloat16 else "pd_round_f16"
            return f"{rounder}(static_cast<float>({text}))"
        return f"static_cast<{ctype}>({text})"
    number = int(value)
    if number == -(2**63):
        return "static_cast<int64_t>(INT64_MIN)"
    return f"static_cast<{ctype}>(INT64_C({number}))" if number < 2**63 else f"{number}ULL"


class CppIndexPrinter(CIndexPrinter):
    """C index expressions; a floor division whose base may be negative calls the header's."""

    floordiv_fn = "pd_floordiv<int64_t>"
