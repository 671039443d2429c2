"""Run-time memory and index semantics for reference kernels: flat views, gathers, scatters, checks.

A reference kernel evaluates each stage over the whole iteration space at once. Its values have
shape `(*ranges, R)` (R the flat reduction extent, 1 without one) or broadcast to it. Index
expressions evaluate to int64 tensors (or Python ints) of element offsets into a flat view of the
argument tensor, taken from the tensor's first element.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from polyduct.errors import KernelAssertError, KernelIndexError
from polyduct.reference.runtime import compute

Tensor = torch.Tensor
Index = Tensor | int


def flat(t: Tensor, numel: int) -> Tensor:
    """A 1-d view of `numel` elements of `t`'s storage, starting at `t`'s first element."""
    return torch.as_strided(t, (numel,), (1,))


def index_vars(shape: tuple[int, ...], device: torch.device) -> list[Tensor]:
    """One int64 index tensor per dim of `shape`, each broadcastable against `shape`."""
    result = []
    for dim, size in enumerate(shape):
        view = [1] * len(shape)
        view[dim] = size
        result.append(torch.arange(size, dtype=torch.int64, device=device).view(view))
    return result


def _as_index(index: Index, device: torch.device) -> Tensor:
    if isinstance(index, Tensor):
        return index.to(torch.int64)
    return torch.tensor(int(index), dtype=torch.int64, device=device)


def load(
    buf: Tensor, index: Index, mask: Tensor | None = None, kernel: str = "?", name: str = "?"
) -> Tensor:
    """Gather `buf[index]`; with a mask, masked-off lanes read element 0 (their value is unused).

    Every lane the mask keeps must index inside the buffer: a real backend would read outside
    it, so an index outside raises KernelIndexError naming the kernel and buffer.
    """
    idx = _as_index(index, buf.device)
    if mask is not None:
        idx = torch.where(mask, idx, 0)
    if buf.numel() == 0:
        return torch.zeros(idx.shape, dtype=compute(buf.dtype), device=buf.device)
    check_index(kernel, name, idx, buf.numel())
    # a copy even for one element (`buf[0-d index]` is a view, which a later store would alias)
    return widened(torch.take(buf, idx))


def store(
    buf: Tensor,
    index: Index,
    value: Tensor,
    mask: Tensor | None = None,
    mode: str | None = None,
    kernel: str = "?",
    name: str = "?",
) -> None:
    """Scatter `value` into `buf` at `index` (rounded to buf's dtype); atomic_add accumulates.
    Every lane the mask keeps must index inside the buffer (as in `load`)."""
    idx = _as_index(index, buf.device)
    check_index(kernel, name, idx, buf.numel(), mask)
    tensors = [idx, value] if mask is None else [idx, value, mask]
    idx, value, *rest = torch.broadcast_tensors(*tensors)
    idx, value = idx.reshape(-1), rounded(value.reshape(-1), buf.dtype)
    if rest:
        keep = rest[0].reshape(-1)
        idx, value = idx[keep], value[keep]
    if mode == "atomic_add":
        buf.index_put_((idx,), value, accumulate=True)
    else:
        buf[idx] = value


# float16 / bfloat16 NaN from its float32 compute value: sign, exponent, top payload bits, quiet bit
_NAN_BITS = {
    torch.float16: (13, 0x7C00 | 0x0200, 0x03FF),
    torch.bfloat16: (16, 0x7F80 | 0x0040, 0x007F),
}


def rounded(value: Tensor, dtype: torch.dtype) -> Tensor:
    """`value` rounded to `dtype` for a store. A NaN keeps its sign and payload as a hardware
    conversion (and eager's copy of the bits) does: torch's float32 -> float16 rounding gives one
    NaN in its vector body and another in its scalar tail, and -> bfloat16 a canonical one, which a
    later reinterpretation of the bits (`view(dtype)`) would show."""
    out = value.to(dtype)
    layout = _NAN_BITS.get(dtype)
    if layout is None or value.dtype != torch.float32:
        return out
    nans = value.isnan()
    if not bool(nans.any()):
        return out
    shift, fixed, payload = layout
    bits = value.view(torch.int32)
    sign = (bits >> 16) & 0x8000
    nan = (sign | fixed | ((bits >> shift) & payload)).to(torch.int16)
    return torch.where(nans, nan.view(dtype), out)


def widened(value: Tensor) -> Tensor:
    """`value` in its compute dtype; a float16 / bfloat16 NaN keeps its sign and payload (torch's
    float16 -> float32 conversion loses them in its scalar tail)."""
    out = value.to(compute(value.dtype))
    layout = _NAN_BITS.get(value.dtype)
    if layout is None:
        return out
    nans = value.isnan()
    if not bool(nans.any()):
        return out
    shift, _, payload = layout
    bits = value.view(torch.int16).to(torch.int32)
    nan = ((bits & 0x8000) << 16) | 0x7F800000 | ((bits & payload) << shift)
    return torch.where(nans, nan.view(torch.float32), out)


def local(value: Tensor, outer: tuple[int, ...]) -> Tensor:
    """A kernel-local buffer: one value per outer point, shape `(*outer, 1)`."""
    return value.expand(*outer, 1).clone()


def as_value(index: Index, dtype: torch.dtype, device: torch.device) -> Tensor:
    """An index expression's value as a tensor of `dtype` (index_expr / value_expr)."""
    return _as_index(index, device).to(dtype).to(compute(dtype))


def indirect(x: Tensor, size: int, wrap_neg: bool, mask: Tensor | None) -> Tensor:
    """An indirect index: int64, negatives wrapped by `size` when asked; masked-off lanes are 0."""
    idx = x.to(torch.int64)
    if wrap_neg:
        idx = torch.where(idx < 0, idx + size, idx)
    if mask is not None:
        idx = torch.where(mask, idx, 0)
    return idx


def check_index(
    kernel: str, buffer: str, idx: Tensor, size: int, mask: Tensor | None = None
) -> None:
    """Raise KernelIndexError naming the first value of `idx` outside [0, size)."""
    bad = (idx < 0) | (idx >= size)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):
        first = torch.broadcast_to(idx, bad.shape)[bad].reshape(-1)[0]
        raise KernelIndexError(kernel, buffer, int(first), int(size))


def check_bounds(
    kernel: str, index: Index, size: int, lower: bool, upper: bool, mask: Tensor | None = None
) -> None:
    """The `check_bounds` op: 0 <= index (lower) and index < size (upper)."""
    idx = _as_index(index, torch.device("cpu") if isinstance(index, int) else index.device)
    bad = torch.zeros_like(idx, dtype=torch.bool)
    if lower:
        bad = bad | (idx < 0)
    if upper:
        bad = bad | (idx >= size)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):
        first = torch.broadcast_to(idx, bad.shape)[bad].reshape(-1)[0]
        raise KernelIndexError(kernel, "<check_bounds>", int(first), int(size))


