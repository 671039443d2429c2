"""`ReferenceBackend`: the oracle kernel backend; kernels are Python modules over torch tensors."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Final, final

import sympy
import torch

from polyduct.cache import default_cache, import_module_file
from polyduct.errors import KernelCompileError
from polyduct.kernel import Capabilities, KernelBackend, KernelFn, KernelSource, KernelSpec
from polyduct.reference.codegen import function_name, render_kernel
from polyduct.reference.ops import ReferenceOps

ALL_DTYPES: Final = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    }
)
_SOURCE_FILE = "kernel.py"


@final
class ReferenceBackend(KernelBackend):
    """Evaluates kernels with whole-tensor torch ops (vectorised, never per element)."""

    name: ClassVar[str] = "reference"
    caps: ClassVar[Capabilities] = Capabilities(
        devices=frozenset({"cpu", "cuda"}), dtypes=ALL_DTYPES, dynamic_shapes=True
    )
    ops_cls: ClassVar[type] = ReferenceOps

    def codegen(self, spec: KernelSpec) -> KernelSource:
        return KernelSource(name=spec.name, backend=self.name, source=render_kernel(spec))

    def load(self, sources: Sequence[KernelSource]) -> dict[str, KernelFn]:
        return {src.name: _load_one(src) for src in sources}


def _load_one(src: KernelSource) -> KernelFn:
    inputs = {
        "source": src.source,
        "torch": torch.__version__,
        "sympy": sympy.__version__,
        "python": sys.version.split()[0],
    }

    def build(directory: Path) -> None:
        (directory / _SOURCE_FILE).write_text(src.source)

    entry = default_cache().entry("reference", inputs, build)
    path = entry / _SOURCE_FILE
    digest = hashlib.sha256(src.source.encode()).hexdigest()[:16]
    try:
        module = import_module_file(path, f"polyduct_reference_kernel_{digest}")
    except SyntaxError as err:
        raise KernelCompileError("reference", src.name, str(path), str(err)) from err
    fn = getattr(module, function_name(src.name), None)
    if not callable(fn):
        raise KernelCompileError("reference", src.name, str(path), "kernel function not found")
    return fn  # type: ignore[no-any-return]
