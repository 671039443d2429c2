"""The contract between the scheduler and a kernel backend: `KernelSpec` in, source and callable out.

A `KernelSpec` is one fused group: an outer iteration space (`ranges`), an optional inner
reduction space (`reduction_ranges`), and a sequence of `Stage`s run, in order, for every point of
the outer space. Stage bodies are define-by-run Python functions `body(ops, x, r)` that call the op
protocol on the handler they are given: `x` are the outer index expressions, `r` the reduction ones
(empty for `Stage.kind == "outer"`). A backend traces each body with its own ops handler.

Stage kinds:
- `outer`: runs once per outer point; `r` is empty; writes with `ops.store`.
- `inner`: runs for every (outer, reduction) point; writes with `ops.store`.
- `reduce`: runs for every reduction point and calls `ops.reduction`; each result goes unchanged to
  `ops.store_reduction(name, index, value)`, written once per outer point after the loop. Any
  arithmetic on a reduced value happens in a later stage that loads it. Where the backend
  declares `Capabilities.prologues`, a reduce or inner stage may begin with pointwise ops that
  `ops.store` at the point (x, r): every such stage computes and stores the same values.
- `scan` / `sort`: calls `ops.scan` / `ops.sort` once over the reduction dim (the values depend on
  `r`), then computes on the per-element results and writes with `ops.store`.

Buffers: `KernelSpec.buffers` lists every buffer the bodies touch, in argument order. A buffer with
role `local` lives only inside the kernel: it is written by `store_reduction` in one stage and read
by `load` in later stages, and holds one value per outer point (a load of it ignores its index).
Indexes of all other buffers are flat element offsets from the start of the tensor passed for it.

Calling convention of a compiled kernel: `kernel(*tensors, *sizes)`: one tensor per non-local buffer
in `buffers` order, then one Python int per symbol of `size_args`. The kernel computes its own launch
grid from these; nothing else is passed. Argument names in generated source come from `arg_names`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import sympy
import torch

from polyduct.errors import IncompleteBackend, PackagingUnsupported
from polyduct.ops import OpHandler, missing_ops

Role = Literal["in", "out", "inout", "local"]
StageKind = Literal["outer", "inner", "reduce", "scan", "sort"]
KernelKind = Literal["pointwise", "reduction", "scan", "sort"]
Body = Callable[[OpHandler[Any], Sequence[sympy.Expr], Sequence[sympy.Expr]], None]
KernelFn = Callable[..., None]

_ARG_PREFIX: Mapping[Role, str] = {"in": "in_ptr", "out": "out_ptr", "inout": "in_out_ptr"}


@dataclass(frozen=True, slots=True)
class KernelBuffer:
    """A buffer as a kernel sees it: the name its body uses, dtype, role and addressable extent."""

    name: str
    dtype: torch.dtype
    role: Role
    numel: sympy.Expr  # elements addressable from the tensor's first element (bounds, locals)


@dataclass(frozen=True, slots=True)
class Stage:
    """One loop of a kernel: a define-by-run body and how it iterates (see the module docstring)."""

    kind: StageKind
    body: Body


@dataclass(frozen=True)
class KernelSpec:
    """One fused group of loop bodies, ready for a backend's codegen."""

    name: str
    ranges: tuple[sympy.Expr, ...]
    reduction_ranges: tuple[sympy.Expr, ...]
    stages: tuple[Stage, ...]
    buffers: tuple[KernelBuffer, ...]
    size_args: tuple[sympy.Symbol, ...] = ()
    device: str = "cpu"

    @property
    def kind(self) -> KernelKind:
        kinds = {stage.kind for stage in self.stages}
        for kind in ("sort", "scan"):
            if kind in kinds:
                return kind
        return "reduction" if self.reduction_ranges else "pointwise"

    @property
    def args(self) -> tuple[KernelBuffer, ...]:
        """The buffers passed as arguments (every non-local buffer), in call order."""
        return tuple(b for b in self.buffers if b.role != "local")

    def arg_names(self) -> dict[str, str]:
        """Buffer name -> argument name (`in_ptrN`, `out_ptrN`, `in_out_ptrN`; sizes `ksN`)."""
        counters: dict[str, int] = {}
        names: dict[str, str] = {}
        for buf in self.args:
            prefix = _ARG_PREFIX[buf.role]
            names[buf.name] = f"{prefix}{counters.get(prefix, 0)}"
            counters[prefix] = counters.get(prefix, 0) + 1
        for i, sym in enumerate(self.size_args):
            names[sym.name] = f"ks{i}"
        return names

    def buffer(self, name: str) -> KernelBuffer:
        """The buffer called `name`."""
        for buf in self.buffers:
            if buf.name == name:
                return buf
        raise KeyError(f"kernel {self.name!r} has no buffer {name!r}")


