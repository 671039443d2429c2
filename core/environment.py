"""Every `POLYDUCT_*` environment variable polyduct reads, and the one function that reads them.

An entry (`torch.compile`, `torch.export`, the CLI) takes one `snapshot` and passes what it holds
down as options: frontend options, plugin loading options, and each backend's options (a backend
names the variables it takes in its registration, `KernelBackendSpec.environment`). The cache's
location and the remote store, which every process uses outside a compile too, are read here
when first used. docs/environment.md is the table for users; a test keeps it in step with
`VARIABLES` and with the variables the plugins declare.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

PREFIX: Final = "POLYDUCT_"

# name -> what it sets (the core's; plugins declare theirs in their registrations)
VARIABLES: Final[Mapping[str, str]] = {
    "POLYDUCT_KERNELS": "the `kernels` option (default `auto`)",
    "POLYDUCT_WRAPPER": "the `wrapper` option (default `python`)",
    "POLYDUCT_DEBUG_ASSERTS": "the `debug_asserts` option (`1`: on)",
    "POLYDUCT_DUMP_AFTER": "the `dump_after` option: comma-separated pass names",
    "POLYDUCT_REMOTE_CACHE": "the `remote_cache` option: `redis://host:port/db`",
    "POLYDUCT_DUMP": "the Python wrapper's `dump` option (`1`: print each module)",
    "POLYDUCT_STRICT_PLUGINS": "a plugin that fails to load is an error (`1`)",
    "POLYDUCT_PLUGINS": "load only these distributions (comma-separated)",
    "POLYDUCT_PLUGIN_TIMEOUT": "seconds one plugin's import may take (default 60)",
    "POLYDUCT_CHOOSE": "`NAME=DISTRIBUTION` picks for names several distributions register",
    "POLYDUCT_PLUGIN_INDEX": "`0`: import every plugin on every load (no plugin index)",
    "POLYDUCT_CACHE_DIR": "the cache directory (default `$XDG_CACHE_HOME/polyduct`)",
    "POLYDUCT_CACHE_MAX_SIZE": "the cache's size cap: bytes or `K`/`M`/`G` (default `4G`)",
}


def snapshot(environ: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """The `POLYDUCT_*` variables that are set to a non-empty value (from `environ`, or from the
    process environment)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith(PREFIX) and v.strip()}


def flag(env: Mapping[str, str], name: str) -> bool:
    """Whether variable `name` is set to something other than `0`, `false` or `no`."""
    return env.get(name, "").strip().lower() not in ("", "0", "false", "no")


def declared_options(
    declared: Mapping[str, str], env: Mapping[str, str], given: Mapping[str, object]
) -> dict[str, object]:
    """`given`, plus each option of `declared` (option -> variable) whose variable is set in
    `env` and which `given` leaves unset, as the variable's text."""
    found: dict[str, object] = {k: env[v] for k, v in declared.items() if v in env}
    return {**found, **given}


def process_value(name: str) -> str | None:
    """Variable `name` of the process environment, for process-wide settings (the cache's
    location, the remote store) read when first used; None when unset or empty."""
    return os.environ.get(name, "").strip() or None
