"""The `polyduct` command: `backends`, `ops`, and subcommands other modules own.

`conformance` lives in `polyduct.conformance.cli`, `cache` in `polyduct.cache_admin`, `bench` in
`polyduct.bench.cli` and `fuzz` in `polyduct.fuzz.cli`; each such module provides
`add_parser(subparsers)` and `run(args) -> int`. They are imported lazily and a subcommand whose
module is not installed is left out.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import TextIO

import torch

from polyduct.errors import PluginLoadError
from polyduct.ops import OP_NAMES, OpHandler
from polyduct.plugins import PluginOptions, Plugins, load_fresh

EXTERNAL_COMMANDS: tuple[tuple[str, str], ...] = (
    ("conformance", "polyduct.conformance.cli"),
    ("cache", "polyduct.cache_admin"),
    ("bench", "polyduct.bench.cli"),
    ("fuzz", "polyduct.fuzz.cli"),
)
PIPE_ESCAPE = "\\|"  # a literal | inside a Markdown table cell
Runner = Callable[[argparse.Namespace], int]


def _dtype_summary(dtypes: frozenset[torch.dtype]) -> str:
    return ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes)) or "-"


def _print_backends(plugins: Plugins, verbose: bool, out: TextIO) -> None:
    print("kernel backends:", file=out)
    for name, spec in plugins.kernel_backends.items():
        caps = spec.backend_cls.caps
        print(f"  {name:<12} {plugins.kernel_backends.origin(name)}", file=out)
        print(f"      devices: {', '.join(sorted(caps.devices))}", file=out)
        if spec.defaults:
            ranked = ", ".join(f"{d} ({p})" for d, p in sorted(spec.defaults.items()))
            print(f"      default for (priority): {ranked}", file=out)
        print(f"      dtypes:  {_dtype_summary(caps.dtypes)}", file=out)
        if caps.unsupported:
            print(f"      unsupported ops: {', '.join(sorted(caps.unsupported))}", file=out)
        if verbose and spec.description:
            print(f"      {spec.description}", file=out)
    print("wrapper backends:", file=out)
    for name, wspec in plugins.wrapper_backends.items():
        print(f"  {name:<12} {plugins.wrapper_backends.origin(name)}", file=out)
        if verbose and wspec.description:
            print(f"      {wspec.description}", file=out)
    print("override sets:", file=out)
    for name, ospec in plugins.override_sets.items():
        ops = ", ".join(sorted(ospec.overrides)) or "-"
        print(f"  {name:<12} {plugins.override_sets.origin(name)}: {ops}", file=out)
        if verbose and ospec.description:
            print(f"      {ospec.description}", file=out)
    if plugins.errors:
        hint = "" if verbose else " (-v for tracebacks)"
        print(f"load errors{hint}:", file=out)
        for error in plugins.errors:
            print(f"  {error}", file=out)
            if verbose:
                print("    " + error.traceback.rstrip().replace("\n", "\n    "), file=out)


def backends_json(plugins: Plugins) -> dict[str, object]:
    """What `polyduct backends --json` prints: every registered item, its origin, load errors."""

    def origin(registry: object, name: str) -> dict[str, str]:
        where = registry.origin(name)  # type: ignore[attr-defined]
        return {"distribution": where.distribution, "version": where.version}

    kernels = []
    for name, spec in plugins.kernel_backends.items():
        caps = spec.backend_cls.caps
        kernels.append(
            {
                "name": name,
                **origin(plugins.kernel_backends, name),
                "devices": sorted(caps.devices),
                "defaults": dict(sorted(spec.defaults.items())),
                "dtypes": sorted(str(d).removeprefix("torch.") for d in caps.dtypes),
                "unsupported": dict(sorted(caps.unsupported.items())),
                "description": spec.description,
            }
        )
    wrappers = [
        {"name": name, **origin(plugins.wrapper_backends, name), "description": w.description}
        for name, w in plugins.wrapper_backends.items()
    ]
    overrides = [
        {"name": name, **origin(plugins.override_sets, name), "ops": sorted(o.overrides)}
        for name, o in plugins.override_sets.items()
    ]
    errors = [
        {
            "distribution": e.distribution,
            "version": e.version,
            "entry_point": e.entry_point,
            "stage": e.stage,
            "message": e.message,
            "traceback": e.traceback,
        }
        for e in plugins.errors
    ]
    return {
        "kernel_backends": kernels,
        "wrapper_backends": wrappers,
        "override_sets": overrides,
        "load_errors": errors,
    }


def _run_backends(args: argparse.Namespace) -> int:
    options = PluginOptions.from_env()  # the entry point: the environment is read here, once
    if args.strict:
        options = replace(options, strict=True)
    try:
        plugins = load_fresh(options)
    except PluginLoadError as exc:  # strict mode: report the first failure, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(backends_json(plugins), indent=1))
    else:
        _print_backends(plugins, args.verbose, sys.stdout)
    return 1 if plugins.errors else 0


def op_reference() -> list[tuple[str, str, str]]:
    """(name, signature, docstring) of every op, sorted by name."""
    rows = []
    for name in sorted(OP_NAMES):
        fn = vars(OpHandler)[name]
        params = list(inspect.signature(fn).parameters)[1:]
        doc = " ".join((inspect.getdoc(fn) or "").split())
        rows.append((name, f"{name}({', '.join(params)})", doc))
    return rows


def ops_markdown() -> str:
    """The op reference page (docs/ops.md) as Markdown."""
    rows = op_reference()
    lines = [
        "# Op reference",
        "",
        "Generated by `polyduct ops --markdown` from the docstrings of `polyduct.ops.OpHandler`;",
        "do not edit by hand. Every kernel backend implements each op (or declares it",
        f"unsupported in its capabilities). {len(rows)} ops.",
        "",
        "| op | signature | semantics |",
        "|---|---|---|",
    ]
    for name, signature, doc in rows:
        cell = doc.replace("|", PIPE_ESCAPE)
        lines.append(f"| `{name}` | `{signature}` | {cell} |")
    return "\n".join(lines) + "\n"


def _run_ops(args: argparse.Namespace) -> int:
    if args.json:
        rows = [{"name": n, "signature": s, "semantics": d} for n, s, d in op_reference()]
        text = json.dumps(rows, indent=1) + "\n"
    else:
        text = ops_markdown() if args.markdown else _ops_text()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _ops_text() -> str:
    rows = op_reference()
    width = min(40, max(len(signature) for _, signature, _ in rows))
    lines = [f"{signature:<{width}}  {doc}" for _, signature, doc in rows]
    return "\n".join([*lines, f"{len(rows)} ops"]) + "\n"


def _external(module_name: str) -> ModuleType | None:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return None  # that subcommand is not installed
        raise


def version_text() -> str:
    """`polyduct 0.1.0 (torch 2.13.0, Python 3.11.9)`."""
    from polyduct import __version__

    python = ".".join(str(v) for v in sys.version_info[:3])
    return f"polyduct {__version__} (torch {torch.__version__}, Python {python})"


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Runner]]:
    """The argument parser and subcommand name -> runner."""
    parser = argparse.ArgumentParser(prog="polyduct", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    runners: dict[str, Runner] = {"backends": _run_backends, "ops": _run_ops}
    backends = sub.add_parser("backends", help="installed kernel and wrapper backends")
    backends.add_argument("-v", "--verbose", action="store_true", help="tracebacks, details")
    backends.add_argument("--strict", action="store_true", help="fail on the first load error")
    backends.add_argument("--json", action="store_true", help="machine-readable output")
    ops = sub.add_parser("ops", help="the op set with the semantics of each op")
    ops.add_argument("--markdown", action="store_true", help="Markdown (docs/ops.md)")
    ops.add_argument("--json", action="store_true", help="JSON: name, signature, semantics")
    ops.add_argument("-o", "--output", help="write to this file instead of stdout")
    for command, module_name in EXTERNAL_COMMANDS:
        module = _external(module_name)
        if module is not None:
            module.add_parser(sub)
            runners[command] = module.run
    return parser, runners


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `polyduct` console script."""
    parser, runners = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return runners[args.command](args)
