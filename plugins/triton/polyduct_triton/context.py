"""What the ops handler needs to know about the kernel it is emitting into.

A `KernelContext` lives for one `codegen` call. It owns the argument names, the index printer
(size symbols renamed to kernel arguments), the per-stage code sections and the bookkeeping of
local buffers, indirect-index checks and extra helper functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from polyduct.codegen import CSE, IndentedBuffer, identifier
from polyduct.indexing import CIndexPrinter, PythonIndexPrinter, index_vars
from polyduct.kernel import KernelSpec


@dataclass
class Check:
    """One run-time bounds check: slot in the error buffer, what it guards, and its size."""

    slot: int
    size: str
    buffer: str = "?"
    message: str | None = None  # set for device assertions: raised as KernelAssertError


@dataclass
class StageCode:
    """Code sections of one stage: before the reduction loop, inside it, and after it."""

    kind: str
    pre: IndentedBuffer = field(default_factory=IndentedBuffer)
    loop: IndentedBuffer = field(default_factory=IndentedBuffer)
    post: IndentedBuffer = field(default_factory=IndentedBuffer)


class KernelContext:
    """Names, sections and bookkeeping of one kernel being generated."""

    def __init__(self, spec: KernelSpec, interpret: bool) -> None:
        self.spec = spec
        self.interpret = interpret
        self.args = spec.arg_names()
        # renamed with their assumptions (positive): a floor division of sizes stays `//`
        self.rename = {
            sym: sympy.Symbol(self.args[sym.name], **sym.assumptions0) for sym in spec.size_args
        }
        self.printer = _TritonIndexPrinter()
        self.stages: list[StageCode] = []
        self.locals: dict[str, str] = {}
        self.checks: list[Check] = []
        self.indirect: dict[str, Check] = {}  # indirect symbol name -> its check
        self.helpers: list[str] = []
        self.ops_used: set[str] = set()  # ops the stage bodies called (codegen._Recording)
        # Whether a reduction merges each block into a per-row accumulator (reduce_ops: every
        # type but sum, max and min), a reduction across warps per loop iteration.
        self.block_merges = False
        self.counter = 0
        self.stage: StageCode = StageCode("outer")
        self.cse = CSE(self.stage.loop)
        self.masks: list[str] = []
        self.const_shape = "[1, 1]"
        # The index variables the stage bodies receive: outer (x) and reduction (r) ones.
        self.xs = index_vars("x", len(spec.ranges))
        self.rs = index_vars("r", len(spec.reduction_ranges))
        self.outer = frozenset(v.name for v in self.xs)
        self.reduction = frozenset(v.name for v in self.rs)
        self.sizes = frozenset(sym.name for sym in spec.size_args)  # scalars: no shape
        # The index variables that are blocks: one of a dim of size 1 is the constant 0.
        self.blocks = frozenset(
            v.name for v, size in zip((*self.xs, *self.rs),
                                      (*spec.ranges, *spec.reduction_ranges), strict=True)
            if size != 1)

    def begin(self, kind: str) -> StageCode:
        """Start emitting a new stage of `kind`; temporaries get stage-unique names."""
        self.stage = StageCode(kind)
        self.stages.append(self.stage)
        self.cse = CSE(self.stage.loop, prefix=f"t{len(self.stages) - 1}_")
        self.masks = []
        return self.stage

    def fresh(self, prefix: str) -> str:
        """A new kernel-unique variable name."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    @property
    def in_loop(self) -> bool:
        """Whether the current stage iterates over the reduction dims."""
        return self.stage.kind != "outer" and bool(self.spec.reduction_ranges)

    def mask(self) -> str:
        """The mask of the current position: outer mask, reduction mask, masked() predicates."""
        parts = ["xmask"] + (["rmask"] if self.in_loop else []) + self.masks
        return " & ".join(parts)

    def index(self, expr: sympy.Expr) -> str:
        """Triton source for an index expression (size symbols renamed to kernel arguments)."""
        expr = sympy.sympify(expr).xreplace(self.rename)
        return str(self.printer.doprint(expr))

    def arg(self, buffer: str) -> str:
        """The argument name of buffer `buffer`."""
        return identifier(self.args[buffer])


class _TritonIndexPrinter(PythonIndexPrinter):
    """Index expressions inside a kernel: min and max of (possibly vector) values; Triton's `//`
    and `%` of integers truncate toward zero, as C's do."""

    min_fn, max_fn = "tl.minimum", "tl.maximum"
    int_div = "//"
    floordiv_fn = "_ifloordiv"  # prelude
    _print_FloorDiv = CIndexPrinter._print_FloorDiv
    _print_Mod = CIndexPrinter._print_Mod
