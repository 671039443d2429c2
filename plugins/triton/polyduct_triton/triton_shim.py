"""The only module of polyduct-triton that touches attributes Triton does not document.

Triton has no public hook for either of these; each is version-checked, and where a Triton
lacks the attribute the shim leaves the object alone (slower, never wrong):

* `JITFunction.hash`: the key of a kernel in Triton's caches, computed at its first launch by
  walking the AST of the kernel and of every function it calls (8-17 ms a kernel on a 2-core
  CPU, in the process and in each compile worker). A generated module's own SHA-256 covers the
  same text (its kernel and helpers); Triton's version, options and target are keyed by Triton.
* `CompiledKernel._cubin_path`: torch's static CUDA launcher
  (`StaticallyLaunchedCudaKernel`) reads the cubin from this attribute, which torch's own
  Triton heuristics set; Triton's compiled kernel keeps the file in `metadata_group`.

tests/test_triton_shim.py fails if another module of the plugin assigns or reads these.
"""

from __future__ import annotations

from typing import Any

import triton

# Triton versions whose JITFunction has a `hash` that is None until its first launch, and whose
# compiled kernels torch's static launcher reads `_cubin_path` from: 3.0 through 3.x.
_VERSION = tuple(int(p) for p in triton.__version__.split(".")[:2] if p.isdigit())
SUPPORTED = (3, 0) <= _VERSION < (4, 0)


def set_source_key(kernel: Any, digest: str) -> bool:
    """Key `kernel` (a `triton.jit` function not yet launched) by `digest` in Triton's caches,
    in place of its AST walk; whether it was keyed so."""
    if not SUPPORTED or getattr(kernel, "hash", "") is not None:
        return False
    kernel.hash = digest
    return True


def set_cubin_path(compiled: Any, path: str) -> None:
    """Tell torch's static launcher where the cubin of `compiled` is."""
    compiled._cubin_path = path


def cubin_path(compiled: Any) -> str:
    """The cubin file of `compiled`, as `set_cubin_path` recorded it."""
    return str(compiled._cubin_path)
