"""Decompositions of ops into other ops of the protocol, as opt-in mixins for kernel backends."""

from __future__ import annotations

from polyduct.decomp.base import SpecialOps
from polyduct.decomp.special import GammaMixin, SpecialFunctionsMixin

__all__ = ["GammaMixin", "SpecialFunctionsMixin", "SpecialOps"]
