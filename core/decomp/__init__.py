"""Decompositions of ops into other ops of the protocol, as opt-in mixins for kernel backends."""

from __future__ import annotations

from polyduct.decomp.base import SpecialOps
from polyduct.decomp.polynomials import POLY_MAX_DEGREE
from polyduct.decomp.special import (
    BesselMixin,
    GammaMixin,
    IncompleteGammaMixin,
    ModifiedBesselMixin,
    NormalMixin,
    PolynomialMixin,
    SpecialFunctionsMixin,
)

__all__ = [
    "POLY_MAX_DEGREE",
    "BesselMixin",
    "GammaMixin",
    "IncompleteGammaMixin",
    "ModifiedBesselMixin",
    "NormalMixin",
    "PolynomialMixin",
    "SpecialFunctionsMixin",
    "SpecialOps",
]
