"""polyduct-halide: polyduct kernels as Halide pipelines, JIT-compiled for the host."""

from __future__ import annotations

__version__ = "0.1.0"
