"""The things a workload is run with: eager, Inductor, and each installed polyduct kernel backend."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Variant:
    """A named way to turn a function into a callable (`wrap(fn, dynamic)`)."""

    name: str
    wrap: Callable[[Callable[..., Any], bool], Callable[..., Any]]


def _eager(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
    return fn


def _inductor(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
    return torch.compile(fn, backend="inductor", dynamic=dynamic)


def _polyduct(
    kernels: str, kernel_options: dict[str, Any] | None = None
) -> Callable[[Callable[..., Any], bool], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
        opts: dict[str, Any] = {"kernels": kernels}
        if kernel_options:
            opts["kernel_options"] = dict(kernel_options)
        return torch.compile(fn, backend="polyduct", options=opts, dynamic=dynamic)

    return wrap


def installed_kernel_backends(device: str) -> tuple[list[str], list[str]]:
    """Installed polyduct kernel backends usable on `device`, and load errors (as text)."""
    try:
        from polyduct.plugins import load
    except ImportError as err:
        return [], [f"polyduct not importable: {err}"]
    plugins = load()
    names = []
    for name in plugins.kernel_backends.names():
        caps = plugins.kernel_backends.get(name).backend_cls.caps
        if device.split(":")[0] in caps.devices:
            names.append(name)
    return names, [str(e) for e in plugins.errors]


def variants(
    device: str, kernels: list[str] | None = None, halide_schedules: list[str] | None = None
) -> list[Variant]:
    """eager, inductor, then `polyduct-<k>` for each kernel backend (all installed by default),
    then `polyduct-halide-<schedule>` for each Halide schedule asked for (e.g. Adams2019)."""
    found, _ = installed_kernel_backends(device)
    chosen = found if kernels is None else kernels
    extra = [
        Variant(f"polyduct-halide-{s}", _polyduct("halide", {"schedule": s}))
        for s in halide_schedules or []
    ]
    return (
        [Variant("eager", _eager), Variant("inductor", _inductor)]
        + [Variant(f"polyduct-{k}", _polyduct(k)) for k in chosen]
        + extra
    )
