"""Which distribution registered which names, remembered across processes, so that a compile
imports only the plugins it needs.

The first load in an environment imports every plugin (`polyduct.plugins.load`) and records, per
distribution, the names it registered: kernel and wrapper backends, lowerings, override sets, and
names several distributions claimed. The record lives in the cache (namespace `plugin-index`),
keyed by the installed distributions, their versions and entry points, so installing, removing
or upgrading one starts over. Later, `load_for` imports only the distributions that registered a
backend the compile asks for, or any lowering or override set (those apply to every compile), and
every claimant of a contested name it asks for, so the refusal is the same; `AUTO` in the names
asks for every distribution with a kernel backend that declares device defaults. A plugin that failed
to import (a hang past the time limit included) registered nothing: later compiles skip it, and
report its recorded error as if they had met it.
`use_index=False` (`POLYDUCT_PLUGIN_INDEX=0`) loads everything every time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from polyduct.cache import Cache, CacheError, default_root
from polyduct.plugins import LoadError, PluginOptions, Plugins, entries, load

NAMESPACE = "plugin-index-3"
INDEX_FILE = "index.json"
ENV = "POLYDUCT_PLUGIN_INDEX"
ALWAYS = ("lowering", "override set")  # kinds every compile uses
AUTO = "auto"  # the name `kernels="auto"` needs: every backend that is a default for a device
_DEFAULTS = "device defaults"


def load_for(
    needs: Collection[str], options: PluginOptions | None = None, use_index: bool = True
) -> Plugins:
    """Plugins for a compile using the backends named in `needs`: only the distributions that
    provide them (and every lowering and override set), where the index knows them."""
    opts = options if options is not None else PluginOptions.from_env()
    if not use_index:
        return load(opts)
    fingerprint = _fingerprint(opts)
    cache = Cache(default_root())
    try:
        found = cache.lookup(NAMESPACE, {"fingerprint": fingerprint})
        index = json.loads((found / INDEX_FILE).read_text()) if found is not None else None
    except (CacheError, OSError, ValueError):
        return load(opts)
    if index is None:
        plugins = load(opts)
        _write(cache, fingerprint, plugins)
        return plugins
    wanted = frozenset(d for d, claims in index["claims"].items() if _wanted(claims, needs))
    plugins = load(replace(opts, only=wanted))
    known = {(e.distribution, e.entry_point, e.stage) for e in plugins.errors}
    for fields in index["errors"]:  # still reported (polyduct backends, torch.compile's warning)
        error = LoadError(**fields)
        if (error.distribution, error.entry_point, error.stage) not in known:
            plugins.errors.append(error)
    return plugins


def _wanted(claims: list[list[str]], needs: Collection[str]) -> bool:
    return any(kind in ALWAYS or name in needs for kind, name in claims)


def _fingerprint(opts: PluginOptions) -> str:
    rows = sorted(
        [e.origin.distribution, e.origin.version, e.name, e.value]
        for e in entries()
        if opts.only is None or e.origin.distribution in opts.only
    )
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def index_of(plugins: Plugins) -> dict[str, list[list[str]]]:
    """distribution -> [kind, name] of everything it registered or claimed."""
    claims: dict[str, list[list[str]]] = {d: [] for d in plugins.distributions}
    registries: tuple[Any, ...] = (
        plugins.kernel_backends,
        plugins.wrapper_backends,
        plugins.lowerings,
        plugins.override_sets,
    )
    for registry in registries:
        for name in registry.names():
            claims.setdefault(registry.origin(name).distribution, []).append([registry.kind, name])
        for name in registry.contested():
            for origin in registry.claimants(name):
                claims.setdefault(origin.distribution, []).append([registry.kind, name])
    for name, spec in plugins.kernel_backends.items():
        if spec.defaults:
            claims[plugins.kernel_backends.origin(name).distribution].append([_DEFAULTS, AUTO])
    return claims


def _write(cache: Cache, fingerprint: str, plugins: Plugins) -> None:
    record = {"claims": index_of(plugins), "errors": [asdict(e) for e in plugins.errors]}
    text = json.dumps(record, sort_keys=True)

    def build(directory: Path) -> None:
        (directory / INDEX_FILE).write_text(text)

    try:
        cache.entry(NAMESPACE, {"fingerprint": fingerprint}, build)
    except (CacheError, OSError):
        return  # no index: the next compile loads everything again
