"""Run-time reductions, scans and sorts for reference kernels, over the last (flat reduction) dim.

Inputs are broadcast to the kernel's full shape `(*ranges, R)`; reductions return `(*ranges, 1)`
(keepdim), scans and sorts return the full shape. Semantics follow docs/conventions.md: NaN
propagates through max/min/argmax/argmin, arg-reductions return the first index of the extreme
value (the first NaN if any), float16/bfloat16 are already held in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from polyduct.reference.runtime import compute

Tensor = torch.Tensor
Values = tuple[Tensor, ...]


def _full(value: Tensor, shape: tuple[int, ...]) -> Tensor:
    return torch.broadcast_to(value, shape)


def _first_true(hit: Tensor) -> Tensor:
    """Index of the first True along the last dim (keepdim); R if none."""
    size = hit.shape[-1]
    positions = torch.arange(size, device=hit.device).expand(hit.shape)
    return torch.where(hit, positions, size).amin(dim=-1, keepdim=True)


def _arg_extreme(x: Tensor, largest: bool) -> Tensor:
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    best = x.amax(-1, keepdim=True) if largest else x.amin(-1, keepdim=True)
    hit = x == best
    if x.is_floating_point():
        hit = hit | (torch.isnan(x) & torch.isnan(best))
    return _first_true(hit)


def _xor_sum(x: Tensor) -> Tensor:
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = torch.cat([x, torch.zeros_like(x[..., :1])], dim=-1)
        x = torch.bitwise_xor(x[..., 0::2], x[..., 1::2])
    return x


def _welford(x: Tensor) -> Values:
    # In float64, as eager's CPU kernel accumulates: the float32 sum of values near FLT_MAX
    # overflows where their mean does not (halide seed 9203, program 5825).
    x = x.to(torch.float64)
    count = x.shape[-1]
    mean = x.mean(-1, keepdim=True) if count else torch.zeros_like(x[..., :1].sum(-1, True))
    m2 = ((x - mean) ** 2).sum(-1, keepdim=True)
    weight = torch.full_like(mean, float(count))
    return mean, m2, weight


def _welford_combine(mean: Tensor, m2: Tensor, weight: Tensor) -> Values:
    total = weight.sum(-1, keepdim=True)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    new_mean = torch.where(total == 0, 0.0, (weight * mean).sum(-1, keepdim=True) / safe)
    spread = (weight * (mean - new_mean) ** 2).sum(-1, keepdim=True)
    return new_mean, m2.sum(-1, keepdim=True) + spread, total


def _online_softmax(x: Tensor) -> Values:
    top = x.amax(-1, keepdim=True)
    # A row of -inf has no finite max; shift by 0 so its sum is 0 rather than NaN.
    shift = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    return top, torch.exp(x - shift).sum(-1, keepdim=True)


def _reduce_one(kind: str, x: Tensor, dtype: torch.dtype) -> Tensor:
    acc = compute(dtype)
    if kind == "sum":
        return x.to(acc).sum(-1, keepdim=True, dtype=acc)
    if kind == "prod":
        return x.to(acc).prod(-1, keepdim=True, dtype=acc)
    if kind in ("max", "min"):
        y = x.to(torch.uint8) if x.dtype == torch.bool else x
        if y.shape[-1] == 0:  # nothing to compare: the identity (torch's amax refuses)
            return torch.full((*y.shape[:-1], 1), _identity(kind, y.dtype), dtype=acc,
                              device=y.device)
        best = y.amax(-1, keepdim=True) if kind == "max" else y.amin(-1, keepdim=True)
        return best.to(acc)
    if kind in ("argmax", "argmin"):  # an index, whatever the values' dtype
        return _arg_extreme(x, kind == "argmax").to(torch.int64)
    if kind == "any":
        return (x != 0).any(-1, keepdim=True).to(acc)
    if kind == "xor_sum":
        return _xor_sum(x.to(acc))
    raise ValueError(f"reference: unknown reduction type {kind!r}")


def _identity(kind: str, dtype: torch.dtype) -> float | int:
    """The value a max (or min) reduction of no elements gives: its dtype's lowest (highest)."""
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    if dtype.is_floating_point:
        return -math.inf if kind == "max" else math.inf
    return info.min if kind == "max" else info.max


def reduction(
    kind: str, value: Tensor | Values, dtype: torch.dtype, shape: tuple[int, ...]
) -> Tensor | Values:
    """Reduce `value` over the last dim of `shape`; 1-3 results per `reduction_num_outputs`."""
    if kind == "welford_combine":
        assert isinstance(value, tuple)
        parts = (_full(v.to(torch.float64), shape) for v in value)
        return tuple(r.to(compute(dtype)) for r in _welford_combine(*parts))
    assert isinstance(value, Tensor)
    full = _full(value, shape)
    if kind == "welford_reduce":
        return tuple(r.to(compute(dtype)) for r in _welford(full))
    if kind == "online_softmax_reduce":
        return tuple(r.to(compute(dtype)) for r in _online_softmax(full.to(compute(dtype))))
    return _reduce_one(kind, full, dtype)


def scan(
    combine: Callable[..., Values],
    values: Values,
    dtypes: tuple[torch.dtype, ...],
    shape: tuple[int, ...],
) -> Values:
    """Inclusive scan with an associative `combine(*left, *right)`: Hillis-Steele doubling."""
    current = tuple(
        _full(v.to(compute(d)), shape).clone() for v, d in zip(values, dtypes, strict=True)
    )
    size = shape[-1]
    position = torch.arange(size, device=current[0].device)
    step = 1
    while step < size:
        shifted = tuple(_shift_right(v, step) for v in current)
        combined = combine(*shifted, *current)
        take = position >= step
        current = tuple(
            torch.where(take, _full(c, shape).to(v.dtype), v)
            for c, v in zip(combined, current, strict=True)
        )
        step *= 2
    return current


def _shift_right(x: Tensor, step: int) -> Tensor:
    """x moved `step` places along the last dim; the vacated front repeats element 0 (unused)."""
    front = x[..., :1].expand(*x.shape[:-1], step)
    return torch.cat([front, x[..., :-step]], dim=-1)


def sort(
    values: Values,
    dtypes: tuple[torch.dtype, ...],
    stable: bool,
    descending: bool,
    shape: tuple[int, ...],
) -> Values:
    """Sort along the last dim by the first value (NaN largest, as torch); others follow."""
    full = [_full(v.to(compute(d)), shape) for v, d in zip(values, dtypes, strict=True)]
    key = full[0]
    # torch.sort(stable=True) is a valid answer for stable=False too; it keeps results exact.
    _, order = torch.sort(key, dim=-1, stable=True, descending=descending)
    return tuple(torch.gather(v, -1, order) for v in full)
