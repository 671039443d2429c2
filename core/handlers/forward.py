"""`ForwardingHandler`: passes every op on to an inner handler (a base for observing handlers)."""

from __future__ import annotations

from typing import Any, Generic

from polyduct.handlers.default import DefaultHandler
from polyduct.ops import OP_NAMES, T


class ForwardingHandler(DefaultHandler[T], Generic[T]):
    """Calls the same op, with the same arguments, on `inner` and returns its result.

    Subclasses override `_default` (calling `super()._default(...)`) or single ops to observe or
    change what reaches the inner handler. Bodies traced through `masked` or `scan` keep calling
    this handler, so nested ops are seen too.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name not in OP_NAMES:  # `_default` is reachable only through op methods
            raise ValueError(f"{name!r} is not an op")
        return getattr(self.inner, name)(*args, **kwargs)
