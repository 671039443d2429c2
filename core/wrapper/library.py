"""Library ops of the core that wrappers call like aten's (registered in torch's op registry,
namespace `polyduct`, so the Python wrapper, the FX wrapper and AOT packages resolve them alike).

`polyduct::restride(t, size, stride)`: `t` when its strides are `stride` (dims of size 1 aside),
else a copy of it into `size`/`stride`. A library call's result may have other strides than its
meta function promised (a CUDA convolution follows its input's memory format, the CPU flash
attention returns row-major): generated kernels index by the promised strides, so they are made
true, at the cost of a copy only where they are not.

`polyduct.run_and_save_rng_state` and `polyduct.run_with_rng_state` (Python functions, not
registered ops) run torch's rng-state wrappers of the same names with a flat result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

NAMESPACE = "polyduct"
RESTRIDE = f"{NAMESPACE}.restride.default"


def strides_hold(t: torch.Tensor, stride: Sequence[int]) -> bool:
    """Whether `t` is laid out with `stride` along every dim that has more than one element."""
    return all(n <= 1 or s == want for n, s, want in zip(t.shape, t.stride(), stride, strict=True))


def restride(t: torch.Tensor, size: Sequence[int], stride: Sequence[int]) -> torch.Tensor:
    """`polyduct::restride` (module docstring). The exact match, the common case, is one tuple
    comparison (the loop of `strides_hold` took 3 us, nine calls per ConvNeXt forward)."""
    if t.stride() == stride or strides_hold(t, stride):
        return t
    return torch.empty_strided(size, stride, dtype=t.dtype, device=t.device).copy_(t)


def _restride_fake(t: torch.Tensor, size: Sequence[int], stride: Sequence[int]) -> torch.Tensor:
    return torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)


# Defined once per process: torch's registry cannot drop an op that compiled programs call.
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")
_LIBRARY.define("restride(Tensor self, SymInt[] size, SymInt[] stride) -> Tensor")
_LIBRARY.impl("restride", restride, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::restride", _restride_fake, lib=_LIBRARY)

RUN_AND_SAVE_RNG_STATE = f"{NAMESPACE}.run_and_save_rng_state.default"
RUN_WITH_RNG_STATE = f"{NAMESPACE}.run_with_rng_state.default"


def run_and_save_rng_state(op: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """torch's `run_and_save_rng_state(op, ...)`, its result flattened: (the generator state
    before the call, *op's results). AOTAutograd wraps a random op of an activation-checkpointed
    region in it, so that the backward's recomputation (`run_with_rng_state`) draws the same
    numbers; wrapper IR results are one tensor or a flat tuple."""
    state, result = torch.ops.higher_order.run_and_save_rng_state(op, *args, **kwargs)
    return (state, *result) if isinstance(result, (tuple, list)) else (state, result)


def run_with_rng_state(state: torch.Tensor, op: Any, *args: Any, **kwargs: Any) -> Any:
    """torch's `run_with_rng_state`: `op` run with the generator set to `state`, then restored."""
    return torch.ops.higher_order.run_with_rng_state(state, op, *args, **kwargs)


# Library functions with no registered op (an op argument has no schema type): every wrapper
# calls them as Python functions.
UNREGISTERED: dict[str, Callable[..., Any]] = {
    RUN_AND_SAVE_RNG_STATE: run_and_save_rng_state,
    RUN_WITH_RNG_STATE: run_with_rng_state,
}
# What the core's Python wrapper calls directly (`wrapper.runtime.resolve_op`).
DIRECT: dict[str, Callable[..., Any]] = {RESTRIDE: restride, **UNREGISTERED}
