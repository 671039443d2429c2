"""Wrapper IR line-type completeness: run programs using every line type through a wrapper.

One program holds every type of `polyduct.wrapper.ir.LINE_TYPES` (a reference-backend kernel,
extern `aten.mm` and `aten.topk`, views, reuse, ...) and is compared with eager. Then one small
program per line type names which types a wrapper does not handle: a program that raises (an
`assert_never`, `WrapperError`, `NotImplementedError`, ...) or returns wrong values reports its
line type as missing, with the reason.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from polyduct.kernel import KernelBuffer, KernelFn, KernelSource, KernelSpec, Stage
from polyduct.ops import OpHandler
from polyduct.wrapper import WrapperBackend
from polyduct.wrapper.ir import (
    Allocate,
    Comment,
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

F32 = torch.float32
N = 37
S0 = sympy.Symbol("s0", integer=True, positive=True)
KERNEL = "wrapper_check_add"
WHOLE = "program with every line type"
TRICKY_TEXT = "a \"quoted\" 'comment' with \\ backslash,\nnewline and ''' \"\"\" quotes"


def _i(*values: int) -> tuple[sympy.Expr, ...]:
    return tuple(sympy.Integer(v) for v in values)


@dataclass(frozen=True)
class Layout:
    """An expected output whose values are unspecified (fresh allocation): only its layout."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


Expected = torch.Tensor | int | Layout


@dataclass(frozen=True)
class Check:
    """One program, the line type it checks, and its inputs and eager outputs."""

    line_type: str
    lines: tuple[Line, ...]
    inputs: tuple[Any, ...]
    expected: tuple[Expected, ...]
    bad_inputs: tuple[Any, ...] | None = None  # must make the program raise


def _add_body(ops: OpHandler[Any], x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
    ops.store("out", x[0], ops.add(ops.load("a", x[0]), ops.load("b", x[0])))


def kernel_spec() -> KernelSpec:
    """out[i] = a[i] + b[i] over a symbolic size `s0` (float32)."""
    return KernelSpec(
        name=KERNEL,
        ranges=(S0,),
        reduction_ranges=(),
        stages=(Stage("outer", _add_body),),
        buffers=(
            KernelBuffer("a", F32, "in", S0),
            KernelBuffer("b", F32, "in", S0),
            KernelBuffer("out", F32, "out", S0),
        ),
        size_args=(S0,),
    )


def _inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1234)
    return {
        "a": torch.randn(N, generator=gen),
        "b": torch.randn(N, generator=gen),
        "x": torch.randn(4, 5, generator=gen),
        "w": torch.randn(5, 3, generator=gen),
    }


def _kernel_lines(source: KernelSource) -> tuple[Line, ...]:
    return (
        SizeDef("s0", "a", "size", 0),
        KernelDefinition(source.name, source.backend, source.source),
        Allocate("t", (S0,), _i(1), F32, "cpu"),
        KernelCall(KERNEL, ("a", "b", "t"), (S0,)),
    )


_MM = ExternCall("aten.mm.default", (Ref("x"), Ref("w")), (), "mm1")
_TOPK = ExternCall("aten.topk.default", (Ref("mm1"), 2), (("dim", 1),), "tk")
_IDX = MultiOutput("idx", "tk", 1)
_VIEW = ReinterpretView("v", "x", _i(2, 2), _i(1, 5), sympy.Integer(1))


def whole_program(source: KernelSource) -> Check:
    """Every line type in one program, with its eager outputs."""
    t = _inputs()
    a, b, x, w = t["a"], t["b"], t["x"], t["w"]
    vals, idx = torch.topk(x @ w, 2, dim=1)
    lines: tuple[Line, ...] = (
        GraphInputs(("a", "b", "x", "w")),
        InputAssert("x", _i(4, 5), _i(5, 1), F32),
        Comment(TRICKY_TEXT),
        *_kernel_lines(source),
        Allocate("tmp", (S0,), _i(1), F32, "cpu"),
        Reuse("r", "tmp", (S0,), _i(1)),
        KernelCall(KERNEL, ("a", "t", "r"), (S0,)),
        _MM,
        _TOPK,
        MultiOutput("vals", "tk", 0),
        _IDX,
        Free("mm1"),
        _VIEW,
        GraphOutputs(("t", "r", "vals", "idx", "v", "s0")),
    )
    view = x.as_strided((2, 2), (1, 5), 1)
    expected = (a + b, a + (a + b), vals, idx, view, N)
    return Check(WHOLE, lines, (a, b, x, w), expected)


def _io(names: str, outs: str, *body: Line) -> tuple[Line, ...]:
    return (GraphInputs(tuple(names.split())), *body, GraphOutputs(tuple(outs.split())))


