"""Reference kernel backend, memory: masked, indirect and atomic loads and stores, and the bounds
check of every kept lane."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import sympy
import torch
from test_reference import _pw_buffers, buf, randn, run

from polyduct.errors import KernelIndexError
from polyduct.reference import memory as rm


@pytest.fixture(autouse=True)
def _cache(isolated_cache: Path) -> Path:
    return isolated_cache


def test_masked_load_shift() -> None:
    t = randn(17, seed=10)
    out = torch.empty(17)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        mask = ops.ge(ops.index_expr(x[0], torch.int64), ops.constant(1, torch.int64))
        value = ops.masked(mask, lambda: ops.load("a", x[0] - 1), 0.5)
        ops.store("out", x[0], value)

    run((17,), (), [("outer", body)], _pw_buffers(17), (t, out))
    torch.testing.assert_close(out, torch.cat([torch.tensor([0.5]), t[:-1]]), equal_nan=True)


def test_direct_index_outside_its_buffer_raises() -> None:
    """A lane the mask keeps that loads or stores outside its buffer is a lowering bug (a GPU
    kernel would read or write beside the tensor): the reference backend names it, unmasked
    lanes excepted, instead of wrapping a negative index."""
    t = randn(17, seed=12)
    out = torch.empty(17)

    def shifted(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.store("out", x[0], ops.load("a", x[0] - 1))

    with pytest.raises(KernelIndexError, match=r"k_test.*index -1.*buffer 'a'.*size 17"):
        run((17,), (), [("outer", shifted)], _pw_buffers(17), (t, out))

    def past_end(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.store("out", x[0] + 1, ops.load("a", x[0]))

    with pytest.raises(KernelIndexError, match=r"k_test.*index 17.*buffer 'out'.*size 17"):
        run((17,), (), [("outer", past_end)], _pw_buffers(17), (t, out))


def _gather_body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
    where = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(10))
    ops.store("out", x[0], ops.load("a", where))


def test_indirect_load_wraps_negative_and_checks_bounds() -> None:
    t = randn(10, seed=11)
    idx = torch.tensor([0, 9, -1, -10, 3, 4])
    out = torch.empty(6)
    buffers = (
        buf("idx", torch.int64, "in", 6),
        buf("a", torch.float32, "in", 10),
        buf("out", torch.float32, "out", 6),
    )
    run((6,), (), [("outer", _gather_body)], buffers, (idx, t, out))
    torch.testing.assert_close(out, t[idx], equal_nan=True)
    bad = torch.tensor([0, 1, 12, 3, 4, 5])
    with pytest.raises(KernelIndexError, match=r"k_test.*index 12.*buffer 'a'.*size 10"):
        run((6,), (), [("outer", _gather_body)], buffers, (bad, t, out))


def test_atomic_add_accumulates_duplicates() -> None:
    idx = torch.tensor([0, 2, 2, 1, 0, 2])
    src = randn(6, seed=12, edges=False)
    out = torch.zeros(3)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        where = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(3))
        ops.store("out", where, ops.load("src", x[0]), mode="atomic_add")

    buffers = (
        buf("idx", torch.int64, "in", 6),
        buf("src", torch.float32, "in", 6),
        buf("out", torch.float32, "inout", 3),
    )
    run((6,), (), [("outer", body)], buffers, (idx, src, out))
    torch.testing.assert_close(out, torch.zeros(3).index_add(0, idx, src))


def test_a_load_of_one_element_is_a_copy() -> None:
    """A value loaded at a constant index and stored back in place (an in-place kernel that
    copies): the load was a view of the buffer, and torch refused the aliasing store."""
    flat = torch.tensor([3.0, 4.0])
    value = rm.load(flat, 0)
    rm.store(flat, 0, value)
    flat[0] = 5.0
    assert value.item() == 3.0
