"""The core's wrapper backend: Wrapper IR -> a readable Python module, loaded through the cache.

The module embeds every kernel's source as data (`KERNEL_DEFINITIONS`), defines
`make_call(load_kernels)` (kernels are compiled by their own backends through the loader it is
given) and a standalone `call(*inputs) -> list` that loads kernels through the installed plugins,
so a dumped module runs on its own: `python -c "import wrapper; print(wrapper.call(x))"`.

Every name from the program goes through `identifier` (and is made unique), every string through
`string_literal`; size expressions are printed by `PythonIndexPrinter` over sanitised symbols.
The small runtime helpers the module imports (`assert_input`, `check_arity`, `resolve_op`) live
here too.
"""

from __future__ import annotations

import builtins
import keyword
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, final

import sympy
import torch
from typing_extensions import assert_never

from polyduct import __version__
from polyduct.cache import Cache, default_cache, import_module_file
from polyduct.codegen import IndentedBuffer, identifier, string_literal
from polyduct.errors import InputMismatch, InvalidOption, WrapperError
from polyduct.indexing import PythonIndexPrinter
from polyduct.wrapper import KernelLoader, WrapperBackend
from polyduct.wrapper_ir import (
    Allocate,
    Comment,
    Constant,
    ExternCall,
    Free,
    GraphInputs,
    GraphOutputs,
    InputAssert,
    KernelCall,
    KernelDefinition,
    Line,
    MultiOutput,
    Ref,
    ReinterpretView,
    Reuse,
    SizeDef,
    WrapperProgram,
)

DUMP_ENV = "POLYDUCT_DUMP"
NAME = "python"
_RESERVED = frozenset(
    {
        "torch",
        "assert_input",
        "check_arity",
        "resolve_op",
        "KernelDefinition",
        "make_call",
        "call",
        "inputs",
        "kernels",
        "load_kernels",
        "KERNEL_DEFINITIONS",
    }
) | frozenset(dir(builtins))


class OutputMismatch(InputMismatch):
    """An intermediate a kernel or extern op wrote differs from what the IR expects.

    Raised by the debug asserts (`POLYDUCT_DEBUG_ASSERTS=1`); names the producer and the buffer.
    """

    def __init__(
        self, producer: str, name: str, attr: str, expected: object, actual: object
    ) -> None:
        super().__init__(name, attr, expected, actual)
        self.producer = producer
        self.args = (
            f"{producer} wrote buffer {name!r} with {attr} {actual}; the IR expects {expected}",
        )


def assert_input(
    name: str,
    value: object,
    size: Sequence[int],
    stride: Sequence[int],
    dtype: torch.dtype,
    producer: str = "",
) -> None:
    """Raise unless `value` is a tensor of this size, stride and dtype.

    `InputMismatch` for a graph input; with `producer` (an intermediate that kernel or extern op
    wrote) `OutputMismatch`, which also rejects a bool tensor holding bytes other than 0 and 1.
    Strides of dimensions of size 1 are not compared: any stride addresses the same element.
    """

    def fail(attr: str, expected: object, actual: object) -> InputMismatch:
        if producer:
            return OutputMismatch(producer, name, attr, expected, actual)
        return InputMismatch(name, attr, expected, actual)

    if not isinstance(value, torch.Tensor):
        raise fail("type", "torch.Tensor", type(value).__name__)
    if tuple(value.shape) != tuple(size):
        raise fail("size", tuple(size), tuple(value.shape))
    if value.dtype != dtype:
        raise fail("dtype", dtype, value.dtype)
    got = value.stride()
    if any(n != 1 and a != b for n, a, b in zip(size, got, stride, strict=True)):
        raise fail("stride", tuple(stride), tuple(got))
    if producer and dtype == torch.bool and value.numel():
        top = int(value.view(torch.uint8).max())
        if top > 1:
            raise fail("bool byte value", "0 or 1", top)


def check_arity(inputs: Sequence[object], expected: int) -> None:
    """Raise `InputMismatch` unless exactly `expected` inputs were passed."""
    if len(inputs) != expected:
        raise InputMismatch("<inputs>", "count", expected, len(inputs))


def resolve_op(qualified: str) -> Any:
    """`torch.ops.<namespace>.<op>.<overload>` for a name such as "aten.mm.default"."""
    target: Any = torch.ops
    for part in qualified.split("."):
        target = getattr(target, part)
    return target


