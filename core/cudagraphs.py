"""CUDA graphs around compiled graphs: `torch.compile(mode="reduce-overhead")` or `cudagraphs`.

`CudaGraphed` wraps one compiled graph's callable. Per input-size set (the shape, stride, dtype
and device of every tensor input and the value of every other input) its first `WARMUP` calls
run plainly: a backend's first launches compile, and Triton's tune, there (`prepare`, called
before the last warm-up, lets background compiles finish so that the tuning is done then: a
CUDA graph records launches, never a compile or a benchmark). Then one call records the graph's
launches into a `torch.cuda.CUDAGraph`, and every later call copies its inputs into the
recording's static input buffers and replays it.

Parameters and buffers (`nn.Parameter`s, and tensors Dynamo marks as static: a module's buffers,
`torch._dynamo.mark_static_address`) are recorded in place, never copied; each call checks they
are the same memory, and records the set again where one is not. Outputs are copied out of the
recording's memory after every replay, so a replay never overwrites a tensor the caller holds;
the copies keep each output's strides and storage offset, outputs that share memory share it
again, and an output that is a view of an input is that view of the caller's input.

A call runs plainly, and the graph says why once in the log, where recording is unsafe: an input
that is not a CUDA tensor (a CPU program), or a recording that raises (a host synchronisation,
a CPU op); that input-size set is never recorded again.
"""

from __future__ import annotations

import logging
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import torch

WARMUP: Final = 2
MAX_RECORDS: Final = 3  # recordings of one input-size set before it runs plainly for good
LOG = logging.getLogger("polyduct.cudagraphs")
"""Says once per graph why it runs without CUDA graphs."""

_Key = tuple[Any, ...]
# How an output leaves a replay (`_Recorded.plan`): as it is (not a tensor), a copy of its own
# memory, a view of an input, or a view into a copy of memory it shares with other outputs.
_VALUE, _OWN, _INPUT, _SHARED = range(4)


@dataclass
class _Recorded:
    """One input-size set's graph: its inputs (static buffers and in-place tensors), the static
    buffers refilled before each replay, its outputs, and how each output is copied out."""

    graph: torch.cuda.CUDAGraph
    inputs: list[Any]
    copied: list[tuple[torch.Tensor, int]]  # (static buffer, argument position)
    in_place: list[Any]  # the tensors recorded in place, at the positions of `CudaGraphed.fixed`
    outputs: list[Any]
    plan: list[tuple[int, int]]  # per output: (kind, input position or shared-memory group)


