"""Plugin discovery: entry points of group `polyduct` -> pluggy -> typed registries.

Loading is tolerant: each entry point is imported, registered and called on its own, so a plugin
that fails to import (any exception, `SystemExit` included; only `KeyboardInterrupt` propagates),
does not finish importing within `PluginOptions.import_timeout` seconds, fails pluggy's validation,
raises in a hook or returns a refused item (an incomplete kernel backend, say) is recorded as a
`LoadError` (distribution, version, traceback) and skipped while the others load. With
`PluginOptions(strict=True)` (`POLYDUCT_STRICT_PLUGINS=1`) the first such failure raises
`PluginLoadError` instead.

A name (kernel backend, wrapper backend, lowering, override set) that two distributions register
is refused for both, each recorded with a message naming them all, unless the user chose one:
`PluginOptions(choose=(("fast", "acme-fast"),))`, `POLYDUCT_CHOOSE=fast=acme-fast`. Entry-point
names play no part: an entry point is registered with pluggy under its distribution's name too, and
only what its hooks return names a backend.

This module holds the only untyped `pm.hook` use in polyduct; everything else sees `Plugins`.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, TypeVar

import pluggy

from polyduct import hookspecs, state
from polyduct.environment import declared_options, flag, snapshot
from polyduct.errors import CodegenError, DuplicateName, PluginLoadError
from polyduct.hookspecs import (
    KernelBackendSpec,
    LoweringSpec,
    OverrideSetSpec,
    WrapperBackendSpec,
)
from polyduct.kernel import KernelBackend, KernelFn, KernelSource, check_complete
from polyduct.registry import Origin, Registry
from polyduct.wrapper import KernelLoader, WrapperBackend
from polyduct.wrapper.ir import KernelDefinition

GROUP = hookspecs.PROJECT
STRICT_ENV = "POLYDUCT_STRICT_PLUGINS"
ONLY_ENV = "POLYDUCT_PLUGINS"  # comma-separated allowlist of distribution names
TIMEOUT_ENV = "POLYDUCT_PLUGIN_TIMEOUT"  # seconds one plugin's import may take
CHOOSE_ENV = "POLYDUCT_CHOOSE"  # comma-separated NAME=DISTRIBUTION picks for contested names
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PluginOptions:
    """How plugins load; `from_env` reads the environment once, at the entry point.

    `strict`: the first load failure raises. `only`: load just these distributions (all if None).
    `import_timeout`: seconds a plugin's import may take before it is reported and skipped (the
    import goes on in a background thread). `choose`: (name, distribution) pairs; a name several
    distributions register is taken from the chosen one, and the others' claims are dropped.
    """

    strict: bool = False
    only: frozenset[str] | None = None
    import_timeout: float = 60.0
    choose: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PluginOptions:
        env = snapshot(environ)
        strict = flag(env, STRICT_ENV)
        names = [n.strip() for n in env.get(ONLY_ENV, "").split(",") if n.strip()]
        picks = [p.strip().split("=", 1) for p in env.get(CHOOSE_ENV, "").split(",") if "=" in p]
        return cls(
            strict=strict,
            only=frozenset(names) if names else None,
            import_timeout=float(env.get(TIMEOUT_ENV, "") or 60.0),
            choose=tuple(sorted((k.strip(), v.strip()) for k, v in picks)),
        )


@dataclass(frozen=True, slots=True)
class LoadError:
    """One plugin failure: who, at which stage (import, register, a hook, an item), and why."""

    distribution: str
    version: str
    entry_point: str
    stage: str
    message: str
    traceback: str

    def __str__(self) -> str:
        return f"{self.distribution} {self.version} ({self.entry_point}) at {self.stage}: " + (
            self.message
        )


@dataclass
class Plugins:
    """Everything the installed distributions registered, plus what failed to load."""

    kernel_backends: Registry[KernelBackendSpec] = field(
        default_factory=lambda: Registry[KernelBackendSpec]("kernel backend")
    )
    wrapper_backends: Registry[WrapperBackendSpec] = field(
        default_factory=lambda: Registry[WrapperBackendSpec]("wrapper backend")
    )
    lowerings: Registry[LoweringSpec] = field(
        default_factory=lambda: Registry[LoweringSpec]("lowering")
    )
    override_sets: Registry[OverrideSetSpec] = field(
        default_factory=lambda: Registry[OverrideSetSpec]("override set")
    )
    errors: list[LoadError] = field(default_factory=list)
    distributions: dict[str, str] = field(default_factory=dict)  # distribution -> version

    def kernel_backend(self, name: str, options: Mapping[str, Any] | None = None) -> KernelBackend:
        """A new instance of kernel backend `name` (`UnknownName` lists the installed ones)."""
        return self.kernel_backends.get(name).factory(options or {})

    def environment_options(self, name: str, env: Mapping[str, str]) -> dict[str, Any]:
        """The options kernel backend `name` takes from the variables it declares
        (`KernelBackendSpec.environment`) as set in `env`, an entry's environment snapshot."""
        return declared_options(self.kernel_backends.get(name).environment, env, {})

    def wrapper_backend(
        self, name: str, options: Mapping[str, Any] | None = None
    ) -> WrapperBackend:
        """A new instance of wrapper backend `name`."""
        return self.wrapper_backends.get(name).factory(options or {})

    def kernel_loader(self, options: Mapping[str, Mapping[str, Any]] | None = None) -> KernelLoader:
        """A loader compiling kernel definitions through their own backends.

        `options` maps a kernel backend name to the options its factory gets.
        """
        per_backend = options or {}
        instances: dict[str, KernelBackend] = {}

        def load_kernels(defs: Sequence[KernelDefinition]) -> dict[str, KernelFn]:
            loaded: dict[str, KernelFn] = {}
            for backend_name in sorted({d.backend for d in defs}):
                if backend_name not in instances:
                    opts = per_backend.get(backend_name, {})
                    instances[backend_name] = self.kernel_backend(backend_name, opts)
                sources = [
                    KernelSource(d.name, d.backend, d.source)
                    for d in defs
                    if d.backend == backend_name
                ]
                loaded.update(instances[backend_name].load(sources))
            return loaded

        return load_kernels


