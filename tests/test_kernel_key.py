"""Kernel keys: equal exactly for kernels that differ only in names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from polyduct.kernel import KernelBuffer, KernelSpec, Stage
from polyduct.scheduling.kernel_key import KernelKeys, kernel_key


def _spec(name: str, src: str, dst: str, constant: Any, scan: bool = False) -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.add(ops.load(src, x[0]), ops.constant(constant, torch.float32))
        if scan:
            (value,) = ops.scan((torch.float32,), lambda a, b: a, (value,))
        ops.store(dst, x[0], value)

    n = sympy.Integer(8)
    buffers = (
        KernelBuffer(src, torch.float32, "in", n),
        KernelBuffer(dst, torch.float32, "out", n),
    )
    return KernelSpec(name, (n,), (), (Stage("outer", body),), buffers)


def test_names_do_not_matter_but_constants_do() -> None:
    assert kernel_key(_spec("k0", "a", "b", 1.0)) == kernel_key(_spec("k1", "c", "d", 1.0))
    assert kernel_key(_spec("k0", "a", "b", 1.0)) != kernel_key(_spec("k0", "a", "b", 2.0))
    assert kernel_key(_spec("k0", "a", "b", 0.0)) != kernel_key(_spec("k0", "a", "b", -0.0))
    assert kernel_key(_spec("k0", "a", "b", 1)) != kernel_key(_spec("k0", "a", "b", True))


def test_untraced_bodies_have_no_key() -> None:
    assert kernel_key(_spec("k0", "a", "b", 1.0, scan=True)) is None


def test_twins_are_found_in_order() -> None:
    keys = KernelKeys()
    assert keys.twin(_spec("kernel0", "a", "b", 1.0)) is None
    assert keys.twin(_spec("kernel1", "b", "c", 2.0)) is None
    assert keys.twin(_spec("kernel2", "c", "d", 1.0)) == "kernel0"
    assert keys.twin(_spec("kernel2", "d", "e", 2.0)) == "kernel1"
    assert keys.twin(_spec("kernel2", "e", "f", 1.0, scan=True)) is None
    assert keys.twin(_spec("kernel3", "f", "g", 1.0, scan=True)) is None