@final
class CudaGraphed:
    """`fn` (a compiled graph's callable, inputs positional, outputs a list) with CUDA graphs;
    `prepare()` runs before the last warm-up call of each input-size set; `static`: positions of
    inputs that keep their memory from call to call (AOTAutograd's static inputs: parameters and
    buffers), recorded in place as the inputs `_is_static` finds are.

    Counts for tests and reports: `recorded` (graphs recorded), `replays`, `plain` (plain calls,
    warm-ups and fallbacks included).
    """

    def __init__(
        self,
        fn: Callable[..., Sequence[Any]],
        name: str,
        prepare: Callable[[], None] | None = None,
        static: frozenset[int] = frozenset(),
        unsafe: str | None = None,
    ) -> None:
        self.fn, self.name, self.prepare, self.static = fn, name, prepare, static
        self.unsafe = unsafe  # why the graph must never be recorded (`host_sync`), if so
        self._graphs: dict[_Key, _Recorded | None] = {}  # None: never recorded (unsafe)
        self._seen: dict[_Key, int] = {}
        self._records: dict[_Key, int] = {}
        self._pool: Any = None  # one memory pool for all of this graph's recordings
        self._stream: Any = None  # the side stream every recording is made on
        # one call at a time records or replays: a replay fills the static inputs, launches, and
        # copies the outputs out, and another thread's replay must not come in between
        self._lock = threading.Lock()
        self._said = False
        # positions recorded in place, and the others (from the first call: AOTAutograd passes
        # parameters and buffers at the same positions every call)
        self.fixed: list[int] | None = None
        self.varying: list[int] = []
        self.recorded = self.replays = self.plain = 0

    def __call__(self, *args: Any) -> list[Any]:
        with self._lock:
            return self._call(args)

    def _call(self, args: Sequence[Any]) -> list[Any]:
        if self.unsafe is not None:
            self._fallback(None, self.unsafe)
            return self._plain(args)
        if self.fixed is None:
            self.fixed = [
                i
                for i, a in enumerate(args)
                if _is_static(a) or (i in self.static and isinstance(a, torch.Tensor))
            ]
            self.varying = [i for i in range(len(args)) if i not in self.fixed]
        key = _key(args, self.varying)
        if key is None:
            self._fallback(None, "an input is not a CUDA tensor")
            return self._plain(args)
        recorded = self._graphs.get(key)
        if recorded is not None and _same_in_place(recorded, args, self.fixed):
            return self._replay(recorded, args)
        if key in self._graphs and recorded is None:
            return self._plain(args)
        seen = self._seen[key] = self._seen.get(key, 0) + 1
        if seen <= WARMUP:
            if seen == WARMUP and self.prepare is not None:
                self.prepare()
            return self._plain(args)
        recorded = self._record(key, args)
        return self._plain(args) if recorded is None else self._replay(recorded, args)

    def _plain(self, args: Sequence[Any]) -> list[Any]:
        self.plain += 1
        return list(self.fn(*args))

    def _replay(self, recorded: _Recorded, args: Sequence[Any]) -> list[Any]:
        for static, i in recorded.copied:
            static.copy_(args[i])
        recorded.graph.replay()
        self.replays += 1
        return _copy_out(recorded, args)

    def _record(self, key: _Key, args: Sequence[Any]) -> _Recorded | None:
        fixed = set(self.fixed or ())
        if any(isinstance(args[i], torch.Tensor) and args[i].device.type != "cuda" for i in fixed):
            self._fallback(key, "a parameter or buffer is not a CUDA tensor")
            return None
        self._records[key] = self._records.get(key, 0) + 1
        if self._records[key] > MAX_RECORDS:
            self._fallback(key, "parameters or buffers move to other memory from call to call")
            return None
        inputs = [a if i in fixed else _static_copy(a) for i, a in enumerate(args)]
        try:
            graph, outputs = self._capture(inputs)
        except Exception as e:  # noqa: BLE001 - any failure to record means: run plainly
            self._fallback(key, f"recording failed ({type(e).__name__}: {e})")
            return None
        if any(isinstance(o, torch.Tensor) and o.device.type != "cuda" for o in outputs):
            self._fallback(key, "an output is not a CUDA tensor")
            return None
        self.recorded += 1
        copied = [
            (s, i) for i, s in enumerate(inputs) if i not in fixed and isinstance(s, torch.Tensor)
        ]
        in_place = [inputs[i] for i in sorted(fixed)]
        recorded = _Recorded(graph, inputs, copied, in_place, outputs, _plan(inputs, outputs))
        self._graphs[key] = recorded
        return recorded

    def _capture(self, inputs: Sequence[Any]) -> tuple[torch.cuda.CUDAGraph, list[Any]]:
        """`fn(*inputs)` recorded, and its outputs. As Inductor's CUDA graphs do,
        one plain call runs on the side stream first: a stream's first use (cuBLAS workspaces,
        ...) may not happen inside a recording."""
        if self._pool is None:
            self._pool, self._stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream()
        stream = self._stream
        torch.cuda.synchronize()
        stream.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(stream):
                self.fn(*inputs)
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(
                graph, pool=self._pool, stream=stream, capture_error_mode="thread_local"
            ):
                outputs = list(self.fn(*inputs))
            return graph, outputs
        finally:
            torch.cuda.current_stream().wait_stream(stream)

    def _fallback(self, key: _Key | None, why: str) -> None:
        if key is not None:
            self._graphs[key] = None
        if not self._said:
            self._said = True
            LOG.info("%s runs without CUDA graphs: %s", self.name, why)


