"""CUDA graphs around compiled graphs: `torch.compile(mode="reduce-overhead")` or `cudagraphs`.

`CudaGraphed` wraps one compiled graph's callable. Per input-size set (the shape, stride, dtype
and device of every tensor input and the value of every other input) its first `WARMUP` calls
run plainly (a backend's first launches compile, and Triton's tune, there; a CUDA graph records
launches, not compiles), then one call records the graph's launches into a `torch.cuda.CUDAGraph`
with static input buffers, and every later call copies its inputs into those buffers and replays
the graph. Parameters and buffers (inputs that are `nn.Parameter`s, or the very tensor recorded)
are recorded in place and not copied; if one comes back as another tensor the set is recorded
again. Outputs are copied out of the graph's memory on every call, so a replay never overwrites a
tensor the caller holds.

A call runs plainly, and the graph says why once in the log, where recording is unsafe: an input
that is not a CUDA tensor (a CPU program), or a recording that raises (a host synchronisation,
a CPU op); that input-size set is never recorded again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import torch

WARMUP: Final = 2
LOG = logging.getLogger("polyduct.cudagraphs")
"""Says once per graph why it runs without CUDA graphs."""

_Key = tuple[Any, ...]


@dataclass
class _Recorded:
    """One input-size set's graph: its static inputs, which are recorded in place, its outputs."""

    graph: torch.cuda.CUDAGraph
    inputs: list[Any]
    in_place: list[bool]
    outputs: list[Any]


@final
class CudaGraphed:
    """`fn` (a compiled graph's callable, inputs positional, outputs a list) with CUDA graphs.

    Counts for tests and reports: `recorded` (graphs recorded), `replays`, `plain` (plain calls,
    warm-ups and fallbacks included).
    """

    def __init__(self, fn: Callable[..., Sequence[Any]], name: str) -> None:
        self.fn, self.name = fn, name
        self._graphs: dict[_Key, _Recorded | None] = {}  # None: never recorded (unsafe)
        self._seen: dict[_Key, int] = {}
        self._pool: Any = None  # one memory pool for all of this graph's recordings
        self._said = False
        self.recorded = self.replays = self.plain = 0

    def __call__(self, *args: Any) -> list[Any]:
        key = _key(args)
        if key is None:
            self._fallback(None, "an input is not a CUDA tensor")
            return self._plain(args)
        recorded = self._graphs.get(key)
        if recorded is not None and _same_in_place(recorded, args):
            return self._replay(recorded, args)
        if key in self._graphs and recorded is None:
            return self._plain(args)
        self._seen[key] = self._seen.get(key, 0) + 1
        if self._seen[key] <= WARMUP:
            return self._plain(args)
        recorded = self._record(key, args)
        return self._plain(args) if recorded is None else self._replay(recorded, args)

    def _plain(self, args: Sequence[Any]) -> list[Any]:
        self.plain += 1
        return list(self.fn(*args))

    def _replay(self, recorded: _Recorded, args: Sequence[Any]) -> list[Any]:
        for static, arg, in_place in zip(recorded.inputs, args, recorded.in_place, strict=True):
            if isinstance(arg, torch.Tensor) and not in_place:
                static.copy_(arg)
        recorded.graph.replay()
        self.replays += 1
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in recorded.outputs]

    def _record(self, key: _Key, args: Sequence[Any]) -> _Recorded | None:
        in_place = [isinstance(a, torch.nn.Parameter) for a in args]
        inputs = [_static_copy(a) if not p else a for a, p in zip(args, in_place, strict=True)]
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        try:
            with torch.cuda.graph(graph, pool=self._pool):
                outputs = list(self.fn(*inputs))
        except Exception as e:  # noqa: BLE001 - any failure to record means: run plainly
            self._graphs[key] = None
            self._fallback(key, f"recording failed ({type(e).__name__}: {e})")
            return None
        if any(isinstance(o, torch.Tensor) and o.device.type != "cuda" for o in outputs):
            self._graphs[key] = None
            self._fallback(key, "an output is not a CUDA tensor")
            return None
        self.recorded += 1
        recorded = _Recorded(graph, inputs, in_place, outputs)
        self._graphs[key] = recorded
        return recorded

    def _fallback(self, key: _Key | None, why: str) -> None:
        if key is not None:
            self._graphs[key] = None
        if not self._said:
            self._said = True
            LOG.info("%s runs without CUDA graphs: %s", self.name, why)


def _key(args: Sequence[Any]) -> _Key | None:
    """The input-size set of `args`, or None if a tensor input is not on a CUDA device."""
    parts: list[Any] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.device.type != "cuda":
                return None
            parts.append((tuple(a.shape), a.stride(), a.dtype, a.device.index))
        else:
            parts.append(a)
    return tuple(parts)


def _static_copy(arg: Any) -> Any:
    """A buffer of `arg`'s exact layout holding its value (non-tensors as they are)."""
    if not isinstance(arg, torch.Tensor):
        return arg
    buf = torch.empty_strided(arg.size(), arg.stride(), dtype=arg.dtype, device=arg.device)
    return buf.copy_(arg)


def _same_in_place(recorded: _Recorded, args: Sequence[Any]) -> bool:
    """Whether every input recorded in place is the same tensor memory again."""
    return all(
        not p or s.data_ptr() == a.data_ptr()
        for s, a, p in zip(recorded.inputs, args, recorded.in_place, strict=True)
    )