def device_assert(kernel: str, cond: Tensor, msg: str, mask: Tensor | None = None) -> None:
    """Raise KernelAssertError unless `cond` holds at every (unmasked) point."""
    failed = torch.logical_not(cond.to(torch.bool))
    if mask is not None:
        failed = failed & mask
    if bool(failed.any()):
        raise KernelAssertError(kernel, "reference", msg)


def load_seed(buf: Tensor, offset: Index) -> Tensor:
    """The int64 seed at `offset` of a seed buffer."""
    return load(buf, offset.to(torch.int64) if isinstance(offset, Tensor) else offset).to(
        torch.int64
    )


def bucketize(
    values: Tensor,
    boundaries: tuple[Tensor, int, int, int],
    boundary_indices: Tensor,
    indexing_dtype: torch.dtype,
    right: bool,
    sorter: tuple[Tensor, int] | None = None,
    sorter_indices: Tensor | None = None,
) -> Tensor:
    """searchsorted of `values` in rows of a boundaries buffer, by vectorised binary search.

    `boundaries` is (flat buffer, row length, buffer numel, element stride); a row starts at
    `boundary_indices`. With a sorter (flat buffer, stride), row element `i` is at sorter position i.
    """
    buf, length, numel, stride = boundaries
    start = _as_index(boundary_indices, values.device)
    low = torch.zeros(
        torch.broadcast_shapes(values.shape, start.shape), dtype=torch.int64, device=values.device
    )
    high = torch.full_like(low, length)
    for _ in range(max(1, int(length).bit_length() + 1)):
        active = low < high
        mid = (low + high) // 2
        pos = mid
        if sorter is not None:
            sort_buf, sort_stride = sorter
            sort_start = _as_index(
                sorter_indices if sorter_indices is not None else 0, values.device
            )
            pos = load(sort_buf, sort_start + mid * sort_stride, active).to(torch.int64)
        elem_index = torch.clamp(start + pos * stride, 0, max(numel - 1, 0))
        bound = load(buf, elem_index, active)
        above = values >= bound if right else values > bound
        low = torch.where(active & above, mid + 1, low)
        high = torch.where(active & ~above, mid, high)
    return low.to(indexing_dtype)


def imin(*args: Index) -> Index:
    """The least of index values (sympy's Min in an index expression)."""
    return _fold(torch.minimum, min, args)


def imax(*args: Index) -> Index:
    """The greatest of index values (sympy's Max in an index expression)."""
    return _fold(torch.maximum, max, args)


def _fold(
    on_tensors: Callable[[Tensor, Tensor], Tensor],
    on_ints: Callable[[int, int], int],
    args: tuple[Index, ...],
) -> Index:
    result = args[0]
    for arg in args[1:]:
        if isinstance(result, Tensor) or isinstance(arg, Tensor):
            device = result.device if isinstance(result, Tensor) else arg.device  # type: ignore[union-attr]
            result = on_tensors(_as_index(result, device), _as_index(arg, device))
        else:
            result = on_ints(int(result), int(arg))
    return result
