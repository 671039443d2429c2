"""Size conditions of a compiled exported program.

torch.export records guards on the dynamic sizes it traced (`s0 // 8 * (s1 // 8) == 16` where a
model's position table fixes the number of patches), and torch's decompositions and polyduct's
lowerings may add more while compiling (an adaptive pooling written as a fixed window guards
`s0 // 2 == 8`). `ExportedProgram.module()` checks the first kind before each call, and under
torch.compile Dynamo checks both; a compiled exported program must check them itself, or it runs
on sizes it was not compiled for. `SizeConditions` holds the guards and the sizes' value ranges
and checks them once for each new combination of input sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import sympy
import torch

from polyduct.errors import InputMismatch


def shape_env_of(graph: torch.fx.Graph) -> Any:
    """The ShapeEnv of a graph's symbolic input sizes (None when every size is static)."""
    for node in graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        for size in val.shape if isinstance(val, torch.Tensor) else ():
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


class SizeConditions:
    """Guards on input sizes that a compiled program needs, checked at call time."""

    def __init__(self, shape_env: Any, graph: torch.fx.Graph, names: list[str]) -> None:
        """`shape_env` holds the guards (None: static sizes); `names` are the user inputs'
        placeholder names in `graph`, in call order."""
        self.sources: dict[sympy.Symbol, tuple[int, int]] = {}
        vals = {n.name: n.meta.get("val") for n in graph.find_nodes(op="placeholder")}
        for pos, name in enumerate(names):
            val = vals.get(name)
            for dim, size in enumerate(val.shape if isinstance(val, torch.Tensor) else ()):
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if isinstance(expr, sympy.Symbol):
                    self.sources.setdefault(expr, (pos, dim))
        self.names = names
        guards = shape_env.guards if shape_env is not None else []
        self.exprs = [g.expr for g in guards if g.expr.free_symbols <= set(self.sources)]
        ranges = shape_env.var_to_range if shape_env is not None else {}
        self.ranges = {s: ranges[s] for s in self.sources if s in ranges}
        self.passed: set[tuple[int, ...]] = set()

    def check(self, inputs: Sequence[Any]) -> None:
        """Raise `InputMismatch` unless the inputs' sizes satisfy every condition."""
        if not self.sources:
            return
        sizes = tuple(
            int(inputs[pos].shape[dim]) if isinstance(inputs[pos], torch.Tensor) else -1
            for pos, dim in self.sources.values()
        )
        if sizes in self.passed:
            return
        values = {s: sympy.Integer(v) for s, v in zip(self.sources, sizes, strict=True)}
        for sym, vr in self.ranges.items():
            if not vr.lower <= values[sym] <= vr.upper:
                self._fail(sym, f"in [{vr.lower}, {vr.upper}]", int(values[sym]))
        for expr in self.exprs:
            if expr.xreplace(values) is sympy.false:
                sym = min(expr.free_symbols, key=str)
                self._fail(sym, f"satisfying {expr} (compiled for such sizes only)", values)
        self.passed.add(sizes)

    def _fail(self, sym: sympy.Symbol, expected: str, actual: object) -> NoReturn:
        pos, dim = self.sources[sym]
        if isinstance(actual, dict):
            actual = {str(s): int(v) for s, v in actual.items()}
        raise InputMismatch(f"{self.names[pos]}.shape[{dim}] ({sym})", "size", expected, actual)
