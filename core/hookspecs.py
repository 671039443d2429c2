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
    """A kernel backend: its name, its class (checked for completeness) and how to build it.

    `defaults`: device type -> priority for the devices this backend is the default for
    (`kernels="auto"` takes the installed backend of highest priority for the graph's device; the
    same order picks a stand-in for a kernel using an op its backend declares unsupported).
    `environment`: option name -> environment variable: the entry reads each variable that is set
    and passes its text as that option, unless the compile's options set it
    (docs/environment.md lists every variable).
    """

    name: str
    backend_cls: type[KernelBackend]
    factory: Callable[[Options], KernelBackend]
    description: str = ""
    defaults: Mapping[str, int] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WrapperBackendSpec:
    """A wrapper backend: its name, its class and how to build it."""

    name: str
    backend_cls: type[WrapperBackend]
    factory: Callable[[Options], WrapperBackend]
    description: str = ""
    environment: Mapping[str, str] = field(default_factory=dict)  # as KernelBackendSpec's


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
