"""The core's wrapper backend: Wrapper IR -> a readable Python module, loaded through the cache.

The module embeds every kernel's source as data (`KERNEL_DEFINITIONS`), defines
`make_call(load_kernels)` (kernels are compiled by their own backends through the loader it is
given) and a standalone `call(*inputs) -> list` that loads kernels through the installed plugins,
so a dumped module runs on its own: `python -c "import wrapper; print(wrapper.call(x))"`.

Every name from the program goes through `identifier` (and is made unique), every string through
`string_literal`; size expressions are printed by `PythonIndexPrinter` over sanitised symbols.
The small runtime helpers the module imports (`assert_input`, `input_guards`, `empty_strided_cpu`,
`resolve_op`, ...) live in `polyduct.wrapper.runtime` and are re-exported here.
"""

from __future__ import annotations

import builtins
import keyword
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, final

import sympy
import torch
from typing_extensions import assert_never

from polyduct.cache import Cache, default_cache, import_module_file
from polyduct.codegen import IndentedBuffer, PythonNames, string_literal
from polyduct.errors import InvalidOption, WrapperError
from polyduct.indexing import PythonIndexPrinter
from polyduct.version import __version__
from polyduct.wrapper import Built, KernelLoader, WrapperBackend
from polyduct.wrapper.ir import (
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
    OpRef,
    Ref,
    ReinterpretView,
    Reuse,
    SizeDef,
    WrapperProgram,
)
from polyduct.wrapper.runtime import (
    UNCHECKED,
    OutputMismatch,
    assert_input,
    check_arity,
    cuda_device,
    cuda_device_scope,
    empty_strided_cpu,
    empty_strided_cuda,
    input_guards,
    reinterpret_tensor,
    resolve_op,
)

__all__ = [
    "UNCHECKED",
    "CompiledModule",
    "OutputMismatch",
    "PythonWrapper",
    "PythonWrapperOptions",
    "assert_input",
    "check_arity",
    "cuda_device",
    "cuda_device_scope",
    "empty_strided_cpu",
    "empty_strided_cuda",
    "input_guards",
    "reinterpret_tensor",
    "resolve_op",
]

NAME = "python"
# What generated modules import from here, and every other name they define at module level
_RUNTIME_NAMES = (
    "UNCHECKED", "assert_input", "check_arity", "cuda_device", "cuda_device_scope",
    "empty_strided_cpu", "empty_strided_cuda", "input_guards", "reinterpret_tensor", "resolve_op",
)
_RESERVED = frozenset({
    "torch", *_RUNTIME_NAMES, "KernelDefinition", "make_call", "call", "inputs", "kernels",
    "load_kernels", "KERNEL_DEFINITIONS",
}) | frozenset(dir(builtins))


@dataclass(frozen=True, slots=True)
class PythonWrapperOptions:
    """Options of the Python wrapper: `dump` prints each built module's path and source (the entry
    passes `POLYDUCT_DUMP` as `dump` when the options leave it unset)."""

    dump: bool = False
    cache: Cache | None = None

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> PythonWrapperOptions:
        unknown = set(options) - {"dump", "cache"}
        if unknown:
            first = min(unknown)
            raise InvalidOption(NAME, first, options[first], "one of: dump, cache")
        dump = options.get("dump", False)
        if isinstance(dump, str):  # from the environment
            dump = dump.strip() not in ("", "0")
        cache = options.get("cache")
        if cache is not None and not isinstance(cache, Cache):
            raise InvalidOption(NAME, "cache", cache, "a polyduct.cache.Cache")
        return cls(dump=bool(dump), cache=cache)


class _SizePrinter(PythonIndexPrinter):
    """Size expressions as Python (sympy's Min / Max of sizes as `min` / `max`, torch's true
    division of sizes, a scale passed to a library call, as `/`, its ToFloat as `float`)."""

    def _print_IntTrueDiv(self, expr: sympy.Expr) -> str:
        a, b = (str(self._print(x)) for x in expr.args)
        return f"(({a}) / ({b}))"

    _print_FloatTrueDiv = _print_IntTrueDiv  # a float of sizes: std's 1 / (n - 1) in a backward

    def _print_ToFloat(self, expr: sympy.Expr) -> str:
        return f"float({self._print(expr.args[0])})"

    # conditions on sizes, what a `torch._check` of them asserts (`aten._assert_scalar`)
    def _print_Relational(self, expr: sympy.core.relational.Relational) -> str:
        a, b = (str(self._print(x)) for x in expr.args)
        return f"(({a}) {expr.rel_op} ({b}))"  # sympy's ==, !=, <, <=, >, >= are Python's

    def _print_And(self, expr: sympy.And | sympy.Or) -> str:
        word = " and " if isinstance(expr, sympy.And) else " or "
        return "(" + word.join(str(self._print(a)) for a in expr.args) + ")"

    _print_Or = _print_And

    def _print_Not(self, expr: sympy.Not) -> str:
        return f"(not {self._print(expr.args[0])})"


