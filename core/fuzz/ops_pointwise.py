"""Pointwise op generators: unary, binary with broadcasting and scalars, casts, where, clamp."""

from __future__ import annotations

import torch

from polyduct.fuzz.gen import Emit, Gen, Val, broadcastable

# Inexact for floats; their float result on ints and bools exercises type promotion.
INEXACT_UNARY = (
    "torch.sin({x})", "torch.cos({x})", "torch.tan({x})", "torch.exp({x})", "torch.exp2({x})",
    "torch.log({x})", "torch.log2({x})", "torch.log1p({x})", "torch.expm1({x})",
    "torch.sqrt({x})", "torch.rsqrt({x})", "torch.tanh({x})", "torch.sigmoid({x})",
    "torch.erf({x})", "torch.erfc({x})", "torch.atan({x})", "torch.asin({x})", "torch.acos({x})",
    "torch.sinh({x})", "torch.cosh({x})", "torch.asinh({x})", "torch.atanh({x})",
    "torch.reciprocal({x})", "torch.lgamma({x})", "torch.frac({x})", "torch.erfinv({x})",
    "torch.nn.functional.gelu({x})", "torch.nn.functional.silu({x})",
    "torch.nn.functional.softplus({x})", "torch.nn.functional.mish({x})",
    "torch.nn.functional.elu({x})", "torch.nn.functional.leaky_relu({x}, 0.1)",
    "torch.nn.functional.hardswish({x})", "torch.nn.functional.logsigmoid({x})",
    "torch.square({x})", "({x} * {x})", "torch.sinc({x})",
)
# Continuous and exact: the result is exact when the input is.
EXACT_UNARY = (
    "torch.neg({x})", "torch.abs({x})", "torch.relu({x})", "(-{x})",
    "torch.nn.functional.hardtanh({x})", "torch.nan_to_num({x})", "{x}.clone()",
    "torch.nan_to_num({x}, nan=0.5, posinf=2.0, neginf=-3.0)",
)
# Discontinuous: only on exact inputs.
DISC_UNARY = (
    "torch.floor({x})", "torch.ceil({x})", "torch.round({x})", "torch.trunc({x})",
    "torch.sign({x})", "torch.signbit({x})", "torch.isnan({x})", "torch.isinf({x})",
    "torch.isfinite({x})", "torch.isposinf({x})", "torch.logical_not({x})", "({x} != 0)",
)
INT_UNARY = ("torch.bitwise_not({x})", "(~{x})")

INEXACT_BINARY = (
    "torch.add({a}, {b})", "({a} + {b})", "({a} - {b})", "({a} * {b})", "torch.sub({a}, {b})",
    "torch.mul({a}, {b})", "torch.div({a}, {b})", "({a} / {b})", "torch.atan2({a}, {b})",
    "torch.hypot({a}, {b})", "torch.logaddexp({a}, {b})", "torch.add({a}, {b}, alpha=2)",
    "torch.xlogy({a}, {b})",
)
EXACT_BINARY = (
    "torch.maximum({a}, {b})", "torch.minimum({a}, {b})", "torch.fmax({a}, {b})",
    "torch.fmin({a}, {b})", "torch.copysign({a}, {b})",
)
DISC_BINARY = (
    "({a} < {b})", "({a} <= {b})", "({a} > {b})", "({a} >= {b})", "({a} == {b})",
    "torch.ne({a}, {b})", "torch.logical_and({a}, {b})", "torch.logical_or({a}, {b})",
    "torch.logical_xor({a}, {b})",
)
INT_BINARY = ("({a} & {b})", "({a} | {b})", "({a} ^ {b})", "torch.bitwise_xor({a}, {b})")
# Integer-safe division: the divisor is positive (no division by zero, no INT_MIN / -1).
DIVISION = (
    "torch.floor_divide({a}, {b})", "torch.remainder({a}, {b})", "torch.fmod({a}, {b})",
    "({a} // {b})", "({a} % {b})", "torch.div({a}, {b}, rounding_mode='trunc')",
    "torch.div({a}, {b}, rounding_mode='floor')",
)
FLOAT_SCALARS = ("2.5", "-0.5", "3", "0", "-0.0", "1e-3", "float('inf')", "float('nan')", "True")
INT_SCALARS = ("2", "-3", "0", "1", "7", "True")
CASTS = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
         torch.int8, torch.uint8, torch.bool)


def _fmt(template: str, **names: str) -> str:
    return template.format(**names)


def _operand(g: Gen, x: Val, exact_only: bool, scalar_p: float = 0.3) -> tuple[str, bool] | None:
    """A second operand for `x`: a broadcastable pool value or a Python scalar."""
    if g.chance(scalar_p):
        pool = FLOAT_SCALARS if x.is_float() and g.chance(0.7) else INT_SCALARS
        return str(g.choice(pool)), True
    other = g.pick(lambda v: broadcastable(x, v) and (v.exact or not exact_only))
    return (other.name, other.exact) if other is not None else None


def unary(g: Gen) -> Emit | None:
    x = g.pick()
    if x is None:
        return None
    roll = g.rng.random()
    if roll < 0.5:
        return Emit(_fmt(str(g.choice(INEXACT_UNARY)), x=x.name), None if x.exact else False)
    if roll < 0.7:
        return Emit(_fmt(str(g.choice(EXACT_UNARY)), x=x.name), x.exact)
    if roll < 0.9 and x.exact:
        return Emit(_fmt(str(g.choice(DISC_UNARY)), x=x.name), True)
    if (x.is_int() or x.is_bool()) and not g.train:
        return Emit(_fmt(str(g.choice(INT_UNARY)), x=x.name), True)
    return None


