"""A program as a standalone pytest module, and loading such a module back.

The runner executes every program from the module it writes, so a reproducer is byte for byte
what failed: `pytest <file>` re-runs the comparison that failed.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import fields
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from polyduct.fuzz.program import Program, render_function

HEADER = '''"""polyduct fuzz: seed {seed}, graph {index}, kernels={backend!r}{status}

Re-run with `pytest {name}`. The statements of `fn` are the program; PROGRAM holds its inputs
(shapes, dtypes, values, layouts), outputs, compile mode and the values compared exactly.
"""

import torch

from polyduct.fuzz.check import check_program
from polyduct.fuzz.program import InputSpec, Program, Stmt

BACKEND = {backend!r}
OPTIONS = {options}
DEVICE = {device!r}
PROGRAM = {program}


'''
FOOTER = '''

def test_{backend}_seed{seed}_graph{index}():
    check_program(fn, PROGRAM, BACKEND, OPTIONS, DEVICE)
'''


def _status(detail: str) -> str:
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    # The detail goes into the module docstring: no triple quotes or backslashes from it.
    first = first[:300].replace('"', "'").replace("\\", "/")
    return f".\n\n{first}" if first else "."


def _format_program(program: Program) -> str:
    """`repr(program)` with one input or statement per line."""
    lines = ["Program("]
    for f in fields(program):
        value = getattr(program, f.name)
        if f.name in ("inputs", "stmts"):
            items = "".join(f"        {item!r},\n" for item in value)
            lines.append(f"    {f.name}=(\n{items}    ),")
        else:
            lines.append(f"    {f.name}={value!r},")
    return "\n".join([*lines, ")"])


def render_module(program: Program, backend: str, index: int, options: dict[str, Any],
                  device: str, detail: str = "", name: str = "this file") -> str:
    """The pytest module reproducing `program` on `backend`."""
    names = {"seed": program.seed, "index": index, "backend": backend, "device": device,
             "options": repr(dict(sorted(options.items()))), "name": name}
    head = HEADER.format(program=_format_program(program), status=_status(detail), **names)
    return head + render_function(program) + FOOTER.format(**names)


def render_generation(seed: int, index: int, dtypes: tuple[torch.dtype, ...], known: bool,
                      detail: str) -> str:
    """A script generating program `index` of `seed` again, each statement printed before eager
    evaluates it on stand-in inputs: for a program eager fails on before it exists."""
    names = ", ".join(repr(d) for d in dtypes)
    return "\n".join([
        f'"""polyduct fuzz: seed {seed}, graph {index}: generating it failed{_status(detail)}',
        "",
        'Run with `python this file`: the last statement printed is the one eager fails on."""',
        "",
        "import torch",
        "",
        "from polyduct.fuzz import generate",
        "",
        "EVALUATE = generate.evaluate",
        "",
        "",
        "def traced(expr, values):",
        "    print(expr, flush=True)",
        "    return EVALUATE(expr, values)",
        "",
        "",
        'if __name__ == "__main__":',
        "    generate.evaluate = traced",
        f"    generate.generate({seed}, {index}, ({names},), {known})",
        "",
    ])


def write_module(path: Path, source: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(source)
    tmp.replace(path)


def load_module(path: Path, name: str) -> ModuleType:
    """Import the module at `path` under a fresh `name`, registered in `sys.modules`: Dynamo
    may import a traced function's module by name (torch 2.11 did, tracing halide seed 9803's
    program 2026 with its NaNs made canonical). `unload_module` takes it out again."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def unload_module(module: ModuleType) -> None:
    sys.modules.pop(module.__name__, None)
