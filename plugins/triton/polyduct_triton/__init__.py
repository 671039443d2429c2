"""polyduct-triton: the Triton kernel backend of polyduct."""

from __future__ import annotations

from polyduct_triton.backend import TritonBackend, TritonOptions

__all__ = ["TritonBackend", "TritonOptions"]
