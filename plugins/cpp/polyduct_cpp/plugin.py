"""Entry point of polyduct-cpp (group `polyduct`): registers the `cpp` kernel backend."""

from __future__ import annotations

from polyduct.hookspecs import KernelBackendSpec, hookimpl
from polyduct_cpp.backend import CppBackend, make_backend


@hookimpl
def polyduct_kernel_backends() -> list[KernelBackendSpec]:
    """The C++ kernel backend (default on CPU)."""
    return [
        KernelBackendSpec(
            name="cpp",
            backend_cls=CppBackend,
            factory=make_backend,
            description="C++ kernels: g++/clang, OpenMP, vectorised loops, ctypes loading",
            defaults={"cpu": 100},  # kernels="auto" on CPU
        )
    ]
