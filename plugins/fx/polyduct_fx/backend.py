"""The FX wrapper backend: `build` = convert to a GraphModule, then `compile_graph(gm)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch.fx

from polyduct.wrapper import KernelLoader, WrapperBackend
from polyduct.wrapper.ir import WrapperProgram
from polyduct_fx.converter import FxConverter, to_graph


class FxWrapper(WrapperBackend):
    """Wrapper IR -> `torch.fx.GraphModule`, handed to the overridable `compile_graph`.

    Subclass it and override `compile_graph` to run the graph through another compiler; register
    the subclass with one `polyduct_wrapper_backends` hook (docs/fx.md).
    """

    name: ClassVar[str] = "fx"

    def build(self, program: WrapperProgram, load_kernels: KernelLoader) -> Callable[..., Any]:
        """A callable running `program`: `compile_graph` of its GraphModule."""
        return self.compile_graph(self.to_graph(program, load_kernels))

    def to_graph(self, program: WrapperProgram, load_kernels: KernelLoader) -> torch.fx.GraphModule:
        """The GraphModule of `program`, kernels loaded through `load_kernels`."""
        return to_graph(program, load_kernels)

    def compile_graph(self, gm: torch.fx.GraphModule) -> Callable[..., Any]:
        """The extension point: any callable with the graph's signature. Default: the graph."""
        return gm

    def render(self, program: WrapperProgram) -> str:
        """The graph's Python code, kernels left unloaded (calls show as `KernelOp` targets)."""
        stubs = {k.name: _unloaded for k in program.kernels()}
        return FxConverter(program, stubs).convert().code


def _unloaded(*args: Any) -> None:
    raise RuntimeError("render() output is for reading; build() the program to run it")