@dataclass(frozen=True, slots=True)
class KernelSource:
    """A generated kernel: its name, the backend that made it, and self-contained source text."""

    name: str
    backend: str
    source: str


@dataclass(frozen=True)
class Capabilities:
    """What a kernel backend declares it can do; conformance skips are derived from this alone."""

    devices: frozenset[str]
    dtypes: frozenset[torch.dtype]
    unsupported: Mapping[str, str] = field(default_factory=dict)  # op -> reason
    dynamic_shapes: bool = True
    # device type -> the longest dim a generated sort (sort, topk) handles; past it, or at a
    # symbolic length, the sort is a library call (the fallback report says why). Absent: no limit.
    sort_limits: Mapping[str, int] = field(default_factory=dict)
    # Whether a kernel may write an output over a dying input it reads (in-place reuse). Sound
    # where every output is computed per element, member by member; a backend that computes its
    # outputs one after another, each over the whole range (Halide's pipeline outputs), declares
    # False: there an output written first would overwrite what a later one still reads.
    inplace: bool = True
    # Whether a `reduce` or `inner` stage may begin with pointwise ops that `ops.store` at its
    # (outer, reduction) point: a prologue every stage computes again (a residual add and the norm
    # that reads it, `scheduling.fusion`). A backend that builds a reduce stage from its reductions
    # alone (Halide's) declares False.
    prologues: bool = True


class KernelBackend(ABC):
    """A kernel backend: target facts as class data, an ops handler class, codegen and loading.

    `codegen` turns one `KernelSpec` into self-contained source; `load` compiles (or fetches from the
    cache) the kernels of one graph together and returns callables that follow the calling
    convention of `polyduct.kernel`.
    """

    name: ClassVar[str]
    caps: ClassVar[Capabilities]
    ops_cls: ClassVar[type]

    @abstractmethod
    def codegen(self, spec: KernelSpec) -> KernelSource:
        """Source for `spec`; deterministic (the same spec gives the same bytes)."""

    @abstractmethod
    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        """Compile or fetch from the cache every kernel in `sources`; name -> callable."""

    def settle(self) -> None:
        """Wait for work the backend does in the background for kernels it loaded (compiles,
        tuning candidates), so that their next launches finish tuning; called before CUDA graphs
        record a compiled graph's launches (polyduct.cudagraphs). Default: nothing to wait for."""
        return

    def package(self, sources: Sequence[KernelSource]) -> dict[str, bytes]:
        """The compiled files of `sources` (as `load` builds them), by relative path, for an AOT
        package (polyduct.aot): `load_packaged` loads the kernels from them with no compiler.
        A backend that cannot load prebuilt kernels keeps this default, which refuses."""
        raise PackagingUnsupported(self.name)

    def load_packaged(self, sources: Sequence[KernelSource], files: Path) -> dict[str, KernelFn]:
        """`load` from the files `package` returned, written under the directory `files`
        (which is removed once this returns: what it loads must not need it afterwards)."""
        raise PackagingUnsupported(self.name)


def check_complete(backend: type[KernelBackend]) -> None:
    """Refuse a backend whose ops handler misses ops it has not declared unsupported."""
    missing = [op for op in missing_ops(backend.ops_cls) if op not in backend.caps.unsupported]
    if missing:
        raise IncompleteBackend(backend.name, missing)