HOST_SYNC_OPS = frozenset({
    "aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default",
    "aten.equal.default", "aten.is_nonzero.default", "aten._unique2.default",
    "aten.unique_dim.default", "aten.unique_consecutive.default",
    "aten.repeat_interleave.Tensor",
    "cond", "while_loop",  # higher-order ops run in eager read their predicate on the host
})
"""aten ops (and higher-order ops) that wait for the GPU to hand a value to the host."""


def host_sync(gm: torch.fx.GraphModule) -> str | None:
    """Why recording `gm` would fail, found before recording: an op that synchronises with the
    host (`.item()`, `nonzero`) or a size known only at run time. A recording that fails leaves
    torch's CUDA random generator in its capture state, so such graphs are never tried."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if str(node.target) in HOST_SYNC_OPS:
            return f"{node.target} synchronises with the host"
        if free_unbacked_symbols(node.meta.get("val")):
            return f"{node.name} has a size known only at run time"
    return None


def _is_static(arg: Any) -> bool:
    """Whether `arg` keeps its memory from call to call: a parameter, or a tensor Dynamo marks
    static (a module's buffers, `mark_static_address`), as Inductor's CUDA graphs see them."""
    return isinstance(arg, torch.nn.Parameter) or (
        isinstance(arg, torch.Tensor) and getattr(arg, "_dynamo_static_input_type", None) is not None
    )


def _key(args: Sequence[Any], varying: Sequence[int]) -> _Key | None:
    """The input-size set of `args` at the positions `varying` (tensors recorded in place are
    checked by `_same_in_place`), or None if a tensor input is not on a CUDA device."""
    parts: list[Any] = []
    for i in varying:
        a = args[i]
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


def _same_in_place(recorded: _Recorded, args: Sequence[Any], fixed: Sequence[int]) -> bool:
    """Whether every input recorded in place is the same tensor (or memory and layout) again."""
    now = [args[i] for i in fixed]
    if all(map(operator.is_, now, recorded.in_place)):
        return True
    return all(
        isinstance(a, torch.Tensor)
        and a.data_ptr() == s.data_ptr()
        and a.shape == s.shape
        and a.stride() == s.stride()
        and a.dtype == s.dtype
        for a, s in zip(now, recorded.in_place, strict=True)
    )


def _plan(inputs: Sequence[Any], outputs: Sequence[Any]) -> list[tuple[int, int]]:
    """How each output is copied out after a replay (see `_Recorded.plan`)."""
    by_storage = {
        a.untyped_storage().data_ptr(): i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)
    }
    sharing: dict[int, int] = {}
    for o in outputs:
        if isinstance(o, torch.Tensor):
            ptr = o.untyped_storage().data_ptr()
            sharing[ptr] = sharing.get(ptr, 0) + 1
    plan = []
    for o in outputs:
        if not isinstance(o, torch.Tensor):
            plan.append((_VALUE, 0))
            continue
        ptr = o.untyped_storage().data_ptr()
        if ptr in by_storage:
            plan.append((_INPUT, by_storage[ptr]))
        elif sharing[ptr] == 1 and o.storage_offset() == 0 and o.clone().stride() == o.stride():
            plan.append((_OWN, 0))  # a dense tensor: `clone` keeps its strides
        else:
            plan.append((_SHARED, ptr))
    return plan


def _copy_out(recorded: _Recorded, args: Sequence[Any]) -> list[Any]:
    """The outputs of the replay just run, in memory no later replay writes."""
    shared: dict[int, Any] = {}
    result = []
    for o, (kind, ref) in zip(recorded.outputs, recorded.plan, strict=True):
        if kind == _OWN:
            result.append(o.clone())
        elif kind == _VALUE:
            result.append(o)
        elif kind == _INPUT:
            base, static = args[ref], recorded.inputs[ref]
            offset = base.storage_offset() + o.storage_offset() - static.storage_offset()
            result.append(base.as_strided(o.size(), o.stride(), offset))
        else:
            if ref not in shared:
                storage = o.untyped_storage()
                shared[ref] = torch.empty(
                    storage.nbytes(), dtype=torch.uint8, device=o.device
                ).untyped_storage()
                shared[ref].copy_(storage)
            view = torch.empty(0, dtype=o.dtype, device=o.device)
            result.append(view.set_(shared[ref], o.storage_offset(), o.size(), o.stride()))
    return result
