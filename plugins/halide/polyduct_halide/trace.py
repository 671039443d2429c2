"""Per-kernel tracing state: what each stage loads, stores, reduces, scans and sorts.

`HalideOps` (ops.py) records into a `KernelTrace` while the scheduler's stage bodies run on it;
`codegen.py` turns the records into a pipeline module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from polyduct.codegen import Value
from polyduct.indexing import PythonIndexPrinter
from polyduct.kernel import KernelSpec
from polyduct_halide.values import Emitter

CHECK_MAGIC = 770417  # marks polyduct's bounds checks in Halide requirement failures


@dataclass
class Reduction:
    """One `ops.reduction` call: the body lines computing its inputs and how to combine them."""

    name: str
    lines: list[str]
    values: list[str]
    rtype: str
    dtype: torch.dtype
    vector: str = ""  # how the CPU schedule vectorises it (`cpu.vectorisation`)


@dataclass
class Collective:
    """One `ops.scan` / `ops.sort` call over the reduction dim."""

    name: str
    kind: str
    lines: list[str]
    values: list[str]
    combine: list[str] = field(default_factory=list)  # scan: body of the combine function
    descending: bool = False


@dataclass
class StageTrace:
    """What one stage recorded; `lines` is its whole body."""

    kind: str
    em: Emitter
    stores: list[str] = field(default_factory=list)  # "(func, index, value, atomic)" sources
    reductions: list[Reduction] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    reduction_stores: list[tuple[str, sympy.Expr, str, torch.dtype]] = field(default_factory=list)
    loads: list[sympy.Expr] = field(default_factory=list)  # flat indices of its buffer loads


@dataclass
class Check:
    """A bounds check: which buffer an index is used with, or a device assertion message."""

    buffer: str
    message: str = ""


class _HalidePrinter(PythonIndexPrinter):
    min_fn, max_fn = "hl.min", "hl.max"

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__()
        self.names = names

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.names.get(expr.name, expr.name)


@dataclass
class KernelTrace:
    """Tracing state for one kernel."""

    spec: KernelSpec
    counter: list[int] = field(default_factory=lambda: [0])
    stages: list[StageTrace] = field(default_factory=list)
    locals: dict[str, str] = field(default_factory=dict)  # local buffer -> "func:element"
    checks: list[Check] = field(default_factory=list)
    masks: list[str] = field(default_factory=list)
    indirect: dict[str, tuple[str, str, str, bool]] = field(default_factory=dict)
    pending: list[tuple[str, int, str]] = field(default_factory=list)  # (cond, check id, args)
    used_args: set[str] = field(default_factory=set)
    # A float64 fmod is in the kernel (`hlfmod`: about ninety exact reduction steps, thousands
    # of IR nodes): `runtime.finish` keeps Halide from partitioning its loops.
    heavy: bool = False

    def __post_init__(self) -> None:
        self.names = self.spec.arg_names()
        sizes = {s.name: self.names[s.name] for s in self.spec.size_args}
        self._printer = _HalidePrinter(dict(sizes))
        self._raw_printer = _HalidePrinter(dict(sizes))

    @property
    def stage(self) -> StageTrace:
        """The stage being traced."""
        return self.stages[-1]

    def begin(self, kind: str) -> StageTrace:
        """Start tracing a stage of `kind`."""
        self.stages.append(StageTrace(kind, Emitter(self.counter)))
        self.pending = []
        return self.stage

    def expr(self, expr: sympy.Expr, raw: bool = False) -> str:
        """Source of a sympy index expression as a Halide expression.

        With `raw`, indirect indices appear unclamped (for bounds checks on them).
        """
        printer = self._raw_printer if raw else self._printer
        return f"_m.ex({printer.doprint(sympy.sympify(expr))})"

    def add_indirect(self, name: str, entry: tuple[str, str, str, bool]) -> None:
        """Record indirect index symbol `name` (its clamped value) and `name`_raw (unclamped)."""
        self.indirect[name] = entry
        self._raw_printer.names[name] = f"{name}_raw"

    def fresh(self, prefix: str) -> str:
        """A kernel-unique name."""
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def mask(self) -> str | None:
        """The conjunction of the enclosing `masked` conditions, if any."""
        return " & ".join(f"({m})" for m in self.masks) if self.masks else None

    def add_check(self, check: Check) -> int:
        """Register a bounds check; returns its id."""
        self.checks.append(check)
        return len(self.checks) - 1

    def guard(self, value: Value) -> Value:
        """`value` made to depend on the stage's pending check_bounds/device_assert requirements."""
        out = value.name
        for cond, cid, args in self.pending:
            out = (
                f"_rt.require(target, {cond}, {out}, hl.i32({CHECK_MAGIC}), hl.i32({cid}), {args})"
            )
        return Value(out, value.dtype)
