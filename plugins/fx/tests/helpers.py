"""Hand-built Wrapper IR programs and a loader for Python-source test kernels.

Test kernels follow the calling convention of `polyduct.kernel` (`kernel(*tensors, *sizes)`,
writing their outputs in place); they stand in for a kernel backend so the converter is tested on
its own. Programs through real kernel backends are in test_backends.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import sympy
import torch

from polyduct.cache import import_module_file
from polyduct.kernel import KernelFn
from polyduct.wrapper.ir import (
    Allocate,
    Free,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    Line,
    WrapperProgram,
)

_counter = itertools.count()
ADD_SOURCE = """
def kernel(in_ptr0, in_ptr1, out_ptr0, ks0):
    out_ptr0.view(-1)[:ks0] = in_ptr0.reshape(-1)[:ks0] + in_ptr1.reshape(-1)[:ks0]
"""
SCALE_SOURCE = """
def kernel(in_ptr0, out_ptr0, ks0):
    out_ptr0.view(-1)[:ks0] = in_ptr0.reshape(-1)[:ks0] * 2
"""


def sizes(*values: int | sympy.Expr) -> tuple[sympy.Expr, ...]:
    return tuple(sympy.sympify(v) for v in values)


class PyLoader:
    """A `KernelLoader` for Python-source kernels defining `kernel(...)`; counts its calls."""

    def __init__(self, root: Path) -> None:
        self.root, self.calls = root, 0

    def __call__(self, defs: Sequence[KernelDefinition]) -> dict[str, KernelFn]:
        self.calls += 1
        loaded: dict[str, KernelFn] = {}
        for d in defs:
            path = self.root / f"{d.name}_{next(_counter)}.py"
            path.write_text(d.source)
            loaded[d.name] = import_module_file(path, path.stem).kernel
        return loaded


def add_program(n: int = 6) -> WrapperProgram:
    """out = (x + y) * 2 through two kernels and a freed intermediate."""
    shape = sizes(n)
    lines: list[Line] = [
        GraphInputs(("x", "y")),
        InputAssert("x", shape, sizes(1), torch.float32),
        InputAssert("y", shape, sizes(1), torch.float32),
        KernelDefinition("k_add", "py", ADD_SOURCE),
        KernelDefinition("k_scale", "py", SCALE_SOURCE),
        Allocate("buf0", shape, sizes(1), torch.float32, "cpu"),
        KernelCall("k_add", ("x", "y", "buf0"), sizes(n)),
        Allocate("buf1", shape, sizes(1), torch.float32, "cpu"),
        KernelCall("k_scale", ("buf0", "buf1"), sizes(n)),
        Free("buf0"),
        GraphOutputs(("buf1",)),
    ]
    return WrapperProgram(tuple(lines))
