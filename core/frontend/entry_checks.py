"""Checks at the `torch.compile` entry point: `mode`, unexpected arguments, plugin load failures.

Each mistake is loud: an argument polyduct does not know raises, a `mode` polyduct implements
only in part is warned about (once per process and mode, by Python's warning registry) with what
polyduct does instead, and a plugin that failed to load is warned about with its error, so a
backend that silently went missing does not look like a slow or wrong compile.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from polyduct.errors import InvalidOption
from polyduct.plugins import LoadError

MODES: Mapping[str, str] = {
    "default": "",
    "max-autotune": (
        "polyduct always tunes the launch configuration of its Triton kernels "
        "(kernel_options={'autotune': False} turns that off) and does not tune matmul templates; "
        "compiling as mode='reduce-overhead' (CUDA graphs)"
    ),
    "max-autotune-no-cudagraphs": (
        "polyduct always tunes the launch configuration of its Triton kernels "
        "(kernel_options={'autotune': False} turns that off) and does not tune matmul templates; "
        "compiling as mode='default'"
    ),
    "reduce-overhead": "",  # CUDA graphs (polyduct.cudagraphs)
}
# The options a mode sets (the rest compile as mode="default").
MODE_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"cudagraphs": True},
}


def check_arguments(kwargs: Mapping[str, Any]) -> None:
    """Raise for arguments polyduct does not know; warn about a `mode` it does not implement."""
    for key, value in kwargs.items():
        if key != "mode":
            raise InvalidOption("polyduct", key, value, "options=... or mode=... (torch.compile)")
    mode = kwargs.get("mode")
    if mode is None:
        return
    if mode not in MODES:
        raise InvalidOption("polyduct", "mode", mode, "one of " + ", ".join(MODES))
    if MODES[mode]:
        warnings.warn(f"polyduct: torch.compile(mode={mode!r}): {MODES[mode]}", stacklevel=3)


def mode_options(mode: str | None) -> Mapping[str, Any]:
    """The frontend options `mode` (checked by `check_arguments`) sets."""
    return MODE_OPTIONS.get(mode or "default", {})


def warn_load_errors(errors: Sequence[LoadError]) -> None:
    """One warning per plugin that failed to load: its distribution, entry point and error."""
    for error in errors:
        warnings.warn(
            f"polyduct: plugin {error.distribution} {error.version} ({error.entry_point}) failed "
            f"to load at {error.stage}: {error.message}; its backends are unavailable "
            "(`polyduct backends -v` shows the traceback)",
            stacklevel=3,
        )
