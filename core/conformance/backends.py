"""Find the kernel backend to test: an installed name, or `module:attr` for one not installed."""

from __future__ import annotations

import importlib

from polyduct.errors import UnknownName
from polyduct.kernel import KernelBackend


def resolve_backend(spec: str) -> tuple[str, KernelBackend]:
    """(name, instance) for an installed backend name or a `package.module:ClassOrFactory` path.

    The path form lets a backend author run the suite on a backend that is not installed yet.
    """
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        obj = getattr(importlib.import_module(module_name), attr)
        backend = obj() if callable(obj) else obj
        if not isinstance(backend, KernelBackend):
            raise UnknownName("kernel backend", spec, [])
        return backend.name, backend
    from polyduct.environment import snapshot
    from polyduct.plugins import load

    plugins = load()  # the suite's entry: the backend's declared variables are read here
    return spec, plugins.kernel_backend(spec, plugins.environment_options(spec, snapshot()))
