"""Where a cold first call's time goes, without a profiler's overhead: exclusive wall time of
polyduct's compile phases (the graph compiler, the Triton backend's codegen and load, and each
generated launcher's first-launch steps) and Dynamo's own `dynamo_timed` metrics, which also
break Inductor's compile down.

`install()` wraps the functions once, before the first call; `report()` after it. A phase's time
excludes the traced phases it calls (a tuning benchmark's compiles count as compiles), so the
phases and the untraced rest add up to the first call.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

# The generated launchers' steps of a first launch (module globals of each kernel module)
LAUNCH_STEPS = {
    "_from_worker": "wait for compile worker",
    "warmup": "Triton compile or cache load",
    "_static": "launcher load",
    "_tune": "tuning benchmark",
    "_run": "launch",
}


class Tracer:
    """Exclusive seconds and calls per phase name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[float] = []  # time spent in traced callees, per open phase

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(fn, "__traced__", False):
            return fn

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            self._stack.append(0.0)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                inner = self._stack.pop()
                if self._stack:
                    self._stack[-1] += spent
                self.seconds[name] = self.seconds.get(name, 0.0) + spent - inner
                self.calls[name] = self.calls.get(name, 0) + 1

        traced.__traced__ = True  # type: ignore[attr-defined]
        return traced


TRACER = Tracer()
_DYNAMO_BEFORE: dict[str, int] = {}


def install() -> None:
    """Trace polyduct's phases (when its Triton backend is installed) and mark Dynamo's metrics."""
    from torch._dynamo.utils import compilation_time_metrics

    _DYNAMO_BEFORE.update({k: len(v) for k, v in compilation_time_metrics.items()})
    try:
        from polyduct.pipeline import Compilation
        from polyduct_triton.backend import TritonBackend
    except ImportError:
        return
    Compilation.compile_graph = TRACER.wrap("compile_graph", Compilation.compile_graph)  # type: ignore[method-assign]
    TritonBackend.codegen = TRACER.wrap("triton codegen", TritonBackend.codegen)
    load = TritonBackend.load

    def load_traced(self: Any, sources: Any) -> Any:
        launches = load(self, sources)
        for fn in launches.values():  # each kernel module's first-launch steps
            namespace = fn.__globals__
            for name, phase in LAUNCH_STEPS.items():
                if name in namespace:
                    namespace[name] = TRACER.wrap(phase, namespace[name])
        return launches

    TritonBackend.load = TRACER.wrap("triton load", load_traced)


def report(total: float) -> dict[str, Any]:
    """Phases of the first call that took `total` seconds: polyduct's (rest: Dynamo, AOTAutograd,
    the wrapper and the kernels' run) and Dynamo's metrics recorded since `install`."""
    from torch._dynamo.utils import compilation_time_metrics

    dynamo = {
        k: round(sum(v[_DYNAMO_BEFORE.get(k, 0):]), 4)
        for k, v in compilation_time_metrics.items() if len(v) > _DYNAMO_BEFORE.get(k, 0)
    }
    phases = {k: round(v, 4) for k, v in TRACER.seconds.items()}
    if phases:
        phases["rest"] = round(total - sum(TRACER.seconds.values()), 4)
    return {"phases": phases, "calls": dict(TRACER.calls), "dynamo": dynamo}


# Inductor's compile as Dynamo times it: the graph compiler (lowering, scheduling, code generation,
# waiting for its Triton compiles, loading) and the first run's autotuning benchmarks.
INDUCTOR_COMPILE = ("compile_fx_inner", "CachingAutotuner.benchmark_all_configs")
NOT_COMPILE = ("launch", "rest")  # polyduct phases that run the graph rather than compile it


def compile_seconds(result: dict[str, Any]) -> float | None:
    """The backend's compile time within one first call (`report`'s result): polyduct's traced
    phases, or Inductor's `dynamo_timed` ones; None when neither compiled."""
    phases = result.get("phases") or {}
    if phases:
        return float(sum(v for k, v in phases.items() if k not in NOT_COMPILE))
    dynamo = result.get("dynamo") or {}
    if INDUCTOR_COMPILE[0] not in dynamo:
        return None
    return float(sum(dynamo.get(k, 0.0) for k in INDUCTOR_COMPILE))
