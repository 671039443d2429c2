"""Frontend options: which kernel and wrapper backends, debug checks, lowering overrides.

Built once at the entry point (`polyduct.pipeline.Compilation`) from the `options` mapping of
`torch.compile` and the environment's snapshot (`polyduct.environment`); unknown keys and unknown
backend names are rejected with the list of what is accepted/installed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from polyduct.environment import flag, snapshot
from polyduct.errors import InvalidOption
from polyduct.overrides import Scope, validate
from polyduct.plugins import Plugins

KERNELS_ENV = "POLYDUCT_KERNELS"
WRAPPER_ENV = "POLYDUCT_WRAPPER"
DEBUG_ASSERTS_ENV = "POLYDUCT_DEBUG_ASSERTS"
DUMP_AFTER_ENV = "POLYDUCT_DUMP_AFTER"
REMOTE_CACHE_ENV = "POLYDUCT_REMOTE_CACHE"
_KEYS = (
    "kernels",
    "wrapper",
    "kernel_options",
    "wrapper_options",
    "debug_asserts",
    "lowerings",
    "observer",
    "realize_cost",
    "overrides",
    "remote_cache",
    "cudagraphs",
    "dump_after",
    "conv_layout",
)
CONV_LAYOUTS = ("auto", "channels_last", "eager")


@dataclass(frozen=True)
class FrontendOptions:
    """Options of one `torch.compile(..., backend="polyduct")` / `polyduct.compile` call.

    `lowerings`: program-scope overrides, aten overload name -> lowering function (they win over
    plugin and core lowerings). `observer`: called with each `CompiledGraph` (tests, tooling).
    `realize_cost`: a multi-use pointwise value larger than this is computed once into a buffer.
    `overrides`: a `polyduct.overrides.Scope` for this program only (docs/overrides.md).
    `remote_cache`: a redis://host:port/db store shared by every cache of this process (as
    `POLYDUCT_REMOTE_CACHE`; docs/remote-cache.md). It selects no code, so is not in `cache_key`.
    `cudagraphs`: replay each CUDA graph's launches through CUDA graphs (polyduct.cudagraphs);
    `mode="reduce-overhead"` sets it. Not in `cache_key` either: the generated code is the same.
    `dump_after`: names of pipeline passes (`polyduct.pipeline.PASSES`) after which what the pass
    made is logged (`TORCH_LOGS="polyduct"`); not in `cache_key`.
    `conv_layout`: where CPU convolutions run channels-last (`polyduct.lowering.layouts`):
    `auto` where the weights to copy are few next to the activations, `channels_last` wherever
    the graph allows it, `eager` never.
    """

    kernels: str = "auto"
    wrapper: str = "python"
    kernel_options: Mapping[str, Any] = field(default_factory=dict)
    wrapper_options: Mapping[str, Any] = field(default_factory=dict)
    debug_asserts: bool = False
    lowerings: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    observer: Callable[[Any], None] | None = None
    realize_cost: int = 24
    overrides: Scope | None = None
    remote_cache: str | None = None
    cudagraphs: bool = False
    dump_after: tuple[str, ...] = ()
    conv_layout: str = "auto"

    def __post_init__(self) -> None:
        if self.overrides is not None and not isinstance(self.overrides, Scope):
            raise InvalidOption(
                "polyduct", "overrides", self.overrides, "a polyduct.overrides.Scope"
            )
        for key in ("kernels", "wrapper"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value:
                raise InvalidOption("polyduct", key, value, "a backend name")
        if self.realize_cost < 1:
            raise InvalidOption("polyduct", "realize_cost", self.realize_cost, "an int >= 1")
        if self.conv_layout not in CONV_LAYOUTS:
            raise InvalidOption("polyduct", "conv_layout", self.conv_layout, " or ".join(CONV_LAYOUTS))

    @classmethod
    def from_mapping(
        cls, options: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
    ) -> FrontendOptions:
        """Options from a `torch.compile(options=...)` mapping plus the environment."""
        env = snapshot(environ)
        opts = dict(options or {})
        unknown = sorted(set(opts) - set(_KEYS))
        if unknown:
            raise InvalidOption(
                "polyduct", unknown[0], opts[unknown[0]], "one of " + ", ".join(_KEYS)
            )
        opts.setdefault("kernels", env.get(KERNELS_ENV) or "auto")
        opts.setdefault("wrapper", env.get(WRAPPER_ENV) or "python")
        opts.setdefault("debug_asserts", flag(env, DEBUG_ASSERTS_ENV))
        opts.setdefault("remote_cache", env.get(REMOTE_CACHE_ENV))
        passes = opts.get("dump_after", env.get(DUMP_AFTER_ENV, ""))
        if isinstance(passes, str):
            passes = [p.strip() for p in passes.split(",") if p.strip()]
        opts["dump_after"] = tuple(passes)
        return cls(**opts)

    def validate(self, plugins: Plugins) -> None:
        """Raise `UnknownName` (listing installed backends) for a backend that is not there."""
        if self.kernels != "auto":  # "auto": the backends' declared defaults (kernel_choice.py)
            plugins.kernel_backends.get(self.kernels)
        plugins.wrapper_backends.get(self.wrapper)
        if self.overrides is not None:
            validate(
                self.overrides,
                plugins.kernel_backends.names(),
                plugins.wrapper_backends.names(),
                plugins.override_sets.names(),
            )

    def cache_key(self) -> str:
        """What selects generated code: backends, their options, debug checks, overrides."""
        scope = self.overrides.cache_key() if self.overrides is not None else "-"
        parts = (
            self.kernels,
            self.wrapper,
            repr(sorted(self.kernel_options.items())),
            repr(sorted(self.wrapper_options.items())),
            str(self.debug_asserts),
            str(self.realize_cost),
            self.conv_layout,
            repr(sorted((k, _name(v)) for k, v in self.lowerings.items())),
            scope,
        )
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
