"""Shared pieces of the special-function decompositions: the host protocol and small helpers.

Every decomposition is a module-level function `f(ops, x, ...)` written against `SpecialOps`, the
op protocol plus one hook, `_special_dtype(x)`, that tells the dtype in which `x` is computed (so
constants are created in that dtype). Helpers here build constants, evaluate polynomials and
Chebyshev series, and select between branches with `where` only: there is no Python control flow on
values, so the same code emits straight-line kernel code in any backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import torch

from polyduct.ops import OpHandler

V = TypeVar("V")


class SpecialOps(OpHandler[V], Protocol[V]):
    """What the special-function mixins need from their host: the op set and a dtype hook."""

    def _special_dtype(self, x: V) -> torch.dtype:
        """The dtype `x` is computed in (float32 for float16/bfloat16 values, by convention)."""
        ...


def const(ops: SpecialOps[V], like: V, value: float) -> V:
    """`value` as a constant in the compute dtype of `like`."""
    return ops.constant(value, ops._special_dtype(like))


def is_f64(ops: SpecialOps[V], like: V) -> bool:
    """Whether `like` is computed in float64 (selects coefficient sets and term counts)."""
    return ops._special_dtype(like) == torch.float64


def addc(ops: SpecialOps[V], x: V, value: float) -> V:
    """x + value."""
    return ops.add(x, const(ops, x, value))


def mulc(ops: SpecialOps[V], x: V, value: float) -> V:
    """x * value."""
    return ops.mul(x, const(ops, x, value))


def rdiv(ops: SpecialOps[V], value: float, x: V) -> V:
    """value / x."""
    return ops.truediv(const(ops, x, value), x)


def sel(ops: SpecialOps[V], cond: V, a: V, b: V) -> V:
    """a where cond else b."""
    return ops.where(cond, a, b)


def selc(ops: SpecialOps[V], cond: V, value: float, b: V) -> V:
    """The constant `value` where cond else b."""
    return ops.where(cond, const(ops, b, value), b)


def lt_c(ops: SpecialOps[V], x: V, value: float) -> V:
    """x < value (bool)."""
    return ops.lt(x, const(ops, x, value))


def le_c(ops: SpecialOps[V], x: V, value: float) -> V:
    """x <= value (bool)."""
    return ops.le(x, const(ops, x, value))


def gt_c(ops: SpecialOps[V], x: V, value: float) -> V:
    """x > value (bool)."""
    return ops.gt(x, const(ops, x, value))


def ge_c(ops: SpecialOps[V], x: V, value: float) -> V:
    """x >= value (bool)."""
    return ops.ge(x, const(ops, x, value))


def eq_c(ops: SpecialOps[V], x: V, value: float) -> V:
    """x == value (bool)."""
    return ops.eq(x, const(ops, x, value))


def horner(ops: SpecialOps[V], x: V, coeffs: Sequence[float]) -> V:
    """Σ coeffs[i] * x**(n-1-i): the polynomial with coefficients listed highest power first."""
    acc = const(ops, x, coeffs[0])
    for c in coeffs[1:]:
        acc = ops.add(ops.mul(acc, x), const(ops, x, c))
    return acc


def chebyshev(ops: SpecialOps[V], t: V, coeffs: Sequence[float]) -> V:
    """Σ coeffs[k] * T_k(t) for t in [-1, 1] by Clenshaw's recurrence (coeffs[0] unhalved)."""
    two_t = ops.add(t, t)
    b1 = const(ops, t, 0.0)
    b2 = const(ops, t, 0.0)
    for c in reversed(coeffs[1:]):
        b1, b2 = ops.add(ops.sub(ops.mul(two_t, b1), b2), const(ops, t, c)), b1
    return ops.add(ops.sub(ops.mul(t, b1), b2), const(ops, t, coeffs[0]))


def is_integer(ops: SpecialOps[V], x: V) -> V:
    """x is a finite whole number (bool)."""
    return ops.eq(ops.floor(x), x)


def is_odd(ops: SpecialOps[V], n: V) -> V:
    """A whole number n is odd (bool): n - 2*floor(n/2) != 0."""
    half = ops.floor(mulc(ops, n, 0.5))
    return ops.ne(ops.sub(n, ops.add(half, half)), const(ops, n, 0.0))


def sinpi(ops: SpecialOps[V], x: V) -> V:
    """sin(pi * x), with the argument reduced exactly first (x - round(x) is exact)."""
    r = ops.sub(x, ops.round(x))
    s = ops.sin(mulc(ops, r, torch.pi))
    # sin(pi*(k + r)) = (-1)^k sin(pi*r)
    return sel(ops, is_odd(ops, ops.round(x)), ops.neg(s), s)


def nan_like(ops: SpecialOps[V], x: V) -> V:
    """A NaN constant in x's compute dtype."""
    return const(ops, x, float("nan"))
