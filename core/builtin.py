"""The core's own plugin: kernel backend "reference" and wrapper backend "python".

Registered through the entry point `core = "polyduct.builtin"` in pyproject.toml, the same path
any other distribution takes. Backend modules are imported inside the hooks, so a failure in one
is recorded against this distribution without hiding the other.
"""

from __future__ import annotations

from polyduct.errors import InvalidOption
from polyduct.hookspecs import (
    KernelBackendSpec,
    Options,
    WrapperBackendSpec,
    hookimpl,
)
from polyduct.kernel import KernelBackend
from polyduct.wrapper import WrapperBackend


def _reference_factory(options: Options) -> KernelBackend:
    from polyduct.reference.backend import ReferenceBackend

    if options:  # a misspelt option is never ignored
        first = min(options)
        raise InvalidOption("reference", first, options[first], "no options (it takes none)")

    return ReferenceBackend()


def _python_wrapper_factory(options: Options) -> WrapperBackend:
    from polyduct.wrapper.python import PythonWrapper, PythonWrapperOptions

    return PythonWrapper(PythonWrapperOptions.from_mapping(options))


@hookimpl
def polyduct_kernel_backends() -> list[KernelBackendSpec]:
    """The reference backend: evaluates ops with torch tensors (the conformance oracle)."""
    from polyduct.reference.backend import ReferenceBackend

    return [
        KernelBackendSpec(
            name="reference",
            backend_cls=ReferenceBackend,
            factory=_reference_factory,
            description="pure-Python oracle: evaluates each op with torch tensors",
            # the last resort for kernels="auto" on any device it runs on
            defaults=dict.fromkeys(ReferenceBackend.caps.devices, 0),
        )
    ]


@hookimpl
def polyduct_wrapper_backends() -> list[WrapperBackendSpec]:
    """The Python wrapper: renders Wrapper IR as a readable, standalone Python module."""
    from polyduct.wrapper.python import PythonWrapper

    return [
        WrapperBackendSpec(
            name="python",
            backend_cls=PythonWrapper,
            factory=_python_wrapper_factory,
            description="readable Python module, dumpable and runnable standalone",
            environment={"dump": "POLYDUCT_DUMP"},
        )
    ]
