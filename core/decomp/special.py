"""`SpecialFunctionsMixin`: torch.special functions written once against the op protocol.

Opt in by listing the mixin (or one family mixin) in a backend's ops class statement, before the
base that provides the basic ops (house style rule 5)::

    class TritonOps(SpecialFunctionsMixin, TritonBaseOps): ...

The host must implement `_special_dtype(x) -> torch.dtype`, the dtype `x` is computed in; every
constant is created in that dtype. A method the host defines itself wins over the mixin's. The
algorithms and their domains are described in docs/special-functions.md.
"""

from __future__ import annotations

from typing import Any

from polyduct.decomp import gamma

Ops = Any  # the host: a `polyduct.decomp.base.SpecialOps`; see `GammaMixin` for why not typed so


class GammaMixin:
    """lgamma, digamma, polygamma, zeta."""

    def lgamma(self: Ops, x0: Any) -> Any:
        return gamma.lgamma(self, x0)

    def digamma(self: Ops, x: Any) -> Any:
        return gamma.digamma(self, x)

    def polygamma(self: Ops, x: Any, y: Any) -> Any:
        return gamma.polygamma(self, x, y)

    def zeta(self: Ops, x: Any, y: Any) -> Any:
        return gamma.zeta(self, x, y)


class SpecialFunctionsMixin(GammaMixin):
    """Every special function of the op set, from basic ops (see the family mixins)."""
