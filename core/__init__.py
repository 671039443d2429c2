"""polyduct: a plugin-based code generator for PyTorch programs.

`torch.compile(fn, backend="polyduct")` needs no import of this package (it is found through the
`torch_dynamo_backends` entry point); `polyduct.compile` compiles a `torch.export` program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from polyduct.version import __version__

__all__ = ["__version__", "compile"]


def compile(
    exported: torch.export.ExportedProgram, options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """Compile a `torch.export` program with polyduct; options as for torch.compile's."""
    from polyduct.frontend.export import compile_exported

    return compile_exported(exported, options)
