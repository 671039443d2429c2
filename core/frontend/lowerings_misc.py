"""Other lowerings: constants and factories, cat, padding, copies, indexing, random."""

from __future__ import annotations

from polyduct.frontend.lowering import LoweringFn


def table() -> dict[str, LoweringFn]:
    """The remaining lowerings, by aten overload name."""
    return {}