@dataclass(frozen=True, slots=True)
class PythonWrapperOptions:
    """Options of the Python wrapper; `from_mapping` reads POLYDUCT_DUMP when `dump` is unset."""

    dump: bool = False
    cache: Cache | None = None

    @classmethod
    def from_mapping(
        cls, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> PythonWrapperOptions:
        env = os.environ if environ is None else environ
        unknown = set(options) - {"dump", "cache"}
        if unknown:
            first = min(unknown)
            raise InvalidOption(NAME, first, options[first], "one of: dump, cache")
        dump = options.get("dump", env.get(DUMP_ENV, "") not in ("", "0"))
        cache = options.get("cache")
        if cache is not None and not isinstance(cache, Cache):
            raise InvalidOption(NAME, "cache", cache, "a polyduct.cache.Cache")
        return cls(dump=bool(dump), cache=cache)


class _Names:
    """Program names -> unique, valid, non-reserved Python identifiers, in first-use order."""

    def __init__(self) -> None:
        self._map: dict[str, str] = {}
        self._used: set[str] = set(_RESERVED)

    def __call__(self, name: str, prefix: str = "v") -> str:
        if name in self._map:
            return self._map[name]
        base = identifier(name, prefix)
        if keyword.iskeyword(base) or keyword.issoftkeyword(base) or base.startswith("__"):
            base = f"{prefix}_{base}"
        candidate, n = base, 0
        while candidate in self._used:
            n += 1
            candidate = f"{base}_{n}"
        self._used.add(candidate)
        self._map[name] = candidate
        return candidate


class _SizePrinter(PythonIndexPrinter):
    """Size expressions as Python: also `min` / `max` (sympy's Min / Max of sizes)."""

    def _print_Min(self, expr: sympy.Min) -> str:
        return f"min({', '.join(self._print(a) for a in expr.args)})"

    def _print_Max(self, expr: sympy.Max) -> str:
        return f"max({', '.join(self._print(a) for a in expr.args)})"


@dataclass
class _Renderer:
    """Renders one program; `names` keeps identifiers consistent across the module."""

    names: _Names = field(default_factory=_Names)
    printer: PythonIndexPrinter = field(default_factory=_SizePrinter)
    externs: dict[str, str] = field(default_factory=dict)  # qualified op -> variable

    def expr(self, value: object) -> str:
        expr = sympy.sympify(value)
        subs = {s: sympy.Symbol(self.names(s.name, "s")) for s in expr.free_symbols}
        return str(self.printer.doprint(expr.xreplace(subs)))

    def shape(self, shape: Iterable[object]) -> str:
        parts = [self.expr(v) for v in shape]
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"

    def dtype(self, dtype: object) -> str:
        text = str(dtype).removeprefix("torch.")
        if not isinstance(dtype, torch.dtype) or getattr(torch, text, None) != dtype:
            raise WrapperError(NAME, dtype, "not a torch dtype")
        return f"torch.{text}"

    def constant(self, value: Constant | sympy.Basic) -> str:
        match value:
            case None | bool():
                return repr(value)
            case int():
                return str(int(value))
            case float():
                if math.isnan(value) or math.isinf(value):
                    return f"float({string_literal(repr(value))})"
                return repr(value)
            case str():
                return string_literal(value)
            case torch.dtype():
                return self.dtype(value)
            case torch.device():
                return f"torch.device({string_literal(str(value))})"
            case sympy.Basic():
                return self.expr(value)
            case tuple():
                items = [self.constant(v) for v in value]
                return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
            case Ref(name=name):
                return self.names(name, "buf")
        raise WrapperError(NAME, value, "not a Wrapper IR constant")

    def extern(self, op: str) -> str:
        if op not in self.externs:
            self.externs[op] = self.names(f"op_{op}", "op")
        return self.externs[op]

    def line(self, line: Line) -> list[str]:
        """The body statements for one line (kernel definitions go to module level)."""
        match line:
            case GraphInputs(names=names):
                targets = ", ".join(self.names(n, "arg") for n in names)
                return [f"check_arity(inputs, {len(names)})", f"[{targets}] = inputs"]
            case InputAssert(name=name, size=size, stride=stride, dtype=dtype, producer=producer):
                args = f"{self.shape(size)}, {self.shape(stride)}, {self.dtype(dtype)}"
                if producer:
                    args += f", {string_literal(producer)}"
                return [f"assert_input({string_literal(name)}, {self.names(name)}, {args})"]
            case SizeDef():
                return [self.size_def(line)]
            case Allocate(name=name, size=size, stride=stride, dtype=dtype, device=device):
                shape = f"{self.shape(size)}, {self.shape(stride)}"
                where = f"dtype={self.dtype(dtype)}, device={string_literal(device)}"
                return [f"{self.names(name)} = torch.empty_strided({shape}, {where})"]
            case Free(name=name):
                return [f"del {self.names(name)}"]
            case Reuse(name=name, old=old, size=size, stride=stride):
                view = f"{self.names(old)}.as_strided({self.shape(size)}, {self.shape(stride)})"
                return [f"{self.names(name)} = {view}  # reuse", f"del {self.names(old)}"]
            case ReinterpretView():
                return [self.reinterpret(line)]
            case KernelDefinition(name=name):
                return [f"# kernel {self.names(name, 'kernel')} is defined above"]
            case KernelCall(kernel=kernel, args=args, sizes=sizes):
                values = [self.names(a) for a in args] + [self.expr(s) for s in sizes]
                return [f"{self.names(kernel, 'kernel')}({', '.join(values)})"]
            case ExternCall():
                return [self.extern_call(line)]
            case MultiOutput(name=name, source=source, index=index):
                return [f"{self.names(name)} = {self.names(source)}[{int(index)}]"]
            case Comment(text=text):
                return [f"# {string_literal(text)[1:-1]}"]
            case GraphOutputs(names=names):
                return [f"return [{', '.join(self.names(n) for n in names)}]"]
            case _:
                assert_never(line)

    def size_def(self, line: SizeDef) -> str:
        source = self.names(line.source)
        target = self.names(line.symbol, "s")
        if line.attr == "size":
            return f"{target} = {source}.size({int(line.dim)})"
        if line.attr == "stride":
            return f"{target} = {source}.stride({int(line.dim)})"
        if line.attr == "value":
            return f"{target} = int({source})"
        raise WrapperError(NAME, line, f"unknown size attribute {line.attr!r}")

    def reinterpret(self, line: ReinterpretView) -> str:
        base = self.names(line.base)
        args = f"{self.shape(line.size)}, {self.shape(line.stride)}"
        if sympy.sympify(line.offset) != 0:
            args += f", {base}.storage_offset() + {self.expr(line.offset)}"
        return f"{self.names(line.name)} = {base}.as_strided({args})"

    def extern_call(self, line: ExternCall) -> str:
        parts = [self.constant(a) for a in line.args]
        for key, value in line.kwargs:
            if not key.isidentifier() or keyword.iskeyword(key):
                raise WrapperError(NAME, line, f"keyword argument {key!r} is not an identifier")
            parts.append(f"{key}={self.constant(value)}")
        if line.out is not None:
            parts.append(f"out={self.names(line.out)}")
        call = f"{self.extern(line.op)}({', '.join(parts)})"
        if line.out is not None and (not line.result or line.result == line.out):
            return call
        return f"{self.names(line.result)} = {call}"


def _render_module(program: WrapperProgram) -> str:
    renderer = _Renderer()
    kernels = program.kernels()
    kernel_vars = [renderer.names(k.name, "kernel") for k in kernels]
    body = IndentedBuffer()
    with body.indent(2):
        for line in program.lines:
            body.lines(renderer.line(line))
        if not any(isinstance(line, GraphOutputs) for line in program.lines):
            body.line("return []")
    out = IndentedBuffer()
    out.lines(_HEADER)
    out.line("KERNEL_DEFINITIONS = (")
    with out.indent():
        for k in kernels:
            out.line(
                f"KernelDefinition(name={string_literal(k.name)}, "
                f"backend={string_literal(k.backend)}, source={string_literal(k.source)}),"
            )
    out.line(")")
    for op, var in renderer.externs.items():
        out.line(f"{var} = resolve_op({string_literal(op)})")
    out.lines(
        ["", "", "def make_call(load_kernels):", "    kernels = load_kernels(KERNEL_DEFINITIONS)"]
    )
    with out.indent():
        for k, var in zip(kernels, kernel_vars, strict=True):
            out.line(f"{var} = kernels[{string_literal(k.name)}]")
        out.lines(["", "def call(*inputs):"])
    return out.getvalue() + body.getvalue() + _FOOTER


_HEADER = [
    '"""A polyduct program rendered by the Python wrapper (generated; runs standalone)."""',
    "",
    "import torch",
    "",
    "from polyduct.python_wrapper import assert_input, check_arity, resolve_op",
    "from polyduct.wrapper_ir import KernelDefinition",
    "",
]
_FOOTER = '''
    return call


def call(*inputs):
    """Run standalone: kernels load through the installed polyduct kernel backends."""
    from polyduct.plugins import default_kernel_loader

    return make_call(default_kernel_loader())(*inputs)
'''


@final
@dataclass(frozen=True)
class CompiledModule:
    """A built program: call it with the graph inputs; `source` and `path` for inspection."""

    fn: Callable[..., list[Any]]
    source: str
    path: Path
    module: ModuleType

    def __call__(self, *inputs: Any) -> list[Any]:
        return self.fn(*inputs)


@final
class PythonWrapper(WrapperBackend):
    """Renders Wrapper IR as a Python module and imports it from the cache."""

    name = NAME

    def __init__(self, options: PythonWrapperOptions | None = None) -> None:
        self.options = options or PythonWrapperOptions()

    def render(self, program: WrapperProgram) -> str:
        return _render_module(program)

    def build(self, program: WrapperProgram, load_kernels: KernelLoader) -> CompiledModule:
        source = self.render(program)
        cache = self.options.cache or default_cache()

        def write(tmp: Path) -> None:
            (tmp / "wrapper.py").write_text(source)

        entry = cache.entry("python_wrapper", {"source": source, "polyduct": __version__}, write)
        path = entry / "wrapper.py"
        if self.options.dump:
            print(f"polyduct: python wrapper module at {path}\n{source}", file=sys.stderr)
        module = import_module_file(path, f"polyduct_wrapper_{entry.name[:24]}")
        return CompiledModule(module.make_call(load_kernels), source, path, module)
