"""A deliberately broken kernel backend for the conformance tests (importable as module:attr).

`BrokenBackend` is the reference backend with two bugs: `sub` adds instead of subtracting when its
operand was loaded from an int16 buffer, and `hypot` is missing (not defined by its ops class and
refused at codegen).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import sympy
import torch

from polyduct.errors import UnsupportedOp
from polyduct.handlers.default import DefaultHandler
from polyduct.kernel import (
    Capabilities,
    KernelBackend,
    KernelFn,
    KernelSource,
    KernelSpec,
    Stage,
)
from polyduct.reference.backend import ReferenceBackend
from polyduct.reference.ops import ReferenceOps


class BrokenOps(ReferenceOps):  # type: ignore[misc]
    """The reference table without `hypot` (so static completeness reports it)."""

    hypot = None  # type: ignore[assignment]


class _Forward(DefaultHandler[Any]):
    """Forwards every op to the real handler, except the two planted bugs."""

    def __init__(self, inner: Any, spec: KernelSpec) -> None:
        self.inner, self.spec = inner, spec
        self.dtypes: dict[str, torch.dtype] = {}

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name == "hypot":
            raise UnsupportedOp("hypot", "broken", "planted bug", self.spec.name)
        return getattr(self.inner, name)(*args, **kwargs)

    def load(self, name: str, index: sympy.Expr) -> Any:
        value = self.inner.load(name, index)
        self.dtypes[str(value)] = self.spec.buffer(name).dtype
        return value

    def sub(self, x0: Any, x1: Any) -> Any:
        if self.dtypes.get(str(x0)) == torch.int16:
            return self.inner.add(x0, x1)
        return self.inner.sub(x0, x1)


@dataclasses.dataclass(frozen=True)
class _Wrapped:
    body: Any
    spec: KernelSpec

    def __call__(self, ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        self.body(_Forward(ops, self.spec), x, r)


class BrokenBackend(KernelBackend):
    """Reference backend with `sub` wrong on int16 and `hypot` missing."""

    name: ClassVar[str] = "broken"
    caps: ClassVar[Capabilities] = ReferenceBackend.caps
    ops_cls: ClassVar[type] = BrokenOps

    def __init__(self) -> None:
        self.inner = ReferenceBackend()

    def codegen(self, spec: KernelSpec) -> KernelSource:
        stages = tuple(Stage(s.kind, _Wrapped(s.body, spec)) for s in spec.stages)
        src = self.inner.codegen(dataclasses.replace(spec, stages=stages))
        return KernelSource(src.name, self.name, src.source)

    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        return self.inner.load([KernelSource(s.name, "reference", s.source) for s in sources])


def test_broken_backend_really_is_broken() -> None:
    from polyduct.ops import missing_ops

    assert missing_ops(BrokenOps) == ["hypot"]