def binary(g: Gen) -> Emit | None:
    a = g.pick()
    if a is None:
        return None
    roll = g.rng.random()
    if roll < 0.45:
        b = _operand(g, a, exact_only=False)
        if b is None:
            return None
        names = (a.name, b[0]) if g.chance(0.8) else (b[0], a.name)
        expr = _fmt(str(g.choice(INEXACT_BINARY)), a=names[0], b=names[1])
        return Emit(expr, None if a.exact and b[1] else False)
    if roll < 0.6:
        b = _operand(g, a, exact_only=False)
        return None if b is None else Emit(
            _fmt(str(g.choice(EXACT_BINARY)), a=a.name, b=b[0]), a.exact and b[1])
    if not a.exact:
        return None
    if roll < 0.8:
        b = _operand(g, a, exact_only=True)
        return None if b is None else Emit(_fmt(str(g.choice(DISC_BINARY)), a=a.name, b=b[0]), True)
    if roll < 0.9:
        return _division(g, a)
    if a.is_int() or a.is_bool():
        b = _operand(g, a, exact_only=True, scalar_p=0.2)
        if b is None:
            return None
        if g.chance(0.3) and a.is_int():
            return Emit(f"({a.name} << {g.rng.randrange(6)})" if g.chance(0.5)
                        else f"({a.name} >> {g.rng.randrange(6)})", True)
        return Emit(_fmt(str(g.choice(INT_BINARY)), a=a.name, b=b[0]), True)
    return None


def _division(g: Gen, a: Val) -> Emit | None:
    b = g.pick(lambda v: broadcastable(a, v) and v.exact)
    template = str(g.choice(DIVISION))
    if b is None or g.chance(0.3):
        return Emit(_fmt(template, a=a.name, b=str(g.choice(("3", "-2", "7", "0.75")))), True)
    if b.is_int() or b.is_bool():
        # Positive integer divisor: no division by zero, and no INT_MIN // -1 overflow.
        return Emit(_fmt(template, a=a.name, b=f"{b.name}.clamp(min=1)"), True)
    return Emit(_fmt(template, a=a.name, b=b.name), True)


def pow_(g: Gen) -> Emit | None:
    a = g.pick(lambda v: not v.is_bool())
    if a is None:
        return None
    if a.is_int():
        return Emit(f"torch.pow({a.name}, {g.choice((0, 1, 2, 3))})", a.exact)
    exp = g.pick(lambda v: v.is_float() and broadcastable(a, v))
    e = exp.name if exp is not None and g.chance(0.4) else str(g.choice((2, 3, 0.5, -1, 1.5, -2)))
    return Emit(f"torch.pow({a.name}, {e})", False)


def where(g: Gen) -> Emit | None:
    cond = g.pick(lambda v: v.exact and (v.is_bool() or not g.train))
    a = g.pick()
    if cond is None or a is None or not broadcastable(cond, a):
        return None
    c = cond.name if cond.is_bool() else f"({cond.name} > 0)"
    b = _operand(g, a, exact_only=False)
    if b is None or not broadcastable(cond, a):
        return None
    return Emit(f"torch.where({c}, {a.name}, {b[0]})", a.exact and b[1])


def clamp(g: Gen) -> Emit | None:
    x = g.pick(lambda v: not v.is_bool())
    if x is None:
        return None
    lo, hi = sorted(float(g.rng.choice((-2, -1, 0, 1, 3))) for _ in range(2))
    if x.is_float() and g.chance(0.3):
        lo, hi = lo - 0.5, hi + 0.25
    elif not x.is_float() or g.chance(0.5):
        lo, hi = int(lo), int(hi)
    form = g.rng.randrange(4)
    if form == 0:
        return Emit(f"torch.clamp({x.name}, {lo}, {hi})", x.exact)
    if form == 1:
        return Emit(f"{x.name}.clamp(min={lo})", x.exact)
    if form == 2:
        return Emit(f"torch.clamp({x.name}, max={hi})", x.exact)
    other = g.pick(lambda v: broadcastable(x, v) and not v.is_bool())
    return None if other is None else Emit(
        f"torch.clamp({x.name}, min={other.name})", x.exact and other.exact)


def ternary(g: Gen) -> Emit | None:
    a = g.pick(lambda v: v.is_float())
    if a is None:
        return None
    b = g.pick(lambda v: v.is_float() and broadcastable(a, v))
    c = g.pick(lambda v: v.is_float() and broadcastable(a, v))
    if b is None or c is None:
        return None
    form = g.rng.randrange(3)
    if form == 0:
        return Emit(f"torch.lerp({a.name}, {b.name}, 0.25)", False)
    if form == 1:
        return Emit(f"torch.addcmul({a.name}, {b.name}, {c.name}, value=0.5)", False)
    return Emit(f"torch.addcdiv({a.name}, {b.name}, {c.name}, value=-2)", False)


def cast(g: Gen) -> Emit | None:
    x = g.pick()
    if x is None:
        return None
    target = g.rng.choice([d for d in CASTS if d in g.dtypes])
    name = f"torch.{str(target).removeprefix('torch.')}"
    if x.is_float() and not target.is_floating_point:
        if not x.exact:
            return None
        if target == torch.bool:
            return Emit(f"{x.name}.to({name})", True)
        # Float to integer is undefined in C for NaN, inf and out-of-range values.
        lo = 0 if target == torch.uint8 else -100
        return Emit(f"{x.name}.nan_to_num(0.0, 0.0, 0.0).clamp({lo}, 100).to({name})", True)
    if g.train and not target.is_floating_point:
        return None
    return Emit(f"{x.name}.to({name})", x.exact)


OPS = (
    ("unary", 30, unary),
    ("binary", 40, binary),
    ("pow", 4, pow_),
    ("where", 6, where),
    ("clamp", 5, clamp),
    ("ternary", 3, ternary),
    ("cast", 8, cast),
)
