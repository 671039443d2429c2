"""Eager's rounding of float16/bfloat16 results, kept when ops fuse.

Eager rounds every op's float16/bfloat16 result to its dtype; kernels compute such values in
float32 (docs/conventions.md). Left in float32 between fused ops, a value eager would round can
differ in its last bits, and one eager overflows stays finite: `nan_to_num(x ** -2)` of float16
0.003 is 65504 in eager (the power is inf) and inf fused without rounding (the power stays 111111
until the store rounds it). So the lowering rounds each op's low-precision lazy result once, as
eager does; an op that only moves or selects already-rounded values is exact and left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from polyduct.handlers.dtypes import LOW_PRECISION
from polyduct.ir import Expr, Lazy
from polyduct.ops import OpHandler

EXACT_OPS = frozenset(
    {
        # moving or selecting elements
        "alias",
        "as_strided",
        "cat",
        "clone",
        "contiguous",
        "copy",
        "diagonal",
        "embedding",
        "expand",
        "flip",
        "gather",
        "index",
        "index_select",
        "narrow",
        "permute",
        "repeat",
        "reshape",
        "roll",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "squeeze",
        "t",
        "transpose",
        "unbind",
        "unfold",
        "unsqueeze",
        "view",
        "_unsafe_view",
        "lift_fresh_copy",
        # a cast rounds already (to_dtype)
        "_to_copy",
        "convert_element_type",
        "to",
        # exact on rounded operands
        "abs",
        "fmax",
        "fmin",
        "maximum",
        "minimum",
        "neg",
        "relu",
        "sign",
    }
)
"""aten packets whose low-precision result needs no rounding: it is one of the operands' values
(already rounded), or exactly representable from them. Scalars an op brings in (a clamp bound, a
fill or pad value) are not rounded by the op set, so those ops are not listed."""


def packet(op: str) -> str:
    """`add` for `aten.add.Tensor`."""
    parts = op.split(".")
    return parts[1] if len(parts) > 1 and parts[0] in ("aten", "prims") else parts[0]


def round_result(result: Any, node: torch.fx.Node, op: str) -> Any:
    """`result` (a lowering's value, or a tuple of them) with each float16/bfloat16 lazy value
    rounded to its dtype, as eager rounds the result of the op `node` computes.

    A piece of a decomposed op whose users are all pieces of the same call is not rounded: eager
    computes that op in one kernel and rounds once (`torch.xlogy`'s log and product).
    """
    if not _low_precision(result) or packet(op) in EXACT_OPS:
        return result
    call = _call_of(node)
    if all(_call_of(u) == call for u in node.users):
        return result
    return _round_lazy(result)


def _low_precision(result: Any) -> bool:
    """Whether `result` holds a float16/bfloat16 lazy value (most lowerings' do not)."""
    if isinstance(result, (list, tuple)):
        return any(_low_precision(v) for v in result)
    return isinstance(result, Lazy) and result.dtype in LOW_PRECISION


def _call_of(node: torch.fx.Node) -> tuple[str, ...]:
    """The user-level call `node` is (a piece of): the traced call's name and target where
    AOTAutograd's decompositions recorded it, else the node itself."""
    sources = node.meta.get("from_node") or ()
    if not sources or node.meta.get("original_aten") in (None, node.target):
        return ("", node.name)
    first = sources[0]
    return (str(node.meta.get("original_aten")), str(first.name), str(first.target))


def _round_lazy(result: Any) -> Any:
    if isinstance(result, Lazy):
        return _rounded(result) if result.dtype in LOW_PRECISION else result
    if isinstance(result, (list, tuple)) and any(isinstance(v, Lazy) for v in result):
        return type(result)(_round_lazy(v) for v in result)
    return result


def _rounded(value: Lazy) -> Lazy:
    dtype, fn = value.dtype, value.fn

    def load(ops: OpHandler[Any], idx: Sequence[Expr]) -> Any:
        return ops.to_dtype(fn(ops, idx), dtype, src_dtype=dtype)

    return replace(value, fn=load, cost=value.cost + 1)
