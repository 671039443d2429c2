"""Rendering Python values as source text for generated reference kernels (safe, deterministic)."""

from __future__ import annotations

import sympy
import torch

from polyduct.codegen import float_literal, identifier
from polyduct.errors import CodegenError

_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in vars(torch).values()
    if isinstance(dtype, torch.dtype)
}


def dtype_code(dtype: torch.dtype) -> str:
    """`torch.<name>` for a torch dtype (checked to be one)."""
    name = str(dtype).removeprefix("torch.")
    if not isinstance(dtype, torch.dtype) or _DTYPES.get(name) != dtype:
        raise CodegenError(f"reference backend: not a torch dtype: {dtype!r}")
    return f"torch.{identifier(name)}"


def literal(value: bool | float) -> str:
    """A Python literal for a scalar, with inf/nan spelled as float('inf')/float('nan')."""
    if isinstance(value, (bool, sympy.logic.boolalg.BooleanAtom)):
        return "True" if bool(value) else "False"
    if isinstance(value, (int, sympy.Integer)):
        return str(int(value))
    return float_literal(float(value))


def arg_code(arg: object) -> str:
    """Source for one op argument: a value expression (str), dtype, scalar or None."""
    if isinstance(arg, str):
        return arg
    if arg is None:
        return "None"
    if isinstance(arg, torch.dtype):
        return dtype_code(arg)
    if isinstance(arg, (bool, int, float, sympy.Number, sympy.logic.boolalg.BooleanAtom)):
        return literal(arg)
    if isinstance(arg, tuple):
        inner = ", ".join(arg_code(a) for a in arg)
        return f"({inner},)" if len(arg) == 1 else f"({inner})"
    raise CodegenError(f"reference backend: cannot render argument {arg!r}")
