"""Hand-built kernel specs for the C++ backend tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sympy
import torch

from polyduct.cache import Cache
from polyduct.kernel import Body, KernelBuffer, KernelFn, KernelSpec, Stage
from polyduct_cpp import CppBackend, CppOptions


def backend(tmp: Path, **options: object) -> CppBackend:
    # A fresh cache per test: skip the background precompiled-header build it would start.
    options.setdefault("precompile_headers", False)
    return CppBackend(CppOptions(**options), cache=Cache(tmp))  # type: ignore[arg-type]


def buf(
    name: str, t: torch.Tensor | torch.dtype, role: str, numel: int | sympy.Expr = 0
) -> KernelBuffer:
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
        name,
        tuple(sympy.sympify(r) for r in ranges),
        tuple(sympy.sympify(r) for r in rranges),
        tuple(Stage(kind, body) for kind, body in stages),  # type: ignore[arg-type]
        tuple(buffers),
        tuple(size_args),
    )


def compile_one(be: CppBackend, s: KernelSpec) -> KernelFn:
    return be.load([be.codegen(s)])[s.name]
