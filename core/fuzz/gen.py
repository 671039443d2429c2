"""The generator's state: the pool of values a new statement may read, and the inputs so far.

A `Val` is a value of the program under construction, with its value on zero-filled stand-in
inputs (`meta`: shape, dtype, strides, view base) and whether it is *exact*: equal bit for bit in eager and in any correct
compiled program. Floating-point arithmetic, transcendental functions and float reductions are
inexact (rounding, operation order and contraction may differ within tolerance); comparisons,
rounding functions, integer casts and index results are discontinuous, so the generator only
applies them to exact values. That keeps a mismatch a bug rather than a rounding accident.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import torch

from polyduct.fuzz.program import InputSpec, evaluate, shadow_input

MAX_NUMEL = 2048
T = TypeVar("T")
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INTS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


@dataclass(frozen=True)
class Emit:
    """What an op generator proposes: the expression, exactness and tags of its result.

    `exact` None: exact when the result is an integer or bool (integer arithmetic of exact
    inputs), inexact when it is floating point."""

    expr: str
    exact: bool | None
    tags: tuple[str, ...] = ()
    statement: bool = False  # `expr` is a whole statement (item assignment), binding nothing


@dataclass
class Val:
    """A value of the program being generated."""

    name: str
    meta: torch.Tensor
    exact: bool
    base: str  # the value owning the storage this one lives in (itself unless a view)
    is_input: bool = False

    @property
    def dtype(self) -> torch.dtype:
        return self.meta.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.meta.shape)

    @property
    def rank(self) -> int:
        return self.meta.dim()

    def is_float(self) -> bool:
        return self.meta.dtype.is_floating_point

    def is_int(self) -> bool:
        return self.meta.dtype in INTS

    def is_bool(self) -> bool:
        return self.meta.dtype == torch.bool


@dataclass
class Gen:
    """Everything an op generator may read or extend."""

    rng: random.Random
    dtypes: tuple[torch.dtype, ...]
    sizes: list[int]
    alt_sizes: list[int]
    train: bool = False
    pool: list[Val] = field(default_factory=list)
    inputs: list[InputSpec] = field(default_factory=list)
    indices: dict[str, torch.Tensor] = field(default_factory=dict)  # index inputs, not in pool
    # every value at the second call's shapes (None where the statement does not fit them)
    alt: dict[str, torch.Tensor | None] = field(default_factory=dict)

    def env(self) -> dict[str, torch.Tensor]:
        """Every name a statement may read, bound to its stand-in value."""
        return {**self.indices, **{v.name: v.meta for v in self.pool}}

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, seq: Sequence[T]) -> T:
        return self.rng.choice(list(seq))

    def pick(self, pred: Callable[[Val], bool] | None = None) -> Val | None:
        """A random pool value satisfying `pred`, later values more likely (deeper programs)."""
        cands = [v for v in self.pool if pred is None or pred(v)]
        if not cands:
            return None
        weights = [1.0 + i for i in range(len(cands))]
        return self.rng.choices(cands, weights)[0]

    def dim(self, v: Val, allow_neg: bool = True) -> int:
        d = self.rng.randrange(max(v.rank, 1))
        return d - max(v.rank, 1) if allow_neg and self.chance(0.3) else d

    def random_shape(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shape, alt_shape) over the program's size symbols, at most MAX_NUMEL // 2 elements."""
        for _ in range(20):
            rank = self.rng.choices(range(5), [8, 22, 35, 25, 10])[0]
            picks = [self.rng.randrange(len(self.sizes)) if self.chance(0.8) else -1
                     for _ in range(rank)]
            shape = tuple(self.sizes[p] if p >= 0 else 1 for p in picks)
            alt = tuple(self.alt_sizes[p] if p >= 0 else 1 for p in picks)
            if math.prod(alt) <= MAX_NUMEL // 2:
                return shape, alt
        return (self.sizes[0],), (self.alt_sizes[0],)

    def random_dtype(self, floats_only: bool = False) -> torch.dtype:
        weights = {torch.float32: 30, torch.float64: 10, torch.float16: 8, torch.bfloat16: 8,
                   torch.int64: 12, torch.int32: 8, torch.int8: 3, torch.uint8: 3,
                   torch.int16: 2, torch.bool: 10}
        allowed = [d for d in self.dtypes if d.is_floating_point or not floats_only]
        if self.train:
            allowed = [d for d in allowed if d in (torch.float32, torch.float64)] or allowed
        return self.rng.choices(allowed, [weights.get(d, 1) for d in allowed])[0]

    def new_input(self, dtype: torch.dtype | None = None, values: str | None = None) -> Val:
        """A fresh input tensor over the size symbols, added to the inputs and the pool."""
        dtype = dtype or self.random_dtype()
        shape, alt = self.random_shape()
        layout = str(self.rng.choices(("contiguous", "transposed", "strided", "offset"),
                                      (55, 20, 15, 10))[0])
        if values is None:
            values = "edge" if self.chance(0.2 if self.train else 0.35) else "normal"
        grad = self.train and dtype.is_floating_point
        spec = InputSpec(f"a{len(self.inputs)}", shape, dtype, values, layout=layout,
                         alt_shape=alt, grad=grad)
        return self._add_input(spec)

    def shaped_input(self, shape: tuple[int, ...], alt_shape: tuple[int, ...] | None,
                     dtype: torch.dtype) -> Val:
        """A fresh input of a given shape (a convolution's weight), random values and layout."""
        layout = str(self.rng.choices(("contiguous", "transposed", "strided", "offset"),
                                      (70, 10, 10, 10))[0])
        spec = InputSpec(f"a{len(self.inputs)}", shape, dtype, "normal", layout=layout,
                         alt_shape=alt_shape, grad=self.train and dtype.is_floating_point)
        return self._add_input(spec)

    def index_input(self, shape: tuple[int, ...], of: Val, d: int, negative: bool = False,
                    perm_dim: int | None = None) -> str:
        """A fixed-shape int64 index input into dim `d` of `of`: values in [0, size) (from
        -size with `negative`), distinct along perm_dim. The second call of a dynamic program
        draws them from the size `d` has there."""
        high = of.shape[d]
        alt = self.alt.get(of.name)
        alt_high = alt.shape[d] if alt is not None else None
        if perm_dim is not None and alt_high is not None and alt_high < shape[perm_dim]:
            alt_high = None  # too few to be distinct: the first call's values serve
        values = "index" if perm_dim is None else "perm"
        spec = InputSpec(f"i{len(self.inputs)}", shape, torch.int64, values, high=high,
                         low=-high if negative else 0, dim=perm_dim or 0,
                         alt_high=None if alt_high == high else alt_high)
        self.inputs.append(spec)
        self.indices[spec.name], self.alt[spec.name] = shadow_input(spec), shadow_input(spec)
        return spec.name

    def _add_input(self, spec: InputSpec) -> Val:
        self.inputs.append(spec)
        val = Val(spec.name, shadow_input(spec), True, spec.name, is_input=True)
        self.pool.append(val)
        self.alt[spec.name] = shadow_input(replace(spec, shape=spec.alt_shape or spec.shape))
        return val

    def alt_value(self, expr: str) -> torch.Tensor | None:
        """`expr` evaluated at the second call's shapes; None where it does not fit them."""
        env = {name: v for name, v in self.alt.items() if v is not None}
        try:
            out = evaluate(expr, env)
        except Exception:  # noqa: BLE001 -- a constant fits the first shapes only
            return None
        return out if isinstance(out, torch.Tensor) else None

    def base_of(self, meta: torch.Tensor) -> str | None:
        """The storage owner of `meta` among pool values (None: fresh storage)."""
        root = meta._base if meta._is_view() else meta
        for v in self.pool:
            vroot = v.meta._base if v.meta._is_view() else v.meta
            if vroot is root or v.meta is meta:
                return v.base
        return None

    def mark_inexact(self, base: str) -> None:
        """An inexact in-place write changes every value sharing `base`'s storage."""
        for v in self.pool:
            if v.base == base:
                v.exact = False


def broadcastable(a: Val, b: Val) -> bool:
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        return False
    return bool(math.prod(shape) <= MAX_NUMEL)


def overlaps(meta: torch.Tensor) -> bool:
    """True when two elements of `meta` share memory (expanded or overlapping strides)."""
    dims = sorted((st, sz) for st, sz in zip(meta.stride(), meta.shape, strict=True) if sz > 1)
    extent = 1
    for stride, size in dims:
        if stride < extent:
            return True
        extent = stride * (size - 1) + extent
    return False
