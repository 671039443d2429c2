"""Core handlers: dtype propagation, formatter, op counter, forwarding."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
import sympy
import torch

from polyduct.errors import IncompleteBackend
from polyduct.handlers.count import OpCounter
from polyduct.handlers.dtypes import DtypePropagation, compute_dtype, promote
from polyduct.handlers.format import format_body
from polyduct.handlers.forward import ForwardingHandler
from polyduct.kernel import Capabilities, KernelBackend, KernelSource, KernelSpec, check_complete
from polyduct.ops import OP_NAMES, OpHandler, missing_ops

FLOATS = (torch.float16, torch.float32, torch.float64)
INTS = (torch.int8, torch.int32, torch.int64)
# ops whose torch counterpart has another name or lives in torch.special
TORCH_NAME = {
    "mod": torch.fmod,
    "truediv": torch.div,
    "div_rn": torch.div,
    "mul_rn": torch.mul,
    "and_": torch.logical_and,
    "or_": torch.logical_or,
    "xor": torch.logical_xor,
    "lshift": torch.bitwise_left_shift,
    "rshift": torch.bitwise_right_shift,
    "igamma": torch.special.gammainc,
    "igammac": torch.special.gammaincc,
}


def _torch_fn(op: str) -> Any:
    if op in TORCH_NAME:
        return TORCH_NAME[op]
    return getattr(torch.special, op, None) or getattr(torch, op, None)


def _domain(op: str) -> tuple[torch.dtype, ...]:
    doc = getattr(OpHandler, op).__doc__ or ""
    if "Bool only" in doc:
        return (torch.bool,)
    if "Floats only" in doc:
        return FLOATS
    if "Ints and bool only" in doc:
        return (*INTS, torch.bool)
    return INTS if "Ints only" in doc else FLOATS + INTS


def _sample(dtype: torch.dtype) -> torch.Tensor:
    return (torch.arange(1, 5) % 3 + 1).to(dtype)


def _value_ops() -> list[str]:
    """Ops whose operands are all values (no dtype/name/index parameters) and torch has."""
    chosen = []
    for op in sorted(OP_NAMES - {"rand", "randn", "randint64", "where"}):  # other torch forms
        params = list(inspect.signature(getattr(OpHandler, op)).parameters.values())[1:]
        if all(p.annotation == "T" for p in params) and _torch_fn(op) is not None:
            chosen.append(op)
    return chosen


def test_every_op_has_its_own_rule() -> None:
    assert missing_ops(DtypePropagation) == []
    assert not [op for op in OP_NAMES if op not in vars(DtypePropagation)]


@pytest.mark.parametrize("op", _value_ops())
def test_dtype_rule_matches_torch(op: str) -> None:
    prop = DtypePropagation()
    arity = len(inspect.signature(getattr(OpHandler, op)).parameters) - 1
    checked = 0
    for dtype in _domain(op):
        args = [_sample(dtype) for _ in range(arity)]
        try:
            want = _torch_fn(op)(*args)
        except (RuntimeError, TypeError, NotImplementedError):
            continue  # torch has no kernel for this dtype (e.g. some special functions on f16)
        wants = want if isinstance(want, tuple) else (want,)
        got = getattr(prop, op)(*([dtype] * arity))
        gots = got if isinstance(got, tuple) else (got,)
        assert gots == tuple(w.dtype for w in wants), f"{op} on {dtype}"
        checked += 1
    assert checked or op == "polygamma", f"no dtype of {op}'s domain could be checked"


def test_structural_dtype_rules() -> None:
    prop = DtypePropagation({"a": torch.bfloat16})
    assert prop.load("a", sympy.Integer(0)) == torch.bfloat16  # storage dtype, not compute
    assert compute_dtype(torch.bfloat16) == torch.float32
    assert prop.polygamma(torch.int64, torch.float64) == torch.float64
    assert prop.where(torch.bool, torch.int16, torch.int16) == torch.int16
    assert prop.int_truediv(torch.int64, torch.int64) == torch.float32
    assert (
        prop.reduction(torch.float32, torch.float16, "welford_reduce", torch.float16)
        == (torch.float32,) * 3
    )
    assert prop.sort((torch.float32, torch.int64), (torch.float32, torch.int64), True, False) == (
        torch.float32,
        torch.int64,
    )
    assert prop.masked(torch.bool, lambda: prop.load("a", sympy.Integer(0)), 0.0) == torch.bfloat16
    assert prop.store("a", sympy.Integer(0), torch.bfloat16) is None
    assert promote(torch.int8, torch.float16, torch.int64) == torch.float16
    with pytest.raises(KeyError, match="unknown buffer 'b'"):
        prop.load("b", sympy.Integer(0))


class _Partial(DtypePropagation):
    exp = None  # type: ignore[assignment]


class _PartialBackend(KernelBackend):
    name: ClassVar[str] = "partial"
    caps: ClassVar[Capabilities] = Capabilities(frozenset({"cpu"}), frozenset({torch.float32}))
    ops_cls: ClassVar[type] = _Partial

    def codegen(self, spec: KernelSpec) -> KernelSource:
        raise NotImplementedError

    def load(self, sources: Sequence[KernelSource]) -> dict[str, Any]:
        raise NotImplementedError


def test_missing_op_is_named() -> None:
    assert missing_ops(_Partial) == ["exp"]
    with pytest.raises(IncompleteBackend, match=r"'partial' is missing 1 op\(s\): exp"):
        check_complete(_PartialBackend)


_NEW_OP_SCRIPT = """
import polyduct.ops as ops
def frobnicate(self, x0):
    "A new op no handler knows yet."