@dataclass
class _Renderer:
    """Renders one program; `names` keeps identifiers consistent across the module."""

    names: PythonNames = field(default_factory=lambda: PythonNames(_RESERVED))
    printer: PythonIndexPrinter = field(default_factory=_SizePrinter)
    externs: dict[str, str] = field(default_factory=dict)  # qualified op -> variable
    guards: list[str] = field(default_factory=list)  # input guard variables of `call`
    # The CUDA device `call` allocates on, once it has made it current ("cuda:N": see
    # `_cuda_prologue`; "cuda": whichever is current), allocated through torch's direct allocator
    # (a third of `torch.empty_strided`'s cost); None where a program allocates on several.
    cuda_device: str | None = None
    printed: dict[sympy.Basic, str] = field(default_factory=dict)  # expression -> source

    def expr(self, value: object) -> str:
        """`value` (an int or size expression) as Python over the module's size variables.

        Integers and plain symbols, nearly all sizes and strides, are written directly (what
        the printer would write); other expressions are printed once per renderer.
        """
        if type(value) is int:
            return str(value)
        if isinstance(value, sympy.Integer):
            return str(int(value))
        if isinstance(value, sympy.Symbol) and type(value) is sympy.Symbol:  # not a Dummy
            return self.names(value.name, "s")
        expr = sympy.sympify(value)
        if expr not in self.printed:
            subs = {s: sympy.Symbol(self.names(s.name, "s")) for s in expr.free_symbols}
            self.printed[expr] = str(self.printer.doprint(expr.xreplace(subs)))
        return self.printed[expr]

    def shape(self, shape: Iterable[object]) -> str:
        parts = [self.expr(v) for v in shape]
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"

    def dtype(self, dtype: object) -> str:
        if isinstance(dtype, torch.dtype) and dtype in _DTYPES:
            return _DTYPES[dtype]
        text = str(dtype).removeprefix("torch.")
        if not isinstance(dtype, torch.dtype) or getattr(torch, text, None) != dtype:
            raise WrapperError(NAME, dtype, "not a torch dtype")
        _DTYPES[dtype] = f"torch.{text}"
        return _DTYPES[dtype]

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
            case dict() if all(isinstance(k, str) for k in value):
                pairs = (f"{string_literal(k)}: {self.constant(v)}" for k, v in value.items())
                return f"{{{', '.join(pairs)}}}"
            case Ref(name=name):
                return self.names(name, "buf")
            case OpRef(name=name):
                return self.extern(name)
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
                count = len(names)
                return [
                    f"if len(inputs) != {count}:",
                    f"    check_arity(inputs, {count})",
                    f"[{targets}] = inputs",
                ]
            case InputAssert(name=name, size=size, stride=stride, dtype=dtype, producer=producer):
                args = f"{self.shape(size)}, {self.shape(stride)}, {self.dtype(dtype)}"
                if producer:
                    args += f", {string_literal(producer)}"
                return [f"assert_input({string_literal(name)}, {self.names(name)}, {args})"]
            case SizeDef():
                return [self.size_def(line)]
            case Allocate(name=name, size=size, stride=stride, dtype=dtype, device=device):
                shape = f"{self.shape(size)}, {self.shape(stride)}"
                if device == "cpu":
                    call = f"empty_strided_cpu({shape}, {self.dtype(dtype)})"
                elif device == self.cuda_device:  # the current device, once `call` began
                    call = f"empty_strided_cuda({shape}, {self.dtype(dtype)})"
                else:
                    where = f"dtype={self.dtype(dtype)}, device={string_literal(device)}"
                    call = f"torch.empty_strided({shape}, {where})"
                return [f"{self.names(name)} = {call}"]
            case Free(name=name):
                return [f"del {self.names(name)}"]
            case Reuse(name=name, old=old, size=size, stride=stride):
                view = (f"reinterpret_tensor({self.names(old)}, {self.shape(size)}, "
                        f"{self.shape(stride)}, 0)")
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
                outs = (self.names(n) if isinstance(n, str) else self.expr(n) for n in names)
                return [f"return [{', '.join(outs)}]"]
            case _:
                assert_never(line)

    def input_checks(self, run: Sequence[InputAssert]) -> list[str]:
        """Asserts of graph inputs as one cheap test; each `assert_input` runs only if it fails.

        Inputs of static layout are checked together by a guard (`input_guards`, one C call)
        made from the last inputs that passed the full asserts; inputs with size symbols compare
        shape, stride and dtype inline (an exact match; `assert_input` then judges the rest).
        """
        static = [a for a in run if _static_layout(a)]
        tests = [self.layout_test(a) for a in run if not _static_layout(a)]
        asserts = [line for a in run for line in self.line(a)]
        if static:
            guard = self.names.fresh("input_guard")
            self.guards.append(guard)
            args = ", ".join(self.names(a.name) for a in static)
            tests.insert(0, f"{guard}.check({args})")
            asserts.append(f"{guard} = input_guards({args})")
        if len(tests) == 1:  # a layout test is a conjunction: `not` applies to all of it
            head = [f"if not ({tests[0]}):"]
        else:
            head = ["if not (", f"    {tests[0]}", *(f"    and {t}" for t in tests[1:]), "):"]
        return [*head, *(f"    {line}" for line in asserts)]

    def layout_test(self, line: InputAssert) -> str:
        """True when input `line.name` is a tensor of exactly the asserted size, stride, dtype."""
        name = self.names(line.name)
        return (
            f"isinstance({name}, torch.Tensor) and {name}.shape == {self.shape(line.size)}"
            f" and {name}.stride() == {self.shape(line.stride)}"
            f" and {name}.dtype is {self.dtype(line.dtype)}"
        )

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
        args = f"{self.shape(line.size)}, {self.shape(line.stride)}, {self.expr(line.offset)}"
        return f"{self.names(line.name)} = reinterpret_tensor({base}, {args})"

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


