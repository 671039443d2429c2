"""THE case table: for every elementwise op, its torch reference, domain, inputs and tolerance.

One row per op. `ref` is a named torch callable applied to the input tensors (no lambdas: rule 20).
`gens` names an input generator per argument (`polyduct.conformance.inputs`); `int_gens` replaces
them on integer dtypes. `tol` names a tolerance profile (`PROFILES`), per dtype. Ops whose
arguments are not all tensors (loads, reductions, casts, random...) are built in
`polyduct.conformance.special`; `test_conformance` checks the two together cover `OP_NAMES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from polyduct.conformance import oracles
from polyduct.conformance.inputs import ALL, BOOL, FLOATS, INTS
from polyduct.conformance.tolerance import EXACT, Tol

Out = str | torch.dtype  # "same" (the case dtype), "bool", or a fixed dtype

PROFILES: Mapping[str, Mapping[torch.dtype, Tol]] = {
    "exact": {},
    "signed": {d: Tol(signed_zero=True) for d in FLOATS},
    "rounded": {d: Tol(ulps=1) for d in FLOATS},
    "libm": {
        torch.float64: Tol(ulps=4, atol=1e-15),
        torch.float32: Tol(ulps=4, atol=1e-7),
        torch.float16: Tol(ulps=1),
        torch.bfloat16: Tol(ulps=1),
    },
    "special": {
        torch.float64: Tol(ulps=64, atol=1e-12, rtol=1e-9),
        torch.float32: Tol(ulps=64, atol=1e-5, rtol=1e-4),
        torch.float16: Tol(ulps=2, rtol=2e-3),
        torch.bfloat16: Tol(ulps=2, rtol=1.6e-2),
    },
}


@dataclass(frozen=True)
class OpCase:
    """One elementwise op: reference, domain, input generators, tolerance profile, outputs."""

    op: str
    category: str
    ref: Callable[..., Any]
    domain: tuple[torch.dtype, ...]
    gens: tuple[str, ...]
    tol: str = "exact"
    outs: tuple[Out, ...] = ("same",)
    int_gens: tuple[str, ...] | None = None
    arg_dtypes: tuple[Out, ...] | None = None  # per argument; default: all the case dtype
    params: tuple[tuple[Any, ...], ...] = ((),)  # one variant per tuple of non-tensor arguments
    upcast: torch.dtype | None = torch.float32  # float16/bfloat16 oracles compute in this dtype

    def tolerance(self, dtype: torch.dtype) -> Tol:
        return PROFILES[self.tol].get(dtype, EXACT)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


_poly = oracles.polynomial  # ATen's scalar answers at x = NaN (docs/conformance.md, oracle audit)
_fma = oracles.fma  # fused, one rounding, float64 too (docs/conformance.md, oracle audit)


def _floordiv(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.div(x, y, rounding_mode="floor")


def _truncdiv(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.div(x, y, rounding_mode="trunc")


def _int_truediv(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.double() / y.double()).float()


def _ldexp(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    return torch.ldexp(x, n).to(x.dtype)


def _polygamma(n: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for k in torch.unique(n).tolist():
        mask = n == k
        out[mask] = torch.special.polygamma(int(k), x[mask])
    return out


def _where(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(c, a, b)


def _frexp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, e = torch.frexp(x)
    return m, e.to(torch.int32)


def _round_int(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.round(x.double()).to(dtype)


def _ceil_int(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.ceil(x.double()).to(dtype)


def _floor_int(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.floor(x.double()).to(dtype)


def _trunc_int(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.trunc(x.double()).to(dtype)


NUM = (*FLOATS, *INTS)
SIGNED_NUM = (*FLOATS, torch.int8, torch.int16, torch.int32, torch.int64)
INTS_BOOL = (*INTS, *BOOL)
sp = torch.special
_U, _B, _T = ("any",), ("any", "any"), ("any", "any", "any")
_TO_INT = ((torch.int32,), (torch.int64,))


def _unary(op: str, ref: Callable[..., Any], tol: str = "libm", gen: str = "any") -> OpCase:
    return OpCase(op, "math", ref, FLOATS, (gen,), tol)


def _special(op: str, ref: Callable[..., Any], gens: tuple[str, ...] = ("moderate",)) -> OpCase:
    return OpCase(op, "math", ref, FLOATS, gens, "special")


def _compare(op: str, ref: Callable[..., Any]) -> OpCase:
    return OpCase(op, "comparison", ref, ALL, _B, outs=("bool",))


def _bits(op: str, ref: Callable[..., Any], domain: tuple[torch.dtype, ...], n: int = 2) -> OpCase:
    return OpCase(op, "bitwise", ref, domain, _T[:n])


def _logical(op: str, ref: Callable[..., Any], n: int = 2) -> OpCase:
    return OpCase(op, "bitwise", ref, ALL, _T[:n], outs=("bool",))


def _shift(op: str, ref: Callable[..., Any]) -> OpCase:
    return OpCase(op, "bitwise", ref, INTS, ("any", "shift"))


def _to_int(op: str, ref: Callable[..., Any]) -> OpCase:
    return OpCase(op, "dtype", ref, FLOATS, ("to_int_range",), params=_TO_INT, outs=("param",))


CASES: tuple[OpCase, ...] = (
    OpCase("abs", "math", torch.abs, SIGNED_NUM, _U),
    _unary("acos", torch.acos),
    _unary("acosh", torch.acosh),
    _unary("asin", torch.asin),
    _unary("asinh", torch.asinh),
    _unary("atan", torch.atan),
    _unary("atanh", torch.atanh),
    OpCase("add", "math", torch.add, NUM, _B),
    _special("airy_ai", oracles.airy_ai),
    OpCase("atan2", "math", torch.atan2, FLOATS, _B, "libm"),
    _special("bessel_j0", oracles.bessel_j0),
    _special("bessel_j1", oracles.bessel_j1),
    _special("bessel_y0", oracles.bessel_y0, ("positive",)),
    _special("bessel_y1", oracles.bessel_y1, ("positive",)),
    _unary("ceil", torch.ceil, "exact"),
    _special("chebyshev_polynomial_t", _poly(sp.chebyshev_polynomial_t), ("unit", "degree")),
    _special("chebyshev_polynomial_u", _poly(sp.chebyshev_polynomial_u), ("unit", "degree")),
    _special("chebyshev_polynomial_v", _poly(sp.chebyshev_polynomial_v), ("unit", "degree")),
    _special("chebyshev_polynomial_w", _poly(sp.chebyshev_polynomial_w), ("unit", "degree")),
    OpCase("copysign", "math", torch.copysign, FLOATS, _B, "signed"),
    _unary("cos", torch.cos),
    _unary("cosh", oracles.cosh),
    _special("digamma", torch.digamma),
    OpCase("div_rn", "math", torch.div, FLOATS, _B),
    _unary("erf", torch.erf),
    _unary("erfc", torch.erfc),
    _special("erfcx", sp.erfcx),
    _unary("erfinv", torch.erfinv, gen="unit"),
    _unary("exp", torch.exp),
    _unary("exp2", torch.exp2),
    _unary("expm1", torch.expm1),
    _unary("floor", torch.floor, "exact"),
    OpCase("floordiv", "math", _floordiv, INTS, ("any", "divisor")),
    OpCase("fma", "math", _fma, FLOATS, _T, "rounded"),
    OpCase("fmod", "math", oracles.fmod, FLOATS, _B),
    OpCase("frexp", "math", _frexp, FLOATS, _U, outs=("same", torch.int32)),
    _special("gammainc", oracles.gammainc, ("positive", "positive")),
    _special("gammaincc", oracles.gammaincc, ("positive", "positive")),
    _special("hermite_polynomial_h", _poly(sp.hermite_polynomial_h), ("moderate", "degree")),
    _special("hermite_polynomial_he", _poly(sp.hermite_polynomial_he), ("moderate", "degree")),
    OpCase("hypot", "math", oracles.hypot, FLOATS, _B, "libm"),
    _special("i0", torch.i0),
    _special("i0e", sp.i0e),
    _special("i1", sp.i1),
    _special("i1e", sp.i1e),
    _special("igamma", oracles.gammainc, ("positive", "positive")),
    _special("igammac", oracles.gammaincc, ("positive", "positive")),
    OpCase("int_truediv", "math", _int_truediv, INTS, ("any", "divisor"), outs=(torch.float32,)),
    _special("laguerre_polynomial_l", _poly(sp.laguerre_polynomial_l), ("positive", "degree")),
    OpCase("ldexp", "math", _ldexp, FLOATS, ("any", "small_int"), arg_dtypes=("same", torch.int32)),
    _special("legendre_polynomial_p", _poly(sp.legendre_polynomial_p), ("unit", "degree")),
    _special("lgamma", torch.lgamma),
    _unary("log", torch.log),
    _unary("log10", torch.log10),
    _unary("log1p", torch.log1p),
    _unary("log2", torch.log2),
    _special("log_ndtr", sp.log_ndtr),
    OpCase("maximum", "math", torch.maximum, ALL, _B),
    OpCase("minimum", "math", torch.minimum, ALL, _B),
    OpCase("mod", "math", oracles.fmod, NUM, ("any", "divisor")),
    _special("modified_bessel_i0", sp.modified_bessel_i0),
    _special("modified_bessel_i1", sp.modified_bessel_i1),
    _special("modified_bessel_k0", sp.modified_bessel_k0, ("positive",)),
    _special("modified_bessel_k1", sp.modified_bessel_k1, ("positive",)),
    OpCase("mul", "math", torch.mul, NUM, _B),
    OpCase("mul_rn", "math", torch.mul, FLOATS, _B),
    _special("ndtr", oracles.ndtr),
    _special("ndtri", sp.ndtri, ("probability",)),
    OpCase("neg", "math", torch.neg, SIGNED_NUM, _U),
    OpCase("nextafter", "math", oracles.nextafter, FLOATS, _B, upcast=None),
    _special("polygamma", _polygamma, ("degree", "positive")),
    OpCase("pow", "math", torch.pow, NUM, _B, "libm", int_gens=("small_int", "exponent")),
    OpCase("reciprocal", "math", torch.reciprocal, FLOATS, _U),
    OpCase("relu", "math", torch.relu, SIGNED_NUM, _U),
    OpCase("remainder", "math", oracles.remainder, NUM, ("any", "divisor"), "rounded"),
    _unary("round", torch.round, "exact"),
    _unary("rsqrt", torch.rsqrt),
    _special("scaled_modified_bessel_k0", sp.scaled_modified_bessel_k0, ("positive",)),
    _special("scaled_modified_bessel_k1", sp.scaled_modified_bessel_k1, ("positive",)),
    _special(
        "shifted_chebyshev_polynomial_t",
        _poly(sp.shifted_chebyshev_polynomial_t),
        ("probability", "degree"),
    ),
    _special(
        "shifted_chebyshev_polynomial_u",
        _poly(sp.shifted_chebyshev_polynomial_u),
        ("probability", "degree"),
    ),
    _special(
        "shifted_chebyshev_polynomial_v",
        _poly(sp.shifted_chebyshev_polynomial_v),
        ("probability", "degree"),
    ),
    _special(
        "shifted_chebyshev_polynomial_w",
        _poly(sp.shifted_chebyshev_polynomial_w),
        ("probability", "degree"),
    ),
    _unary("sigmoid", torch.sigmoid),
    OpCase("sign", "math", torch.sign, SIGNED_NUM, _U),
    _unary("sin", torch.sin),
    _unary("sinh", oracles.sinh),
    _special("spherical_bessel_j0", sp.spherical_bessel_j0),
    _unary("sqrt", oracles.sqrt, "exact"),
    OpCase("square", "math", torch.square, NUM, _U),
    OpCase("sub", "math", torch.sub, NUM, _B),
    _unary("tan", torch.tan),
    _unary("tanh", torch.tanh),
    OpCase("truediv", "math", torch.true_divide, FLOATS, _B),
    _unary("trunc", torch.trunc, "exact"),
    OpCase("truncdiv", "math", _truncdiv, INTS, ("any", "divisor")),
    _special("zeta", sp.zeta, ("positive", "positive")),
    _compare("eq", torch.eq),
    _compare("ge", torch.ge),
    _compare("gt", torch.gt),
    OpCase("isinf", "comparison", torch.isinf, FLOATS, _U, outs=("bool",)),
    OpCase("isnan", "comparison", torch.isnan, FLOATS, _U, outs=("bool",)),
    _compare("le", torch.le),
    _compare("lt", torch.lt),
    _compare("ne", torch.ne),
    OpCase("signbit", "comparison", torch.signbit, FLOATS, _U, outs=("bool",)),
    _bits("and_", torch.logical_and, BOOL),
    _bits("bitwise_and", torch.bitwise_and, INTS_BOOL),
    _shift("bitwise_left_shift", torch.bitwise_left_shift),
    _bits("bitwise_not", torch.bitwise_not, INTS_BOOL, 1),
    _bits("bitwise_or", torch.bitwise_or, INTS_BOOL),
    _shift("bitwise_right_shift", torch.bitwise_right_shift),
    _bits("bitwise_xor", torch.bitwise_xor, INTS_BOOL),
    _logical("logical_and", torch.logical_and),
    _logical("logical_not", torch.logical_not, 1),
    _logical("logical_or", torch.logical_or),
    _logical("logical_xor", torch.logical_xor),
    _shift("lshift", torch.bitwise_left_shift),
    _bits("or_", torch.logical_or, BOOL),
    _shift("rshift", torch.bitwise_right_shift),
    _bits("xor", torch.logical_xor, BOOL),
    _to_int("ceil_to_int", _ceil_int),
    _to_int("floor_to_int", _floor_int),
    _to_int("round_to_int", _round_int),
    _to_int("trunc_to_int", _trunc_int),
    OpCase("identity", "other", _identity, ALL, _U),
    OpCase("where", "other", _where, ALL, _T, arg_dtypes=(torch.bool, "same", "same")),
)