ops.OpHandler.frobnicate = frobnicate
ops.OP_NAMES = ops.OP_NAMES | {"frobnicate"}
try:
    import polyduct.handlers.dtypes
except Exception as err:
    print(type(err).__name__, err)
"""


def test_missing_dtype_rule_fails_at_import() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NEW_OP_SCRIPT], check=True, capture_output=True, text=True
    )
    assert done.stdout.strip() == (
        "IncompleteBackend backend 'dtype propagation' is missing 1 op(s): frobnicate"
    )


def _body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
    value = ops.load("in0", 8 * x[0] + r[0])
    total = ops.reduction(torch.float32, torch.float32, "sum", ops.exp(value))
    ops.store_reduction("out0", x[0], total)
    mask = ops.lt(ops.index_expr(x[0], torch.int64), ops.constant(2, torch.int64))
    shifted = ops.masked(mask, lambda: ops.load("in0", x[0] + 1), 0.0)
    ops.store("out1", x[0], shifted, "atomic_add")


def test_format_body_exact_text() -> None:
    text = format_body(_body, (sympy.Integer(4),), (sympy.Integer(8),))
    assert text == (
        "tmp0 = load(in0, r0 + 8*x0)\n"
        "tmp1 = exp(tmp0)\n"
        "tmp2 = reduction(torch.float32, torch.float32, sum, tmp1)\n"
        "store_reduction(out0, x0, tmp2)\n"
        "tmp3 = index_expr(x0, torch.int64)\n"
        "tmp4 = constant(2, torch.int64)\n"
        "tmp5 = lt(tmp3, tmp4)\n"
        "tmp6 = masked(tmp5, other=0.0):\n"
        "    tmp7 = load(in0, x0 + 1)\n"
        "    return tmp7\n"
        "store(out1, x0, tmp6, atomic_add)\n"
    )


def test_op_counter_standalone_counts_nested_ops() -> None:
    counter = OpCounter()
    _body(counter, (sympy.Symbol("x0"),), (sympy.Symbol("r0"),))
    assert counter.counts == {
        "load": 2,
        "exp": 1,
        "reduction": 1,
        "store_reduction": 1,
        "index_expr": 1,
        "constant": 1,
        "lt": 1,
        "masked": 1,
        "store": 1,
    }
    assert counter.total() == 10


def test_counter_and_forwarding_pass_results_through() -> None:
    inner = DtypePropagation({"in0": torch.float16})
    counter = OpCounter(ForwardingHandler(inner))
    value = counter.load("in0", sympy.Integer(0))
    assert counter.frexp(value) == (torch.float16, torch.int32)
    assert counter.eq(value, value) == torch.bool
    assert counter.masked(torch.bool, lambda: counter.sqrt(value), 0.0) == torch.float16
    assert counter.counts == {"load": 1, "frexp": 1, "eq": 1, "masked": 1, "sqrt": 1}