# memo of a pure function (dtype -> its source text): not process state
_DTYPES: dict[torch.dtype, str] = {}  # dtypes checked by `_Renderer.dtype`, as source


def _static_layout(line: InputAssert) -> bool:
    return all(_is_constant(v) for v in (*line.size, *line.stride))


def _is_constant(value: object) -> bool:
    """True when size `value` has no symbols (ints and sympy integers without sympifying)."""
    if type(value) is int or isinstance(value, sympy.Integer):
        return True
    return not sympy.sympify(value).free_symbols


def _body_lines(renderer: _Renderer, program: WrapperProgram) -> list[str]:
    """The statements of `call`: each run of graph-input asserts becomes one `input_checks`."""
    lines: list[str] = []
    run: list[InputAssert] = []
    for line in program.lines:
        if isinstance(line, InputAssert) and not line.producer:
            run.append(line)
            continue
        if run:
            lines += renderer.input_checks(run)
            run = []
        lines += renderer.line(line)
    if run:
        lines += renderer.input_checks(run)
    if not any(isinstance(line, GraphOutputs) for line in program.lines):
        lines.append("return []")
    lines[:0] = _cuda_prologue(renderer)
    if renderer.guards:
        lines.insert(0, f"nonlocal {', '.join(renderer.guards)}")
    return lines


def _cuda_device(program: WrapperProgram) -> str | None:
    """The one CUDA device `program` allocates on, if it allocates on exactly one."""
    devices = {
        line.device for line in program.lines
        if isinstance(line, Allocate) and torch.device(line.device).type == "cuda"
    }
    return devices.pop() if len(devices) == 1 else None


def _cuda_prologue(renderer: _Renderer) -> list[str]:
    """`call` runs with its program's CUDA device current (kernels launch on the current device,
    and `empty_strided_cuda` allocates there): where another is current, it calls itself again
    inside a scope that makes it so. One C call where it is already."""
    index = None if renderer.cuda_device is None else torch.device(renderer.cuda_device).index
    if index is None:
        return []
    return [
        f"if cuda_device() != {int(index)}:",
        f"    with cuda_device_scope({int(index)}):",
        "        return call(*inputs)",
    ]


def _render_module(program: WrapperProgram) -> str:
    renderer = _Renderer(cuda_device=_cuda_device(program))
    kernels = program.kernels()
    kernel_vars = [renderer.names(k.name, "kernel") for k in kernels]
    body = IndentedBuffer()
    with body.indent(2):
        body.lines(_body_lines(renderer, program))
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
        out.lines([f"{guard} = UNCHECKED" for guard in renderer.guards])
        out.lines(["", "def call(*inputs):"])
    return out.getvalue() + body.getvalue() + _FOOTER


_HEADER = [
    '"""A polyduct program rendered by the Python wrapper (generated; runs standalone)."""',
    "",
    "import torch",
    "",
    "from polyduct.wrapper.python import (",
    *(f"    {name}," for name in _RUNTIME_NAMES),
    ")",
    "from polyduct.wrapper.ir import KernelDefinition",
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

    def make(self, program: WrapperProgram, load_kernels: KernelLoader) -> Built:
        # the wrapper's `call` itself is what runs: one Python frame less on every call
        module = self.build(program, load_kernels)
        return Built(module.fn, module.source, module.path)

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
