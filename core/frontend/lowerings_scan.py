"""scan lowerings (filled in by the following commits)."""

from __future__ import annotations

from polyduct.frontend.lowering import LoweringFn


def table() -> dict[str, LoweringFn]:
    """The scan lowerings, by aten overload name."""
    return {}