@dataclass(frozen=True, slots=True)
class _Entry:
    """One entry point of group `polyduct` and the distribution shipping it."""

    name: str
    value: str
    origin: Origin
    point: metadata.EntryPoint

    @property
    def plugin_name(self) -> str:
        """The pluggy name: unique per distribution, so entry-point names never collide."""
        return f"{self.origin.distribution}:{self.name}"


def entries() -> list[_Entry]:
    """Every entry point of group `polyduct`, by distribution then name (nothing is imported)."""
    seen: set[str] = set()
    found: list[_Entry] = []
    for dist in metadata.distributions():
        dist_name = dist.metadata["Name"] or "<unnamed>"
        if dist_name in seen:  # the same distribution visible twice on sys.path: first wins
            continue
        seen.add(dist_name)
        origin = Origin(dist_name, dist.version)
        for point in dist.entry_points:
            if point.group == GROUP:
                found.append(_Entry(point.name, point.value, origin, point))
    return sorted(found, key=lambda e: (e.origin.distribution, e.name))


@dataclass
class _Loader:
    """Loads entry points one by one into a `Plugins`, recording or raising failures."""

    options: PluginOptions
    pm: pluggy.PluginManager = field(init=False)
    result: Plugins = field(default_factory=Plugins)

    def __post_init__(self) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)

    def fail(self, entry: _Entry, stage: str, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message = f"{type(exc).__name__}: {exc}"
        if self.options.strict:
            raise PluginLoadError(str(entry.origin), entry.name, stage, message) from exc
        self.result.errors.append(
            LoadError(
                entry.origin.distribution, entry.origin.version, entry.name, stage, message, text
            )
        )

    def register(self, entry: _Entry) -> bool:
        """Import and register one entry point's module; False (recorded) on failure."""
        try:
            module = _import_within(entry, self.options.import_timeout)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit at import included
            self.fail(entry, "import", exc)
            return False
        try:
            self.pm.register(module, name=entry.plugin_name)
            self.pm.check_pending()  # earlier plugins passed, so a failure here is this one's
        except Exception as exc:  # noqa: BLE001 - pluggy validation errors included
            if self.pm.has_plugin(entry.plugin_name):
                self.pm.unregister(name=entry.plugin_name)
            self.fail(entry, "register", exc)
            return False
        return True

    def call(self, entry: _Entry, hook_name: str) -> list[Any]:
        """Call `entry`'s implementation of one hook; its items, or [] (recorded) on failure."""
        hook = getattr(self.pm.hook, hook_name)
        items: list[Any] = []
        for impl in hook.get_hookimpls():
            if impl.plugin_name != entry.plugin_name:
                continue
            try:
                got = impl.function()
                if not isinstance(got, (list, tuple)):
                    raise TypeError(f"{hook_name} returned {type(got).__name__}, not a list")
                items.extend(got)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - a raising hook skips only this plugin
                self.fail(entry, hook_name, exc)
        return items

    def add(
        self,
        entry: _Entry,
        registry: Registry[T],
        spec_type: type[T],
        items: list[Any],
        name_of: Callable[[T], str],
        check: Callable[[T], None] | None = None,
    ) -> None:
        chosen = dict(self.options.choose)
        for item in items:
            stage = f"{registry.kind} {getattr(item, 'name', item)!r}"
            try:
                if not isinstance(item, spec_type):
                    raise TypeError(f"expected {spec_type.__name__}, got {type(item).__name__}")
                if check is not None:
                    check(item)
                name = name_of(item)
                if chosen.get(name, entry.origin.distribution) != entry.origin.distribution:
                    continue  # the user took this name from another distribution
                registry.add(name, item, entry.origin)
            except DuplicateName as exc:
                if self.options.strict:
                    self.fail(entry, stage, exc)
                self._contest(registry, exc.name, entry, stage)
                continue
            except Exception as exc:  # noqa: BLE001 - a refused item skips only that item
                self.fail(entry, stage, exc)
                continue
            self.result.distributions[entry.origin.distribution] = entry.origin.version

    def _contest(self, registry: Registry[Any], name: str, entry: _Entry, stage: str) -> None:
        """Withdraw `name` from every claimant: one error per claimant distribution."""
        refusal = registry.refuse(name, entry.origin)
        self.result.errors = [
            e for e in self.result.errors if not (e.stage == stage and e.entry_point == "-")
        ]
        message = f"{type(refusal).__name__}: {refusal}"
        for origin in registry.claimants(name):
            self.result.errors.append(
                LoadError(origin.distribution, origin.version, "-", stage, message, "")
            )

    def load(self, entry: _Entry) -> None:
        if not self.register(entry):
            return
        plugins = self.result
        add = self.add
        add(
            entry,
            plugins.kernel_backends,
            KernelBackendSpec,
            self.call(entry, "polyduct_kernel_backends"),
            _spec_name,
            _check_kernel_backend,
        )
        add(
            entry,
            plugins.wrapper_backends,
            WrapperBackendSpec,
            self.call(entry, "polyduct_wrapper_backends"),
            _spec_name,
            _check_wrapper_backend,
        )
        add(
            entry,
            plugins.lowerings,
            LoweringSpec,
            self.call(entry, "polyduct_lowerings"),
            _lowering_name,
        )
        add(
            entry,
            plugins.override_sets,
            OverrideSetSpec,
            self.call(entry, "polyduct_override_sets"),
            _spec_name,
        )


def _spec_name(spec: KernelBackendSpec | WrapperBackendSpec | OverrideSetSpec) -> str:
    return spec.name


def _lowering_name(spec: LoweringSpec) -> str:
    return spec.op


def _check_kernel_backend(spec: KernelBackendSpec) -> None:
    if not (isinstance(spec.backend_cls, type) and issubclass(spec.backend_cls, KernelBackend)):
        raise TypeError(f"backend_cls {spec.backend_cls!r} is not a KernelBackend subclass")
    if getattr(spec.backend_cls, "name", spec.name) != spec.name:
        raise CodegenError(
            f"spec name {spec.name!r} differs from {spec.backend_cls.__name__}.name "
            f"{spec.backend_cls.name!r}; kernel definitions are looked up by the class's name"
        )
    check_complete(spec.backend_cls)


def _check_wrapper_backend(spec: WrapperBackendSpec) -> None:
    if not (isinstance(spec.backend_cls, type) and issubclass(spec.backend_cls, WrapperBackend)):
        raise TypeError(f"backend_cls {spec.backend_cls!r} is not a WrapperBackend subclass")


def _import_within(entry: _Entry, seconds: float) -> Any:
    """`entry.point.load()` on a daemon thread, given `seconds` to finish: a plugin that hangs
    at import is reported (`TimeoutError`) instead of hanging its caller, and any exception it
    raises, `SystemExit` included, is re-raised here."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["module"] = entry.point.load()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True, name=f"polyduct-import-{entry.name}")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(
            f"importing {entry.value} did not finish within {seconds:g} s "
            f"(set {TIMEOUT_ENV} to allow longer); it is skipped"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["module"]


def load_fresh(options: PluginOptions | None = None) -> Plugins:
    """Discover and load every plugin now, ignoring the per-process cache (tests, tools)."""
    loader = _Loader(options if options is not None else PluginOptions.from_env())
    for entry in entries():
        if loader.options.only is None or entry.origin.distribution in loader.options.only:
            loader.load(entry)
    return loader.result


_LOADED = state.Slot("polyduct.plugins", dict[PluginOptions, Plugins])


def load(options: PluginOptions | None = None) -> Plugins:
    """The installed plugins, loaded once per process state for each distinct `options`."""
    opts = options if options is not None else PluginOptions.from_env()
    loaded = _LOADED.get()
    if opts not in loaded:
        loaded[opts] = load_fresh(opts)
    return loaded[opts]


def default_kernel_loader() -> KernelLoader:
    """Kernel loader over the installed plugins for a standalone wrapper module, an entry of its
    own: default options, plus what each backend's declared environment variables set."""
    plugins, env = load(), snapshot()
    return plugins.kernel_loader(
        {n: plugins.environment_options(n, env) for n in plugins.kernel_backends}
    )
