"""Structural keys of kernels: two kernels with equal keys generate the same source but for names.

A key holds everything a backend's codegen sees of a `KernelSpec` except its name and buffer names:
the iteration spaces, size arguments, device, each buffer's position, dtype, role and extent, and
the trace of every stage body (each op with its arguments, buffers named by position, values by
the op that produced them). The aten ops the bodies compute (`ORIGINS`) are part of the key, since
a scoped override may send kernels to a backend by them. Bodies that scan or sort have no key
(their combine functions are not traced here): such kernels are never shared.

Tracing is only done for kernels whose cheap `shape_key` (everything but the traces) matches that
of an earlier kernel, so graphs without repeated kernels pay next to nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any

import sympy
import torch

from polyduct.handlers.default import DefaultHandler
from polyduct.indexing import index_vars
from polyduct.kernel import KernelSpec
from polyduct.lowering.graph import ORIGINS
from polyduct.ops import reduction_num_outputs


class _NotKeyed(Exception):
    """A body does something the key recorder does not trace (scan, sort)."""


class _Value:
    """A traced op result: the op's position in the trace."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


class _Recorder(DefaultHandler[Any]):
    """Records every op with normalised arguments; returns placeholder values."""

    def __init__(self, buffers: dict[str, int]) -> None:
        self.buffers = buffers
        self.trace: list[Hashable] = []
        self._indirect = itertools.count()

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._record(name, args, kwargs)

    def _record(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
    ) -> Any:
        entry: tuple[Hashable, ...] = (name, tuple([self._norm(a) for a in args]))
        if kwargs:
            entry += (self._norm(tuple(sorted(kwargs.items()))),)
        self.trace.append(entry)
        return _Value(len(self.trace) - 1)

    def _norm(self, value: Any) -> Hashable:
        kind = type(value)
        if kind is _Value:
            return ("value", value.n)
        if kind is str:
            return ("buffer", self.buffers[value]) if value in self.buffers else ("str", value)
        if value is None or isinstance(value, (sympy.Basic, torch.dtype)):
            return value
        if kind in (bool, int, float):  # exact types: subclasses are not traced
            return (kind.__name__, repr(value))  # keeps -0.0 apart from 0.0, True from 1
        if kind in (tuple, list):
            return (kind.__name__, tuple([self._norm(v) for v in value]))
        raise _NotKeyed(f"argument {value!r}")

    def masked(self, mask: Any, body: Callable[[], Any], other: Any) -> Any:
        self._record("masked_begin", (mask,))
        result = body()
        return self._record("masked_end", (result, other))

    def reduction(self, dtype: Any, src_dtype: Any, reduction_type: Any, value: Any) -> Any:
        first = self._record("reduction", (dtype, src_dtype, reduction_type, value))
        n = reduction_num_outputs(reduction_type)
        return first if n == 1 else tuple(self._record("result", (first, i)) for i in range(n))

    def frexp(self, x0: Any) -> Any:
        first = self._record("frexp", (x0,))
        return first, self._record("result", (first, 1))

    def indirect_indexing(
        self, x: Any, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        self._record("indirect_indexing", (x, size, check, wrap_neg))
        n = next(self._indirect)
        return sympy.Symbol(f"indirect{n}", integer=True, nonnegative=True)

    def scan(self, dtypes: Any, combine_fn: Any, values: Any) -> Any:
        raise _NotKeyed("scan")

    def sort(self, dtypes: Any, values: Any, stable: bool, descending: bool) -> Any:
        raise _NotKeyed("sort")


def shape_key(spec: KernelSpec) -> Hashable:
    """Everything of `spec` a backend sees but its name, buffer names and stage bodies."""
    buffers = tuple((b.dtype, b.role, b.numel) for b in spec.buffers)
    kinds = tuple(stage.kind for stage in spec.stages)
    return (spec.ranges, spec.reduction_ranges, spec.size_args, spec.device, buffers, kinds)


def trace_stages(
    spec: KernelSpec, ops: Any, before: Callable[[str], None] | None = None
) -> set[str]:
    """Run `spec`'s stage bodies on `ops` at the kernel's own variables (`before(kind)` ahead
    of each); returns the aten ops they compute (their origins)."""
    origins: set[str] = set()
    token = ORIGINS.set(origins)
    try:
        xs = index_vars("x", len(spec.ranges))
        rs = index_vars("r", len(spec.reduction_ranges))
        for stage in spec.stages:
            if before is not None:
                before(stage.kind)
            stage.body(ops, xs, rs)
    finally:
        ORIGINS.reset(token)
    return origins


def kernel_key(spec: KernelSpec) -> Hashable | None:
    """`shape_key` plus the traced stage bodies and origins; None for bodies that are not traced."""
    recorder = _Recorder({b.name: i for i, b in enumerate(spec.buffers)})
    try:
        origins = trace_stages(spec, recorder, lambda kind: recorder.trace.append(("stage", kind)))
    except _NotKeyed:
        return None
    return (shape_key(spec), tuple(recorder.trace), tuple(sorted(origins)))


class _Seen:
    """A kernel kept under its own name, its key traced when first needed."""

    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec
        self._key: Hashable | None = None
        self._traced = False

    def key(self) -> Hashable | None:
        if not self._traced:
            self._key, self._traced = kernel_key(self.spec), True
        return self._key


class KernelKeys:
    """Finds, for each kernel in turn, an earlier kernel it is structurally identical to."""

    def __init__(self) -> None:
        self._by_shape: dict[Hashable, list[_Seen]] = {}

    def twin(self, spec: KernelSpec) -> str | None:
        """The name of an earlier kernel with `spec`'s key (None if none); else remembers `spec`."""
        earlier = self._by_shape.setdefault(shape_key(spec), [])
        seen = _Seen(spec)
        if earlier and seen.key() is not None:
            for other in earlier:
                if other.key() == seen.key():
                    return other.spec.name
        earlier.append(seen)
        return None
