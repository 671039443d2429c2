"""Pointwise lowerings: arithmetic, comparison, logical, bitwise, unary math, special functions,
where, clamp and casts. Each returns a `Lazy` value that consumers inline."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from polyduct.errors import LoweringError
from polyduct.lowering import division
from polyduct.lowering.graph import Fallback, LoweringContext, LoweringFn
from polyduct.lowering.values import (
    Ops,
    cast,
    is_tensor,
    lazy,
    map_values,
    named_op,
    operand,
    promoted,
)

_SAME_NAME_UNARY = [
    "abs",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "erfinv",
    "exp",
    "exp2",
    "expm1",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "neg",
    "reciprocal",
    "relu",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "digamma",
    "i0",
    "bitwise_not",
]
_SPECIAL_UNARY = {
    "special_erfcx": "erfcx",
    "special_i0e": "i0e",
    "special_i1": "i1",
    "special_i1e": "i1e",
    "special_ndtr": "ndtr",
    "special_ndtri": "ndtri",
    "special_log_ndtr": "log_ndtr",
    "special_bessel_j0": "bessel_j0",
    "special_bessel_j1": "bessel_j1",
    "special_bessel_y0": "bessel_y0",
    "special_bessel_y1": "bessel_y1",
    "special_airy_ai": "airy_ai",
    "special_modified_bessel_i0": "modified_bessel_i0",
    "special_modified_bessel_i1": "modified_bessel_i1",
    "special_modified_bessel_k0": "modified_bessel_k0",
    "special_modified_bessel_k1": "modified_bessel_k1",
    "special_scaled_modified_bessel_k0": "scaled_modified_bessel_k0",
    "special_scaled_modified_bessel_k1": "scaled_modified_bessel_k1",
    "special_spherical_bessel_j0": "spherical_bessel_j0",
}
_SAME_NAME_BINARY = [
    "atan2",
    "copysign",
    "hypot",
    "nextafter",
    "remainder",
    "maximum",
    "minimum",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "igamma",
    "igammac",
]
_SPECIAL_BINARY = {
    "special_zeta": "zeta",
    **{
        f"special_{p}": p
        for p in [
            "chebyshev_polynomial_t",
            "chebyshev_polynomial_u",
            "chebyshev_polynomial_v",
            "chebyshev_polynomial_w",
            "hermite_polynomial_h",
            "hermite_polynomial_he",
            "laguerre_polynomial_l",
            "legendre_polynomial_p",
            "shifted_chebyshev_polynomial_t",
            "shifted_chebyshev_polynomial_u",
            "shifted_chebyshev_polynomial_v",
            "shifted_chebyshev_polynomial_w",
        ]
    },
}
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_LOGICAL = ("logical_and", "logical_or", "logical_xor")


def elementwise(name: str) -> LoweringFn:
    """Lowering that converts operands to the output dtype and applies op `name`."""
    apply = named_op(name)

    def lower(ctx: LoweringContext, *args: Any) -> Any:
        return map_values(ctx, args, ctx.out_dtype(), apply)

    lower.__name__ = f"lower_{name}"
    return lower


def compare(name: str) -> LoweringFn:
    """Comparison / logical op: operands promoted together, bool result."""
    apply = named_op(name)

    def lower(ctx: LoweringContext, *args: Any) -> Any:
        return map_values(ctx, args, promoted(*args), apply)

    lower.__name__ = f"lower_{name}"
    return lower


def predicate(name: str) -> LoweringFn:
    """isnan / isinf / signbit / logical_not: the operand keeps its dtype, bool result."""
    apply = named_op(name)

    def lower(ctx: LoweringContext, x: Any) -> Any:
        return map_values(ctx, (x,), x.dtype, apply)

    lower.__name__ = f"lower_{name}"
    return lower


def _float_only(name: str, for_floats: LoweringFn, on_ints: Callable[..., Any]) -> LoweringFn:
    """Op `name` of the op set, whose domain is floats (`for_floats` lowers it); integer and bool
    operands (all of them) take `on_ints(dtype)`: floor of an int is itself, isnan false..."""

    def lower(ctx: LoweringContext, *args: Any) -> Any:
        out = ctx.out_dtype()
        floats = any(is_tensor(a) and a.dtype.is_floating_point for a in args)
        if floats or out.is_floating_point or not is_tensor(args[0]):
            return for_floats(ctx, *args)
        dtype = out if out != torch.bool else args[0].dtype
        return map_values(ctx, args, dtype, on_ints(dtype))

    lower.__name__ = f"lower_{name}"
    return lower


def _itself(dtype: torch.dtype) -> Callable[..., Any]:
    def identity(ops: Ops, x: Any) -> Any:
        return ops.identity(x)

    return identity


def _never(dtype: torch.dtype) -> Callable[..., Any]:
    def never(ops: Ops, x: Any) -> Any:
        return ops.constant(False, torch.bool)

    return never


def _negative(dtype: torch.dtype) -> Callable[..., Any]:
    def negative(ops: Ops, x: Any) -> Any:
        return ops.lt(x, ops.constant(0, dtype))

    return negative


def _int_mod(dtype: torch.dtype) -> Callable[..., Any]:
    return named_op("mod")


def _add(ctx: LoweringContext, a: Any, b: Any, alpha: Any = 1) -> Any:
    if not is_tensor(alpha) and alpha == 1:
        return map_values(ctx, (a, b), ctx.out_dtype(), named_op("add"))
    return map_values(ctx, (a, b, alpha), ctx.out_dtype(), _axpy("add"))


def _sub(ctx: LoweringContext, a: Any, b: Any, alpha: Any = 1) -> Any:
    if ctx.out_dtype() == torch.bool:
        # Eager refuses it. AOTAutograd writes one into the graph when it replays a write
        # through an expanded bool view (`x + (new - x)`), which no bool arithmetic makes `new`:
        # computed, the write was lost (halide seed 9403, program 9871).
        raise LoweringError(
            str(ctx.node.target), ctx.node.name, "subtraction of bool tensors (eager refuses it)"
        )
    if not is_tensor(alpha) and alpha == 1:
        return map_values(ctx, (a, b), ctx.out_dtype(), named_op("sub"))
    return map_values(ctx, (a, b, alpha), ctx.out_dtype(), _axpy("sub"))


def _rsub(ctx: LoweringContext, a: Any, b: Any, alpha: Any = 1) -> Any:
    return _sub(ctx, b, a, alpha)


def _axpy(name: str) -> Callable[..., Any]:
    def apply(ops: Ops, a: Any, b: Any, alpha: Any) -> Any:
        return getattr(ops, name)(a, ops.mul(b, alpha))

    return apply


def _fmod(ctx: LoweringContext, a: Any, b: Any) -> Any:
    # The op `fmod` is for floats; on integers C's remainder (sign of the dividend) is `mod`.
    out = ctx.out_dtype()
    return map_values(ctx, (a, b), out, named_op("fmod" if out.is_floating_point else "mod"))


def _pow(ctx: LoweringContext, a: Any, b: Any) -> Any:
    out = ctx.out_dtype()
    if not is_tensor(b) and isinstance(b, (int, float)) and not isinstance(b, bool):
        # The exponents eager computes without pow (ATen's pow_tensor_scalar_optimized), the
        # same way: GPT-2's GELU cubes its input, one vector pow per element before.
        special = _POWERS.get(float(b)) if out.is_floating_point else _int_power(b, out)
        if special is not None:
            return map_values(ctx, (a,), out, special)
    return map_values(ctx, (a, b), out, named_op("pow"))


def _int_power(n: float, dtype: torch.dtype) -> Callable[..., Any] | None:
    """x ** n of an integer x for a whole n in 0..64, by squaring: a product wraps as torch's
    integer pow does, so it is exact, and a backend's pow by a tensor exponent (a squaring per
    bit of the exponent's type) is not built for a constant (Halide's bounds inference walked
    that expression as a tree of 2**32 nodes: halide seed 10801, program 2745 never compiled)."""
    if n != int(n) or not 0 <= n <= 64:
        return None

    def power(ops: Ops, x: Any) -> Any:
        result, base, k = None, x, int(n)
        while True:
            if k & 1:
                result = base if result is None else ops.mul(result, base)
            k >>= 1
            if not k:
                return ops.constant(1, dtype) if result is None else result
            base = ops.mul(base, base)

    return power


def _cube(ops: Ops, x: Any) -> Any:
    return ops.mul(ops.mul(x, x), x)


def _reciprocal_square(ops: Ops, x: Any) -> Any:
    return ops.reciprocal(ops.mul(x, x))


_POWERS: dict[float, Callable[..., Any]] = {  # of floats (integers: `_int_power`)
    2.0: named_op("square"),
    3.0: _cube,
    0.5: named_op("sqrt"),
    -0.5: named_op("rsqrt"),
    -1.0: named_op("reciprocal"),
    -2.0: _reciprocal_square,
}


def _where(ctx: LoweringContext, cond: Any, a: Any, b: Any) -> Any:
    out = ctx.out_dtype()

    def apply(ops: Ops, c: Any, x: Any, y: Any) -> Any:
        return ops.where(c, x, y)

    # the condition stays bool; only the branches take the output dtype
    size = ctx.out_size()
    loaders = (operand(cond, size, torch.bool), operand(a, size, out), operand(b, size, out))

    def load(ops: Ops, idx: Any) -> Any:
        return apply(ops, *(ld(ops, idx) for ld in loaders))

    return lazy(size, out, ctx.device, load, cond, a, b)


def _clamp(ctx: LoweringContext, x: Any, lo: Any = None, hi: Any = None) -> Any:
    bounds = [v for v in (lo, hi) if v is not None]
    has_lo, has_hi = lo is not None, hi is not None

    # eager's clamp keeps `x` where it equals a bound (clamp(-0.0, min=0.0) is -0.0, where
    # maximum gives +0.0) and is NaN where `x` or a bound is
    # (a bound known at compile time to be a number needs no NaN test, nor does an integer)
    floats = ctx.out_dtype().is_floating_point
    maybe_nan = [floats and (not isinstance(v, (int, float)) or math.isnan(v)) for v in bounds]

    def bounded(ops: Ops, v: Any, bound: Any, beyond: Any, nan: bool) -> Any:
        if nan:
            beyond = ops.logical_or(beyond, ops.ne(bound, bound))
        return ops.where(beyond, bound, v)

    def apply(ops: Ops, v: Any, *b: Any) -> Any:
        if has_lo:
            v = bounded(ops, v, b[0], ops.lt(v, b[0]), maybe_nan[0])
        if has_hi:
            v = bounded(ops, v, b[-1], ops.gt(v, b[-1]), maybe_nan[-1])
        return v

    return map_values(ctx, (x, *bounds), ctx.out_dtype(), apply)


def _clamp_min(ctx: LoweringContext, x: Any, lo: Any) -> Any:
    return _clamp(ctx, x, lo, None)


def _clamp_max(ctx: LoweringContext, x: Any, hi: Any) -> Any:
    return _clamp(ctx, x, None, hi)


def _to_copy(ctx: LoweringContext, x: Any, **kwargs: Any) -> Any:
    if not is_tensor(x):
        raise Fallback("_to_copy of a non-tensor")
    if ctx.device != x.device:
        raise Fallback("device transfer")
    return map_values(ctx, (x,), ctx.out_dtype(), _identity)


def _identity(ops: Ops, x: Any) -> Any:
    return x


def _convert(ctx: LoweringContext, x: Any, dtype: torch.dtype) -> Any:
    return map_values(ctx, (x,), dtype, _identity)


def _clone(ctx: LoweringContext, x: Any, **kwargs: Any) -> Any:
    return map_values(ctx, (x,), ctx.out_dtype(), _identity)


def _gelu(ctx: LoweringContext, x: Any, approximate: str = "none") -> Any:
    def exact(ops: Ops, v: Any) -> Any:
        half = ops.constant(0.5, torch.float32)
        inner = ops.erf(ops.mul(v, ops.constant(math.sqrt(0.5), torch.float32)))
        return ops.mul(ops.mul(half, v), ops.add(ops.constant(1.0, torch.float32), inner))

    def tanh(ops: Ops, v: Any) -> Any:
        c = ops.constant(math.sqrt(2.0 / math.pi), torch.float32)
        cube = ops.mul(ops.mul(v, v), v)
        inner = ops.mul(c, ops.add(v, ops.mul(ops.constant(0.044715, torch.float32), cube)))
        one = ops.constant(1.0, torch.float32)
        return ops.mul(ops.mul(ops.constant(0.5, torch.float32), v), ops.add(one, ops.tanh(inner)))

    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise Fallback(f"gelu on {x.dtype}")
    formula = exact if approximate == "none" else tanh
    out = ctx.out_dtype()

    def apply(ops: Ops, v: Any) -> Any:
        return cast(ops, formula(ops, v), torch.float32, out)

    return map_values(ctx, (x,), torch.float32, apply)


def _silu(ctx: LoweringContext, x: Any) -> Any:
    """x * sigmoid(x), computed in float32 (float64 in float64) and rounded to x's dtype."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    out = ctx.out_dtype()

    def apply(ops: Ops, v: Any) -> Any:
        return cast(ops, ops.mul(v, ops.sigmoid(v)), compute, out)

    return map_values(ctx, (x,), compute, apply)


