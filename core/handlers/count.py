"""`OpCounter`: counts ops by name, either forwarding to an inner handler or on its own.

Standalone, each op returns a placeholder of the right structure (a tuple for multi-output ops, a
sympy symbol for `indirect_indexing`, None for ops without a value), and `masked` / `scan` run
their bodies so that nested ops are counted too.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

import sympy

from polyduct.handlers.forward import ForwardingHandler
from polyduct.ops import reduction_num_outputs

_NO_VALUE = frozenset({"store", "store_reduction", "check_bounds", "device_assert_async"})


class OpCounter(ForwardingHandler[Any]):
    """`counts[op]` is how many times `op` was called on this handler."""

    def __init__(self, inner: Any = None) -> None:
        super().__init__(inner)
        self.counts: Counter[str] = Counter()
        self._symbols = itertools.count()

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.counts[name] += 1
        if self.inner is not None:
            return super()._default(name, args, kwargs)
        return self._placeholder(name, args)

    def _placeholder(self, name: str, args: tuple[Any, ...]) -> Any:
        if name in _NO_VALUE:
            return None
        if name == "masked":
            body: Callable[[], Any] = args[1]
            return body()
        if name == "indirect_indexing":
            return sympy.Symbol(f"indirect{next(self._symbols)}", integer=True, nonnegative=True)
        if name == "reduction":
            count = reduction_num_outputs(args[2])
            return name if count == 1 else (name,) * count
        if name == "frexp":
            return (name, name)
        if name == "scan":
            values = tuple(args[2])
            args[1](values, values)  # count the combine function's ops once
            return (name,) * len(values)
        if name == "sort":
            return (name,) * len(args[1])
        return name

    def total(self) -> int:
        """All ops counted."""
        return sum(self.counts.values())
