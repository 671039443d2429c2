"""PyTorch's own OpInfo samples, each compiled alone through polyduct and compared with eager.

`opinfo_cases()` walks `torch.testing._internal.common_methods_invocations.op_db` and keeps every
OpInfo whose aten op the frontend lowers (some overload of `aten.<aten_name>` in the core lowering
table). Each kept OpInfo gives up to `samples` sample inputs per dtype (float32 and int64 where the
OpInfo supports them). `run_case` compiles `op(sample)` with `torch.compile(backend="polyduct",
options={"kernels": backend})` and compares every tensor output with eager: exact for integers and
booleans, close (NaN equal to NaN) for floats (`LOOSER` names ops with a wider tolerance), and for
`topk` the values exactly and the indices by the values they pick (eager's order among equal
values is unspecified). A sample eager itself refuses is skipped.

The full sweep is slow (one compile per sample): `python -m bench.opinfo --backend cpp`. The tests
run a small fixed subset.
"""

from __future__ import annotations

import functools
import math
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

DTYPES = (torch.float32, torch.int64)


@dataclass(frozen=True)
class OpInfoCase:
    """One sample of one OpInfo: `index` is its position in the OpInfo's sample list."""

    op: str
    variant: str
    dtype: torch.dtype
    index: int

    @property
    def id(self) -> str:
        name = self.op if not self.variant else f"{self.op}.{self.variant}"
        return f"{name}-{str(self.dtype).removeprefix('torch.')}-{self.index}"


@dataclass(frozen=True)
class OpInfoResult:
    """The outcome of one case: "pass", "fail" (wrong result or compile error) or "skip"."""

    case: OpInfoCase
    status: str
    detail: str = ""


# memo of torch's fixed OpInfo table: not process state
@functools.cache
def _op_db() -> dict[tuple[str, str], Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return {(info.name, info.variant_test_name): info for info in op_db}


def _lowered_packets(decomposed: bool) -> set[str]:
    """aten packets the frontend lowers; with `decomposed`, also those its decomposition table
    rewrites (into ops it lowers or calls)."""
    from polyduct.lowering.decompositions import decomposition_table
    from polyduct.lowering.table import core_lowerings

    names = [*core_lowerings(), *(str(op) for op in decomposition_table() if decomposed)]
    return {name.split(".")[1] for name in names if name.startswith("aten.")}


def _elementwise_or_reduction(info: Any) -> bool:
    """Unary, binary and reduction OpInfos are all swept with `decomposed`, lowered or not (an
    op without a lowering runs as a library call: the case checks that it still compiles)."""
    from torch.testing._internal.opinfo.core import (
        BinaryUfuncInfo,
        ReductionOpInfo,
        UnaryUfuncInfo,
    )

    return isinstance(info, (UnaryUfuncInfo, BinaryUfuncInfo, ReductionOpInfo))


def _aten_name(info: Any) -> str:
    return str(getattr(info, "aten_name", None) or info.name).replace("nn.functional.", "")


def opinfo_cases(
    samples: int = 2, dtypes: tuple[torch.dtype, ...] = DTYPES, decomposed: bool = False
) -> list[OpInfoCase]:
    """Every case of the sweep, in op_db order: lowered OpInfos x dtypes x `samples` samples
    (`decomposed`: OpInfos of decomposed ops, and every unary, binary and reduction OpInfo,
    too)."""
    lowered = _lowered_packets(decomposed)
    cases: list[OpInfoCase] = []
    for (name, variant), info in _op_db().items():
        if _aten_name(info) not in lowered and not (decomposed and _elementwise_or_reduction(info)):
            continue
        for dtype in dtypes:
            if dtype not in info.supported_dtypes("cpu"):
                continue
            count = min(samples, len(_samples(info, dtype, samples)))
            cases.extend(OpInfoCase(name, variant, dtype, i) for i in range(count))
    return cases


def _samples(info: Any, dtype: torch.dtype, limit: int) -> list[Any]:
    torch.manual_seed(0)
    found: list[Any] = []
    try:
        for sample in info.sample_inputs("cpu", dtype, requires_grad=False):
            found.append(sample)
            if len(found) == limit:
                break
    except Exception:  # noqa: BLE001 - an OpInfo that cannot make samples has no cases
        return []
    return found


def _split(sample: Any) -> tuple[list[torch.Tensor], Callable[[list[Any]], Any]]:
    """The sample's tensors (the compiled function's inputs) and how to put them back."""
    flat, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    slots = [i for i, leaf in enumerate(flat) if isinstance(leaf, torch.Tensor)]

    def rebuild(tensors: list[Any]) -> Any:
        leaves = list(flat)
        for slot, tensor in zip(slots, tensors, strict=True):
            leaves[slot] = tensor
        return pytree.tree_unflatten(leaves, spec)

    return [flat[i] for i in slots], rebuild


def _clone(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.clone() for t in tensors]


# Ops whose float results are ill-conditioned on OpInfo's samples (polygamma next to its poles):
# (rtol, atol) in place of the default.
LOOSER: dict[str, tuple[float, float]] = {
    "polygamma": (1e-4, 1e-5),
    "special.polygamma": (1e-4, 1e-5),
}
# Ops whose second result (indices) may order equal values either way: eager's own order among
# ties is unspecified, so the indices are checked to pick the values, not compared.
ANY_TIE_ORDER = frozenset({"topk"})
# Ops whose values are uninitialised memory: only shapes, strides and dtypes are compared.
UNINITIALISED = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided"}
)


