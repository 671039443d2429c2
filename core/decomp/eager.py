"""`EagerOps`: a test evaluator that runs the special-function decompositions on torch tensors.

Basic ops (add, exp, where, ...) are evaluated at once with the torch function of the same meaning;
the special functions come from `SpecialFunctionsMixin`, built only from those basic ops. Values are
tensors; `_special_dtype` is the tensor's dtype. Ops the mixin never uses are left to
`DefaultHandler`, which refuses them.
"""

from __future__ import annotations

from typing import final

import torch

from polyduct.decomp.special import SpecialFunctionsMixin
from polyduct.handlers.default import DefaultHandler

Tensor = torch.Tensor


@final
class EagerOps(SpecialFunctionsMixin, DefaultHandler[Tensor]):
    """Immediate torch evaluation of the basic ops plus the special-function mixin."""

    def _special_dtype(self, x: Tensor) -> torch.dtype:
        return x.dtype

    def constant(self, value: bool | float, dtype: torch.dtype) -> Tensor:
        return torch.tensor(value, dtype=dtype)

    def to_dtype(
        self,
        x: Tensor,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> Tensor:
        return x.to(dtype)

    def where(self, condition: Tensor, input: Tensor, other: Tensor) -> Tensor:
        return torch.where(condition, input, other)

    def add(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.add(x0, x1)

    def sub(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.sub(x0, x1)

    def mul(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.mul(x0, x1)

    def truediv(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.true_divide(x0, x1)

    def neg(self, x0: Tensor) -> Tensor:
        return torch.neg(x0)

    def abs(self, x0: Tensor) -> Tensor:
        return torch.abs(x0)

    def copysign(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.copysign(x0, x1)

    def pow(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.pow(x0, x1)

    def exp(self, x0: Tensor) -> Tensor:
        return torch.exp(x0)

    def log(self, x0: Tensor) -> Tensor:
        return torch.log(x0)

    def log1p(self, x0: Tensor) -> Tensor:
        return torch.log1p(x0)

    def sqrt(self, x0: Tensor) -> Tensor:
        return torch.sqrt(x0)

    def sin(self, x0: Tensor) -> Tensor:
        return torch.sin(x0)

    def cos(self, x0: Tensor) -> Tensor:
        return torch.cos(x0)

    def tan(self, x0: Tensor) -> Tensor:
        return torch.tan(x0)

    def acos(self, x0: Tensor) -> Tensor:
        return torch.acos(x0)

    def acosh(self, x0: Tensor) -> Tensor:
        return torch.acosh(x0)

    def sinh(self, x0: Tensor) -> Tensor:
        return torch.sinh(x0)

    def cosh(self, x0: Tensor) -> Tensor:
        return torch.cosh(x0)

    def erf(self, x0: Tensor) -> Tensor:
        return torch.erf(x0)

    def erfc(self, x0: Tensor) -> Tensor:
        return torch.erfc(x0)

    def floor(self, x0: Tensor) -> Tensor:
        return torch.floor(x0)

    def trunc(self, x0: Tensor) -> Tensor:
        return torch.trunc(x0)

    def round(self, x0: Tensor) -> Tensor:
        return torch.round(x0)

    def minimum(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.minimum(x0, x1)

    def maximum(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.maximum(x0, x1)

    def lt(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.lt(x0, x1)

    def le(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.le(x0, x1)

    def gt(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.gt(x0, x1)

    def ge(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.ge(x0, x1)

    def eq(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.eq(x0, x1)

    def ne(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.ne(x0, x1)

    def isnan(self, x0: Tensor) -> Tensor:
        return torch.isnan(x0)

    def isinf(self, x0: Tensor) -> Tensor:
        return torch.isinf(x0)

    def and_(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.logical_and(x0, x1)

    def or_(self, x0: Tensor, x1: Tensor) -> Tensor:
        return torch.logical_or(x0, x1)

    def logical_not(self, x0: Tensor) -> Tensor:
        return torch.logical_not(x0)

    def expm1(self, x0: Tensor) -> Tensor:
        return torch.expm1(x0)
