"""The wrapper: the host-side program around kernels, and the wrapper-backend contract.

This module is the contract a wrapper backend implements (`WrapperBackend`: a `WrapperProgram`
-> a callable). The package holds the Wrapper IR (`ir`), its generation from a planned schedule
(`gen`), the memory-planning pass (`memory_plan`), the core's wrapper backend (`python`: Wrapper IR
-> a Python module) and the helpers that module imports at run time (`runtime`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from polyduct.kernel import KernelFn
from polyduct.wrapper import library  # noqa: F401 -- registers the ops wrappers call
from polyduct.wrapper.ir import KernelDefinition, WrapperProgram

KernelLoader = Callable[[Sequence[KernelDefinition]], dict[str, KernelFn]]


@dataclass(frozen=True, slots=True)
class Built:
    """What `WrapperBackend.make` returns: the callable to run per call, its readable text, and
    the file holding that text (None when the backend writes none)."""

    fn: Callable[..., Any]
    source: str
    path: Path | None = None


class WrapperBackend(ABC):
    """Lowers Wrapper IR with one exhaustive `match` over `polyduct.wrapper.ir.Line`.

    `build` gets the program and a loader that turns kernel definitions into callables (through
    each kernel's own backend), and returns a callable taking the graph inputs positionally and
    returning the graph outputs as a list.
    """

    name: ClassVar[str]

    @abstractmethod
    def build(self, program: WrapperProgram, load_kernels: KernelLoader) -> Callable[..., Any]:
        """A callable running `program`."""

    def render(self, program: WrapperProgram) -> str:
        """Human-readable text of what `build` makes (dumped with POLYDUCT_DUMP / `output_code`)."""
        return "\n".join(repr(line) for line in program.lines)

    def make(self, program: WrapperProgram, load_kernels: KernelLoader) -> Built:
        """`build`, with the text of what it built (the pipeline's last pass calls this). A
        backend that renders its text to build overrides this so it renders once."""
        return Built(self.build(program, load_kernels), self.render(program))
