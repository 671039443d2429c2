"""pluggy entry point of polyduct-triton: registers the `triton` kernel backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polyduct.hookspecs import KernelBackendSpec, hookimpl
from polyduct_triton.backend import TritonBackend, TritonOptions


def make_backend(options: Mapping[str, Any]) -> TritonBackend:
    """Factory: `TritonBackend` from an options mapping (see `TritonOptions`)."""
    return TritonBackend(TritonOptions.from_mapping(options))


@hookimpl
def polyduct_kernel_backends() -> list[KernelBackendSpec]:
    """The Triton kernel backend."""
    return [
        KernelBackendSpec(
            name="triton",
            backend_cls=TritonBackend,
            factory=make_backend,
            description="Triton kernels (CUDA; CPU through TRITON_INTERPRET)",
            defaults={"cuda": 100},  # kernels="auto" on CUDA
            environment={
                "launcher": "POLYDUCT_TRITON_LAUNCHER",
                "compile_workers": "POLYDUCT_TRITON_COMPILE_WORKERS",
                "index_errors": "POLYDUCT_TRITON_INDEX_ERRORS",
            },
        )
    ]