def _frac(ctx: LoweringContext, x: Any) -> Any:
    def apply(ops: Ops, v: Any) -> Any:
        return ops.sub(v, ops.trunc(v))

    return map_values(ctx, (x,), ctx.out_dtype(), apply)


def _polygamma(ctx: LoweringContext, n: int, x: Any) -> Any:
    def apply(ops: Ops, v: Any) -> Any:
        return ops.polygamma(ops.constant(n, ctx.out_dtype()), v)

    return map_values(ctx, (x,), ctx.out_dtype(), apply)


def _fmax_fmin(name: str) -> LoweringFn:
    """fmax / fmin: like maximum / minimum, but a NaN operand yields the other one."""
    pick = named_op(name)

    def lower(ctx: LoweringContext, a: Any, b: Any) -> Any:
        if not ctx.out_dtype().is_floating_point:
            return map_values(ctx, (a, b), ctx.out_dtype(), pick)

        def apply(ops: Ops, x: Any, y: Any) -> Any:
            return ops.where(ops.isnan(x), y, ops.where(ops.isnan(y), x, pick(ops, x, y)))

        return map_values(ctx, (a, b), ctx.out_dtype(), apply)

    lower.__name__ = f"lower_f{name[:3]}"
    return lower


def _angle(ctx: LoweringContext, x: Any) -> Any:
    """angle of a real tensor: pi below zero, else 0 (NaN stays NaN, -0.0 gives 0)."""
    out = ctx.out_dtype()
    if out.is_complex or (is_tensor(x) and x.dtype.is_complex):
        raise Fallback("angle of a complex tensor")

    def apply(ops: Ops, v: Any) -> Any:
        zero = ops.constant(0.0, out)
        phase = ops.where(ops.lt(v, zero), ops.constant(math.pi, out), zero)
        return ops.where(ops.isnan(v), v, phase)

    return map_values(ctx, (x,), out, apply)


