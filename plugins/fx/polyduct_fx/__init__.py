"""polyduct-fx: a wrapper backend that turns Wrapper IR into a `torch.fx.GraphModule`.

`FxWrapper.build` converts a `WrapperProgram` into a GraphModule (see `polyduct_fx.converter`) and
hands it to `compile_graph(gm)`, the extension point for out-of-tree graph compilers.
"""

from __future__ import annotations

from polyduct_fx.backend import FxWrapper
from polyduct_fx.converter import FxConverter, to_graph
from polyduct_fx.runtime import KernelOp

__all__ = ["FxConverter", "FxWrapper", "KernelOp", "to_graph"]
__version__ = "0.1.0"
