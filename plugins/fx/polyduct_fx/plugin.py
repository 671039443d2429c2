"""Entry point of polyduct-fx: registers the `fx` wrapper backend."""

from __future__ import annotations

from polyduct.errors import InvalidOption
from polyduct.hookspecs import Options, WrapperBackendSpec, hookimpl
from polyduct_fx.backend import FxWrapper


def _make(options: Options) -> FxWrapper:
    if options:  # a misspelt option is never ignored
        first = min(options)
        raise InvalidOption("fx", first, options[first], "no options (the fx wrapper takes none)")
    return FxWrapper()


@hookimpl
def polyduct_wrapper_backends() -> list[WrapperBackendSpec]:
    """The FX wrapper, selected with `options={"wrapper": "fx"}`."""
    return [
        WrapperBackendSpec(
            name=FxWrapper.name,
            backend_cls=FxWrapper,
            factory=_make,
            description="Wrapper IR -> torch.fx.GraphModule; compile_graph(gm) extension point",
        )
    ]
