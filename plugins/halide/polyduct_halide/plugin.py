"""Entry point of polyduct-halide (group `polyduct`): registers the `halide` kernel backend."""

from __future__ import annotations

from polyduct.hookspecs import KernelBackendSpec, hookimpl


@hookimpl
def polyduct_kernel_backends() -> list[KernelBackendSpec]:
    """The Halide kernel backend."""
    from polyduct_halide.backend import HalideBackend, factory

    return [
        KernelBackendSpec(
            name="halide",
            backend_cls=HalideBackend,
            factory=factory,
            description="Halide pipelines JIT-compiled for the host; default or auto schedules",
            defaults={},  # chosen by name only: its JIT compiles take seconds per kernel
        )
    ]