def line_checks(source: KernelSource) -> list[Check]:
    """One small program per line type (GraphInputs and GraphOutputs share one)."""
    t = _inputs()
    a, b, x, w = t["a"], t["b"], t["x"], t["w"]
    vals, idx = torch.topk(x @ w, 2, dim=1)
    alloc = Allocate("u", _i(3, 2), _i(1, 3), F32, "cpu")
    return [
        Check("GraphInputs", _io("a", "a"), (a,), (a,)),
        Check("GraphOutputs", _io("a b", "b a"), (a, b), (b, a)),
        Check(
            "InputAssert",
            _io("x", "x", InputAssert("x", _i(4, 5), _i(5, 1), F32)),
            (x,),
            (x,),
            bad_inputs=(w,),
        ),
        Check("SizeDef", _io("a", "s0", SizeDef("s0", "a", "size", 0)), (a,), (N,)),
        Check("Allocate", _io("a", "u", alloc), (a,), (Layout((3, 2), (1, 3), F32),)),
        Check("Free", _io("a", "a", alloc, Free("u")), (a,), (a,)),
        Check(
            "Reuse",
            _io("a", "q", alloc, Reuse("q", "u", _i(2, 3), _i(3, 1))),
            (a,),
            (Layout((2, 3), (3, 1), F32),),
        ),
        Check("ReinterpretView", _io("x", "v", _VIEW), (x,), (x.as_strided((2, 2), (1, 5), 1),)),
        Check(
            "KernelDefinition",
            _io("a", "a", KernelDefinition(source.name, source.backend, source.source)),
            (a,),
            (a,),
        ),
        Check("KernelCall", _io("a b", "t", *_kernel_lines(source)), (a, b), (a + b,)),
        Check("ExternCall", _io("x w", "mm1", _MM), (x, w), (x @ w,)),
        Check(
            "MultiOutput",
            _io("x w", "vals idx", _MM, _TOPK, MultiOutput("vals", "tk", 0), _IDX),
            (x, w),
            (vals, idx),
        ),
        Check("Comment", _io("a", "a", Comment(TRICKY_TEXT)), (a,), (a,)),
    ]


def _mismatch(got: Any, want: Expected) -> str:
    if isinstance(want, Layout):
        if not isinstance(got, torch.Tensor):
            return f"got {type(got).__name__}, want a tensor"
        have = (tuple(got.shape), got.stride(), got.dtype)
        if have != (want.size, want.stride, want.dtype):
            return f"layout {have} != {(want.size, want.stride, want.dtype)}"
        return ""
    if isinstance(want, int):
        return "" if isinstance(got, int) and got == want else f"got {got!r}, want {want}"
    if not isinstance(got, torch.Tensor):
        return f"got {type(got).__name__}, want a tensor"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got {got.dtype}{tuple(got.shape)}, want {want.dtype}{tuple(want.shape)}"
    if not torch.allclose(got.cpu(), want, rtol=1e-5, atol=1e-6, equal_nan=True):
        return f"values differ (max abs {float((got.cpu() - want).abs().max()):.3g})"
    return ""


def _first_line(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}{where}"


def run_check(wrapper: WrapperBackend, loader: Loader, check: Check) -> str:
    """Why `check` fails on `wrapper`, or "" when it builds, runs and matches eager."""
    try:
        fn = wrapper.build(WrapperProgram(check.lines), loader)
        outs = list(fn(*check.inputs))
    except Exception as exc:  # noqa: BLE001 -- any error of a wrapper under test is a result
        return _first_line(exc)
    if len(outs) != len(check.expected):
        return f"returned {len(outs)} outputs, want {len(check.expected)}"
    for i, (got, want) in enumerate(zip(outs, check.expected, strict=True)):
        bad = _mismatch(got, want)
        if bad:
            return f"output {i}: {bad}"
    if check.bad_inputs is not None:
        try:
            fn(*check.bad_inputs)
        except Exception:  # noqa: BLE001 -- the assertion must raise; any error class will do
            return ""
        return "a mismatching input did not raise"
    return ""


Loader = Callable[[Sequence[KernelDefinition]], dict[str, KernelFn]]


def check_wrapper(wrapper: WrapperBackend, reference: Any) -> dict[str, str]:
    """Line type -> why it is not handled by `wrapper` (empty: every line type works).

    `reference` is the kernel backend whose kernel the programs call (the reference backend).
    """
    source = reference.codegen(kernel_spec())

    def loader(defs: Sequence[KernelDefinition]) -> dict[str, KernelFn]:
        fns: dict[str, KernelFn] = reference.load(
            [KernelSource(d.name, d.backend, d.source) for d in defs]
        )
        return fns

    missing: dict[str, str] = {}
    for check in line_checks(source):
        why = run_check(wrapper, loader, check)
        if why:
            missing[check.line_type] = why
    whole = run_check(wrapper, loader, whole_program(source))
    if whole and not missing:
        missing[WHOLE] = whole
    return missing


def covered_line_types() -> set[str]:
    """Line type names the per-type programs check (must equal `LINE_TYPES`; tested)."""
    return {c.line_type for c in line_checks(KernelSource(KERNEL, "reference", ""))}


def check_installed_wrappers() -> dict[str, dict[str, str]]:
    """Every installed wrapper backend -> its missing line types (a wrapper that won't build too)."""
    from polyduct.plugins import load

    plugins = load()
    reference = plugins.kernel_backend("reference")
    out: dict[str, dict[str, str]] = {}
    for name in plugins.wrapper_backends.names():
        try:
            wrapper = plugins.wrapper_backend(name)
        except Exception as exc:  # noqa: BLE001 -- a wrapper that won't construct is a result
            out[name] = {"<construction>": _first_line(exc)}
            continue
        out[name] = check_wrapper(wrapper, reference)
    return out
