"""Matrix products with a bias: `addmm` as one library call, or as `mm` plus a fusible bias add.

A Linear layer is `addmm(bias, x, w.t())`. When a pointwise op reads its result (an activation, a
residual add), the bias add is left lazy beside the `mm` library call so that it fuses into that
op's kernel: the result is written once, by the kernel. When nothing pointwise reads it (another
Linear, attention, a graph output), `addmm` stays one library call that adds the bias itself:
one call instead of a call and a kernel, and nothing for the scheduler to plan.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from polyduct.lowering.fx_nodes import reads_through
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn, op_name
from polyduct.lowering.values import Ops, map_values


# memo of a table derived from the core's code only: not process state
@functools.cache
def _pointwise_ops() -> frozenset[str]:
    from polyduct.lowering import pointwise

    return frozenset(pointwise.table())


def feeds_pointwise(node: torch.fx.Node) -> bool:
    """Whether a pointwise op reads `node`'s result, directly or through views."""
    pointwise = _pointwise_ops()
    pending = list(node.users)
    while pending:
        user = pending.pop()
        name = op_name(user.target)
        if name in pointwise:
            return True
        if reads_through(user):
            pending.extend(user.users)
    return False


def _bias_add(ops: Ops, product: Any, bias: Any) -> Any:
    return ops.add(bias, product)


def addmm(ctx: LoweringContext, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """`beta * bias + alpha * (a @ b)`; the bias add fuses into a pointwise reader if any."""
    if beta != 1 or alpha != 1:
        raise Fallback("scaled addmm: one library call")
    if not feeds_pointwise(ctx.node):
        raise Fallback("no pointwise reader: the library call adds the bias")
    product = ctx.extern("aten.mm.default", (a, b), "addmm's product; its bias add fuses")
    return map_values(ctx, (product, bias), ctx.out_dtype(), _bias_add)


def table() -> dict[str, LoweringFn]:
    return {"aten.addmm.default": addmm}
