"""Every hook polyduct calls, and the registration dataclasses hooks return.

A distribution plugs in by naming a module in entry-point group `polyduct` whose functions, marked
with `hookimpl`, implement some of these hooks. Each hook is called once per process, when the
plugin manager loads (`polyduct.plugins.load`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from polyduct.kernel import KernelBackend
from polyduct.wrapper import WrapperBackend

PROJECT = "polyduct"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Options = Mapping[str, Any]


@dataclass(frozen=True)
class KernelBackendSpec:
    """A kernel backend: its name, its class (checked for completeness) and how to build it."""

    name: str
    backend_cls: type[KernelBackend]
    factory: Callable[[Options], KernelBackend]
    description: str = ""


@dataclass(frozen=True)
class WrapperBackendSpec:
    """A wrapper backend: its name, its class and how to build it."""

    name: str
    backend_cls: type[WrapperBackend]
    factory: Callable[[Options], WrapperBackend]
    description: str = ""


@dataclass(frozen=True)
class LoweringSpec:
    """A lowering for one aten overload (qualified name such as `aten.gelu.default`)."""

    op: str
    fn: Callable[..., Any]
    description: str = ""


@dataclass(frozen=True)
class OverrideSetSpec:
    """A named set of scoped overrides a distribution ships (see docs/overrides.md)."""

    name: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


@hookspec
def polyduct_kernel_backends() -> list[KernelBackendSpec]:
    """Kernel backends this distribution provides."""
    return []


@hookspec
def polyduct_wrapper_backends() -> list[WrapperBackendSpec]:
    """Wrapper backends this distribution provides."""
    return []


@hookspec
def polyduct_lowerings() -> list[LoweringSpec]:
    """Lowerings this distribution adds or overrides (plugins win over core defaults)."""
    return []


@hookspec
def polyduct_override_sets() -> list[OverrideSetSpec]:
    """Named override sets this distribution ships, selectable in compile options."""
    return []
