"""A fuzzed program as plain data: its inputs, its statements (Python source) and its outputs.

The statement text is the single source of truth. The generator evaluates it on meta tensors to
learn shapes and dtypes, the runner loads it from the module file `render_module` writes, and that
same file is the standalone pytest reproducer of a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

MODES = ("static", "dynamic", "auto")  # torch.compile(dynamic=False / True / None)


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input tensor: shape, dtype, how its values are drawn and how it is laid out.

    `values`: `normal` (random), `edge` (random mixed with NaN, +-inf, +-0, extremes),
    `index` (integers in [low, high)), `perm` (distinct integers in [0, high) along `dim`).
    `layout`: `contiguous`, `transposed` (a permuted view), `strided` (every other element of a
    larger buffer) or `offset` (a view starting one element into its storage).
    `alt_shape`: the shape of the second call (dynamic shapes), or None for one call only.
    `alt_high`: `high` in the second call (the indexed dim's size there), or None for `high`.
    """

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    values: str = "normal"
    high: int = 0
    low: int = 0
    dim: int = 0
    layout: str = "contiguous"
    alt_shape: tuple[int, ...] | None = None
    grad: bool = False
    alt_high: int | None = None


@dataclass(frozen=True, slots=True)
class Stmt:
    """`out = expr`, or the statement `expr` itself when `out` is empty (an item assignment).

    `tags` name features the runner reports on (e.g. `reduce0d` for a known bug's trigger)."""

    out: str
    expr: str
    tags: tuple[str, ...] = ()

    def line(self) -> str:
        return f"{self.out} = {self.expr}" if self.out else self.expr


@dataclass(frozen=True, slots=True)
class Program:
    """A whole fuzzed program, reproducible from this data alone."""

    inputs: tuple[InputSpec, ...]
    stmts: tuple[Stmt, ...]
    outputs: tuple[str, ...]
    mode: str = "static"
    train: bool = False
    seed: int = 0
    exact: tuple[str, ...] = field(default=())  # values equal bit for bit in any correct result

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {MODES}")

    def all_tags(self) -> set[str]:
        return {t for s in self.stmts for t in s.tags}

    def has_alt(self) -> bool:
        return any(spec.alt_shape is not None for spec in self.inputs)

    def without_alt(self) -> Program:
        return replace(self, inputs=tuple(replace(s, alt_shape=None) for s in self.inputs))


def _edge_values(dtype: torch.dtype) -> list[float]:
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        sub = info.tiny / 4
        # Large, not the largest: whether a sum or product overflows depends on its order, and
        # 16-bit values compute in float32 between stores (docs/conventions.md).
        big = [1e4, -1e4] if info.bits > 16 else [1000.0, -1000.0]
        return [math.nan, math.inf, -math.inf, 0.0, -0.0, *big, info.tiny, sub, 1.0, -1.0, 0.5]
    if dtype == torch.bool:
        return [0, 1]
    info_i = torch.iinfo(dtype)
    return [info_i.min, info_i.max, 0, -1, 1, info_i.min + 1, info_i.max - 1]


def _values(spec: InputSpec, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    dtype = spec.dtype
    if spec.values == "index":
        return torch.randint(spec.low, spec.high, shape, generator=gen, dtype=dtype)
    if spec.values == "perm":
        return _perm(spec, shape, gen)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        base = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
    else:
        lo = 0 if dtype == torch.uint8 else -20
        base = torch.randint(lo, 21, shape, generator=gen, dtype=torch.int64).double()
    out = base.to(dtype)
    if spec.values == "edge" and out.numel():
        edges = torch.tensor(_edge_values(dtype), dtype=torch.float64)
        pick = torch.randint(0, len(edges), shape, generator=gen)
        mask = torch.rand(shape, generator=gen) < 0.3
        out = torch.where(mask, edges[pick].to(dtype), out)
    return out


def _perm(spec: InputSpec, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Distinct values along `spec.dim`: every slice is a prefix of a random permutation."""
    moved = list(shape)
    size = moved.pop(spec.dim)
    rows = math.prod(moved)
    flat = [torch.randperm(spec.high, generator=gen)[:size] for _ in range(rows)]
    stacked = torch.stack(flat) if flat else torch.empty(0, size, dtype=torch.int64)
    return stacked.reshape(*moved, size).movedim(-1, spec.dim).to(spec.dtype).contiguous()


def _laid_out(values: torch.Tensor, layout: str) -> torch.Tensor:
    if values.dim() == 0 or values.numel() == 0 or layout == "contiguous":
        return values.clone()
    if layout == "transposed":
        order = tuple(reversed(range(values.dim())))
        return values.permute(order).contiguous().permute(order)
    if layout == "strided":
        big = torch.zeros(*values.shape[:-1], values.shape[-1] * 2, dtype=values.dtype)
        view = big[..., ::2]
        view.copy_(values)
        return view
    storage = torch.zeros(values.numel() + 1, dtype=values.dtype)
    view = storage[1:].view(values.shape)
    view.copy_(values)
    return view


def make_inputs(
    program: Program, seed: int, device: str = "cpu", alt: bool = False
) -> list[torch.Tensor]:
    """The program's input tensors, drawn from `seed` (the same tensors for the same seed)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for spec in program.inputs:
        shape = spec.alt_shape if alt and spec.alt_shape is not None else spec.shape
        if alt and spec.alt_high is not None:
            low = -spec.alt_high if spec.low < 0 else spec.low
            spec = replace(spec, high=spec.alt_high, low=low)
        t = _laid_out(_values(spec, shape, gen), spec.layout)
        if device != "cpu":
            t = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device).copy_(t)
        out.append(t.requires_grad_(spec.grad))
    return out


def render_function(program: Program, name: str = "fn") -> str:
    """The program as a Python function `name(inputs...)` returning a tuple of its outputs."""
    args = ", ".join(spec.name for spec in program.inputs)
    body = [f"    {stmt.line()}" for stmt in program.stmts]
    outs = "".join(f"{o}, " for o in program.outputs)
    return "\n".join([f"def {name}({args}):", *body, f"    return ({outs})", ""])


def evaluate(expr: str, values: dict[str, torch.Tensor]) -> object:
    """`expr` evaluated over `values`: torch's own shape, dtype, kernel and alias rules."""
    # The program text is the single source of truth: evaluating it on stand-in tensors is how
    # the generator learns what torch makes of it, with no second model of torch's rules.
    return eval(expr, {"torch": torch, **values})


def shadow_input(spec: InputSpec) -> torch.Tensor:
    """A zero-filled stand-in for input `spec`, laid out as the real one."""
    zeros = _laid_out(torch.zeros(spec.shape, dtype=spec.dtype), spec.layout)
    return zeros.requires_grad_(spec.grad)


def shadow_values(program: Program) -> dict[str, torch.Tensor]:
    """Every value of `program` (inputs and statement results) computed on zero-filled inputs."""
    values = {spec.name: shadow_input(spec) for spec in program.inputs}
    for stmt in program.stmts:
        out = evaluate(stmt.expr, values)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"statement {stmt.line()!r} gives {type(out).__name__}, not a tensor")
        values[stmt.out] = out
    return values
