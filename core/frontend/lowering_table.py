"""The core's lowering table: every lowering family's functions, by aten overload name."""

from __future__ import annotations

import functools

from polyduct.frontend import (
    lowerings_index,
    lowerings_matmul,
    lowerings_misc,
    lowerings_pointwise,
    lowerings_pool,
    lowerings_random,
    lowerings_reduce,
    lowerings_scan,
    lowerings_scatter,
    lowerings_scatter_reduce,
    lowerings_views,
)
from polyduct.frontend.lowering import LoweringFn


def core_lowerings() -> dict[str, LoweringFn]:
    """The core's lowering table (every family), by aten overload name (a fresh copy)."""
    return dict(_core_lowerings())


@functools.cache
def _core_lowerings() -> dict[str, LoweringFn]:
    """Built once per process: the families' tables are fixed (about 2M instructions)."""
    table: dict[str, LoweringFn] = {}
    modules = (
        lowerings_pointwise,
        lowerings_views,
        lowerings_reduce,
        lowerings_misc,
        lowerings_scan,
        lowerings_index,
        lowerings_pool,
        lowerings_random,
        lowerings_scatter,
        lowerings_scatter_reduce,
        lowerings_matmul,
    )
    for module in modules:
        table.update(module.table())
    return table