def _check_indices(inp: torch.Tensor, got: Any, want: Any, dim: int) -> None:
    values, indices = got
    torch.testing.assert_close(values, want[0], equal_nan=True, rtol=0, atol=0)
    picked = inp.gather(dim, indices) if inp.dim() else inp.reshape(indices.shape)
    torch.testing.assert_close(picked, values, equal_nan=True, rtol=0, atol=0)


def _compare_layouts(got: Any, want: Any) -> None:
    for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want), strict=True):
        layout = (g.shape, g.stride(), g.dtype)
        if layout != (w.shape, w.stride(), w.dtype):
            raise AssertionError(f"got {layout}, eager gives {(w.shape, w.stride(), w.dtype)}")


def _compare(got: Any, want: Any, tol: tuple[float, float] = (1.3e-5, 1e-5)) -> None:
    got_flat, want_flat = pytree.tree_leaves(got), pytree.tree_leaves(want)
    if len(got_flat) != len(want_flat):
        raise AssertionError(f"{len(got_flat)} outputs, eager gives {len(want_flat)}")
    for g, w in zip(got_flat, want_flat, strict=True):
        if not isinstance(w, torch.Tensor):
            if g != w and not (isinstance(w, float) and math.isnan(w) and math.isnan(g)):
                raise AssertionError(f"got {g!r}, eager gives {w!r}")
            continue
        exact = not (w.dtype.is_floating_point or w.dtype.is_complex)
        rtol, atol = (0.0, 0.0) if exact else tol
        torch.testing.assert_close(g, w, equal_nan=True, rtol=rtol, atol=atol)


def run_case(case: OpInfoCase, backend: str) -> OpInfoResult:
    """Compile the case's sample with kernel backend `backend` and compare it with eager."""
    info = _op_db()[(case.op, case.variant)]
    sample = _samples(info, case.dtype, case.index + 1)[case.index]
    tensors, rebuild = _split(sample)
    op = info.op

    def program(*args: Any) -> Any:
        inp, pos, kw = rebuild(list(args))
        return op(inp, *pos, **kw)

    try:
        want = program(*_clone(tensors))
    except Exception as exc:  # noqa: BLE001 - eager refuses this sample: nothing to compare
        return OpInfoResult(case, "skip", f"eager raises {type(exc).__name__}")
    torch._dynamo.reset()
    compiled = torch.compile(program, backend="polyduct", options={"kernels": backend})
    try:
        got = compiled(*_clone(tensors))
        if case.op in UNINITIALISED:
            _compare_layouts(got, want)
        elif case.op in ANY_TIE_ORDER:
            _, pos, kw = rebuild(tensors)
            dim = pos[1] if len(pos) > 1 else kw.get("dim", -1)
            _check_indices(tensors[0], got, want, dim)
        else:
            _compare(got, want, LOOSER.get(case.op, (1.3e-5, 1e-5)))
    except Exception as exc:  # noqa: BLE001 - any failure is this case's result
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return OpInfoResult(case, "fail", detail[:2000])
    return OpInfoResult(case, "pass")


def run_cases(cases: list[OpInfoCase], backend: str) -> Iterator[OpInfoResult]:
    """`run_case` over `cases`, in order."""
    for case in cases:
        yield run_case(case, backend)
