"""The core's lowering table: every lowering family's functions, by aten overload name."""

from __future__ import annotations

import functools

from polyduct.lowering import (
    index,
    matmul,
    misc,
    pointwise,
    pool,
    random,
    reduce,
    scan,
    scatter,
    scatter_reduce,
    views,
)
from polyduct.lowering.graph import LoweringFn


def core_lowerings() -> dict[str, LoweringFn]:
    """The core's lowering table (every family), by aten overload name (a fresh copy)."""
    return dict(_core_lowerings())


# memo of a table derived from the core's code only: not process state
@functools.cache
def _core_lowerings() -> dict[str, LoweringFn]:
    """Built once per process: the families' tables are fixed (about 2M instructions)."""
    table: dict[str, LoweringFn] = {}
    modules = (
        pointwise,
        views,
        reduce,
        misc,
        scan,
        index,
        pool,
        random,
        scatter,
        scatter_reduce,
        matmul,
    )
    for module in modules:
        table.update(module.table())
    return table
