"""Helpers to build small KernelSpecs and run them through the Triton backend (interpreter)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sympy
import torch

from polyduct.cache import Cache, import_module_file
from polyduct.kernel import Body, KernelBuffer, KernelSpec, Stage
from polyduct_triton import TritonBackend, TritonOptions


def backend(tmp: Path) -> TritonBackend:
    return TritonBackend(TritonOptions(interpret=True, cache=Cache(tmp)))


def buf(name: str, t: torch.Tensor | torch.dtype, role: str, numel: int | sympy.Expr = 0) -> KernelBuffer:
    if isinstance(t, torch.Tensor):
        return KernelBuffer(name, t.dtype, role, sympy.Integer(t.numel()))  # type: ignore[arg-type]
    return KernelBuffer(name, t, role, sympy.sympify(numel))  # type: ignore[arg-type]


def spec(
    name: str,
    ranges: Sequence[int | sympy.Expr],
    rranges: Sequence[int | sympy.Expr],
    stages: Sequence[tuple[str, Body]],
    buffers: Sequence[KernelBuffer],
    size_args: Sequence[sympy.Symbol] = (),
) -> KernelSpec:
    return KernelSpec(
        name=name,
        ranges=tuple(sympy.sympify(r) for r in ranges),
        reduction_ranges=tuple(sympy.sympify(r) for r in rranges),
        stages=tuple(Stage(kind, body) for kind, body in stages),  # type: ignore[arg-type]
        buffers=tuple(buffers),
        size_args=tuple(size_args),
    )


def cuda_source(tmp: Path, s: KernelSpec) -> str:
    """The module source the backend generates for `s` on CUDA tensors (no GPU needed)."""
    be = TritonBackend(TritonOptions(cache=Cache(tmp)))
    return be.codegen(dataclasses.replace(s, device="cuda")).source


def run(tmp: Path, s: KernelSpec, *args: torch.Tensor | int) -> str:
    be = backend(tmp)
    src = be.codegen(s)
    fn = be.load([src])[s.name]
    fn(*args)
    return src.source


def copy_spec(name: str) -> KernelSpec:
    """o = abs(a) over 7 float32 elements."""
    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.abs(ops.load("a", x[0])))

    a = torch.randn(7)
    return spec(name, [7], [], [("outer", body)], [buf("a", a, "in"), buf("o", a, "out")])


def cuda_module(tmp: Path, name: str, autotune: bool = True) -> Any:
    """The generated module of `copy_spec(name)` for CUDA tensors, imported (nothing compiles)."""
    be = TritonBackend(TritonOptions(autotune=autotune, cache=Cache(tmp)))
    path = tmp / f"{name}.py"
    path.write_text(be.codegen(dataclasses.replace(copy_spec(name), device="cuda")).source)
    return import_module_file(path, name)