def table() -> dict[str, LoweringFn]:
    """The pointwise lowerings, by aten overload name."""
    t: dict[str, LoweringFn] = {}
    for name in _SAME_NAME_UNARY:
        t[f"aten.{name}.default"] = elementwise(name)
    for aten, op in _SPECIAL_UNARY.items():
        t[f"aten.{aten}.default"] = elementwise(op)
    for name in _SAME_NAME_BINARY:
        for overload in ("Tensor", "Scalar", "default", "Tensor_Tensor"):
            t[f"aten.{name}.{overload}"] = elementwise(name)
    for overload in ("Tensor", "Scalar"):
        t[f"aten.fmod.{overload}"] = _fmod
    for aten, op in _SPECIAL_BINARY.items():
        for overload in ("default", "x_scalar", "n_scalar", "self_scalar", "other_scalar"):
            t[f"aten.{aten}.{overload}"] = elementwise(op)
    for name in (*_COMPARE, *_LOGICAL):
        for overload in ("Tensor", "Scalar", "default"):
            t[f"aten.{name}.{overload}"] = compare(name)
    for name in ("isnan", "isinf", "logical_not"):
        t[f"aten.{name}.default"] = predicate(name)
    t["aten.round.default"] = elementwise("round")
    # the op set's rounding, NaN tests and fmod are for floats: integers are handled here
    for name in ("floor", "ceil", "trunc", "round"):
        t[f"aten.{name}.default"] = _float_only(name, elementwise(name), _itself)
    for name in ("isnan", "isinf"):
        t[f"aten.{name}.default"] = _float_only(name, predicate(name), _never)
    t["aten.signbit.default"] = _float_only("signbit", predicate("signbit"), _negative)
    for overload in ("Tensor", "Scalar"):
        t[f"aten.fmod.{overload}"] = _float_only("fmod", elementwise("fmod"), _int_mod)
    for overload in ("Tensor", "Scalar"):
        t[f"aten.add.{overload}"] = _add
        t[f"aten.sub.{overload}"] = _sub
        t[f"aten.rsub.{overload}"] = _rsub
        t[f"aten.mul.{overload}"] = division.mul
        t[f"aten.div.{overload}"] = division.div
        t[f"aten.div.{overload}_mode"] = division.div
    for overload in ("Tensor_Tensor", "Tensor_Scalar", "Scalar"):
        t[f"aten.pow.{overload}"] = _pow
    t["aten.where.self"] = _where
    for overload in ("default", "Tensor"):
        t[f"aten.clamp.{overload}"] = _clamp
        t[f"aten.clamp_min.{overload}"] = _clamp_min
        t[f"aten.clamp_max.{overload}"] = _clamp_max
    t["aten._to_copy.default"] = _to_copy
    t["prims.convert_element_type.default"] = _convert
    t["aten.clone.default"] = _clone
    t["aten.gelu.default"] = _gelu
    t["aten.silu.default"] = _silu
    t["aten.frac.default"] = _frac
    t["aten.polygamma.default"] = _polygamma
    t["aten.fmax.default"] = _fmax_fmin("maximum")
    t["aten.fmin.default"] = _fmax_fmin("minimum")
    t["aten.angle.default"] = _angle
    return t
