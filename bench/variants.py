"""The things a workload is run with: eager, Inductor, and each installed polyduct kernel backend."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bench.workloads import SIZES

# Backends too slow by design for the larger sizes on a CPU: the reference backend is the
# oracle (a Python loop nest per kernel), Triton on a CPU runs under its interpreter.
MAX_SIZE_ON_CPU: dict[str, str] = {"polyduct-reference": "medium", "polyduct-triton": "small"}


@dataclass(frozen=True)
class Variant:
    """A named way to turn a function into a callable (`wrap(fn, dynamic)`); `max_size` is the
    largest size it is run at (None: every size); `forward_only` variants skip workloads that
    train; `static_only` ones skip dynamic-shape workloads."""

    name: str
    wrap: Callable[[Callable[..., Any], bool], Callable[..., Any]]
    max_size: str | None = None
    forward_only: bool = False
    static_only: bool = False

    def runs_at(self, size: str) -> bool:
        return self.max_size is None or SIZES[size] <= SIZES[self.max_size]


def fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of `fn` with its own code object: each variant gets its own Dynamo cache, so no
    variant's guards or recompiles touch another's and no Dynamo reset is needed between them."""
    if not isinstance(fn, types.FunctionType):
        return fn
    return types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )


def _eager(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
    return fn


def _inductor(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
    return torch.compile(fresh(fn), backend="inductor", dynamic=dynamic)


def _dynamo_only(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """A torch.compile backend that runs the captured graph as it is (no AOTAutograd, no code)."""
    return gm.forward


def _dynamo_floor(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
    """What every torch.compile backend pays per call before its own code runs: Dynamo's frame
    hook, guards and the call into the captured graph (which here runs eagerly)."""
    return torch.compile(fresh(fn), backend=_dynamo_only, dynamic=dynamic)


def _polyduct(
    kernels: str, kernel_options: dict[str, Any] | None = None
) -> Callable[[Callable[..., Any], bool], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any], dynamic: bool) -> Callable[..., Any]:
        opts: dict[str, Any] = {"kernels": kernels}
        if kernel_options:
            opts["kernel_options"] = dict(kernel_options)
        return torch.compile(fresh(fn), backend="polyduct", options=opts, dynamic=dynamic)

    return wrap


class _Exported:
    """`fn` through `torch.export` and then `compile_graph` (polyduct) or `compile_fx` (Inductor),
    done on the first call with its inputs: the call path has no Dynamo frame hook and no guards,
    so what remains per call is the compiled code's own overhead. Sizes are exported as dynamic
    dims when the workload is dynamic."""

    def __init__(self, fn: Callable[..., Any], dynamic: bool, compiler: str) -> None:
        self.fn, self.dynamic, self.compiler = fn, dynamic, compiler
        self.compiled: Callable[..., Any] | None = None

    def _compile(self, args: tuple[Any, ...]) -> Callable[..., Any]:
        fn = self.fn

        class Module(torch.nn.Module):
            def forward(self, *xs: Any) -> Any:
                return fn(*xs)

        shapes = None
        if self.dynamic:
            auto = torch.export.Dim.AUTO
            shapes = (tuple({d: auto for d in range(a.dim())} for a in args),)  # for *xs
        exported = torch.export.export(Module(), args, dynamic_shapes=shapes)
        if self.compiler == "inductor":
            inductor: Callable[..., Any] = torch._inductor.compile(exported.module(), list(args))
            return inductor
        from polyduct.frontend.export import compile_exported

        return compile_exported(exported, {"kernels": self.compiler})

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            self.compiled = self._compile(args)
        return self.compiled(*args)


def _exported(compiler: str) -> Callable[[Callable[..., Any], bool], Callable[..., Any]]:
    return lambda fn, dynamic: _Exported(fn, dynamic, compiler)


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
    device: str,
    kernels: list[str] | None = None,
    halide_schedules: list[str] | None = None,
    dynamo_floor: bool = False,
    export: bool = False,
) -> list[Variant]:
    """eager, inductor, then `polyduct-<k>` for each kernel backend (all installed by default),
    then `polyduct-halide-<schedule>` for each Halide schedule asked for (e.g. Adams2019), then
    `dynamo-floor` (Dynamo with a backend that adds nothing) when asked for, then with `export`
    `inductor-export` and `polyduct-<k>-export`: the same compilers reached through torch.export,
    with no Dynamo on the call path."""
    found, _ = installed_kernel_backends(device)
    chosen = found if kernels is None else kernels
    cpu = device.split(":")[0] == "cpu"

    def limit(name: str) -> str | None:
        return MAX_SIZE_ON_CPU.get(name) if cpu else None

    named = [(f"polyduct-{k}", _polyduct(k)) for k in chosen] + [
        (f"polyduct-halide-{s}", _polyduct("halide", {"schedule": s}))
        for s in halide_schedules or []
    ]
    floor = [Variant("dynamo-floor", _dynamo_floor)] if dynamo_floor else []
    # compile_fx on an exported graph specialises its sizes (dynamic ones go through AOTInductor)
    inductor_export = Variant(
        "inductor-export", _exported("inductor"), forward_only=True, static_only=True
    )
    exported = [inductor_export] if export else []
    exported += [
        Variant(f"polyduct-{k}-export", _exported(k), limit(f"polyduct-{k}"), forward_only=True)
        for k in (chosen if export else [])
    ]
    return (
        [Variant("eager", _eager), Variant("inductor", _inductor)]
        + [Variant(name, wrap, limit(name)) for name, wrap in named]
        + floor
        + exported
    )


def by_name(device: str, name: str) -> Variant:
    """The variant called `name` (`polyduct-halide-<schedule>` names a Halide schedule)."""
    prefix = "polyduct-halide-"
    schedules = [name.removeprefix(prefix)] if name.startswith(prefix) else []
    for variant in variants(device, None, schedules, dynamo_floor=True, export=True):
        if variant.name == name:
            return variant
    raise SystemExit(f"unknown variant {name!r} on {device}")
