"""Libm functions decomposed into ops Triton has everywhere (interpreter and GPU).

Triton's interpreter has no libdevice: only exp/exp2/log/log2/sin/cos/sqrt/erf/floor/ceil/fma.
Everything else is written once here against the op protocol, with accuracy-preserving forms
(Kahan's expm1/log1p, Newton-refined atan), so float64 stays within a few ulp.
"""

from __future__ import annotations

import math

import torch

from polyduct.codegen import Value
from polyduct_triton.prim_ops import TritonPrimitiveOps
from polyduct_triton.values import BITS, LOW_PRECISION, TL_DTYPE, compute_tl, is_float

V = Value


class MathDecompositions(TritonPrimitiveOps):
    """Opt-in mixin: libm functions from primitive ops (see the module docstring)."""

    def _k(self, value: float, like: V) -> V:
        return self._c(value, like.dtype)

    def _compiled(self, fn: str, x0: V) -> V | None:
        """libdevice's `fn` where kernels are compiled (what Inductor calls too: one library
        routine, 2 ulp in float32); None under the interpreter, which has no libdevice and runs
        the decomposition written beside it."""
        if self.ctx.interpret or not is_float(x0.dtype):
            return None
        return self._v(f"libdevice.{fn}({x0})", x0.dtype)

    def expm1(self, x0: V) -> V:
        if (compiled := self._compiled("expm1", x0)) is not None:
            return compiled
        u = self.exp(x0)
        um1 = self.sub(u, self._k(1.0, x0))
        kahan = self.truediv(self.mul(um1, x0), self.log(u))
        out = self.where(self.eq(u, self._k(1.0, x0)), x0, kahan)
        # Kahan's correction matters near 0 only; for larger |x| it would overflow um1 * x.
        out = self.where(self.gt(self.abs(x0), self._k(0.5, x0)), um1, out)
        out = self.where(self.eq(um1, self._k(-1.0, x0)), um1, out)
        return self.where(self.isinf(u), u, out)

    def log1p(self, x0: V) -> V:
        if (compiled := self._compiled("log1p", x0)) is not None:
            return compiled
        u = self.add(x0, self._k(1.0, x0))
        kahan = self.truediv(self.mul(self.log(u), x0), self.sub(u, self._k(1.0, x0)))
        out = self.where(self.eq(u, self._k(1.0, x0)), x0, kahan)
        return self.where(self.gt(x0, self._k(2.0**60, x0)), self.log(x0), out)

    def log10(self, x0: V) -> V:
        return self.truediv(self.log(x0), self._k(math.log(10.0), x0))

    def tan(self, x0: V) -> V:
        return self.truediv(self.sin(x0), self.cos(x0))

    def sigmoid(self, x0: V) -> V:
        one = self._k(1.0, x0)
        denominator = self.add(one, self.exp(self.neg(x0)))
        if not self.ctx.interpret and compute_tl(x0.dtype) == "tl.float32":
            # Compiled float32 `/` is div.full (2 ulp), as in Inductor's sigmoid: the exactly
            # rounded division's slow path made a chain of sigmoids 1.6x slower on an H100.
            return self._v(f"({one} / {denominator})", x0.dtype)
        return self.truediv(one, denominator)

    def tanh(self, x0: V) -> V:
        if (compiled := self._compiled("tanh", x0)) is not None:
            return compiled  # the decomposition below was 2.8x slower than Inductor's on a GPU
        e = self.expm1(self.mul(self.abs(x0), self._k(-2.0, x0)))
        t = self.truediv(self.neg(e), self.add(e, self._k(2.0, x0)))
        return self.copysign(t, x0)

    def _exp_half_sq(self, a: V) -> V:
        """0.5 * exp(a), computed without overflow where the result is finite."""
        h = self.exp(self.mul(a, self._k(0.5, a)))
        return self.mul(self.mul(h, self._k(0.5, a)), h)

    def sinh(self, x0: V) -> V:
        a = self.abs(x0)
        e = self.expm1(a)
        small = self.mul(self.add(e, self.truediv(e, self.add(e, self._k(1.0, a)))), self._k(0.5, a))
        small = self.where(self.isinf(e), e, small)
        # Past 20, 0.5 * exp(a) is the answer; halving before squaring keeps it finite up to
        # the top of the range (torch's float32 CPU kernel overflows about 0.7 early).
        big = self.gt(a, self._k(20.0, a))
        return self.copysign(self.where(big, self._exp_half_sq(a), small), x0)

    def cosh(self, x0: V) -> V:
        a = self.abs(x0)
        e = self.exp(a)
        small = self.mul(self.add(e, self.truediv(self._k(1.0, a), e)), self._k(0.5, a))
        return self.where(self.gt(a, self._k(20.0, a)), self._exp_half_sq(a), small)

    def asinh(self, x0: V) -> V:
        a = self.abs(x0)
        one = self._k(1.0, a)
        sq = self.sqrt(self.add(one, self.mul(a, a)))
        small = self.log1p(self.add(a, self.truediv(self.mul(a, a), self.add(one, sq))))
        big = self.add(self.log(a), self._k(math.log(2.0), a))
        return self.copysign(self.where(self.gt(a, self._k(2.0**28, a)), big, small), x0)

    def acosh(self, x0: V) -> V:
        t = self.sub(x0, self._k(1.0, x0))
        small = self.log1p(self.add(t, self.sqrt(self.add(self.mul(t, self._k(2.0, t)), self.mul(t, t)))))
        big = self.add(self.log(x0), self._k(math.log(2.0), x0))
        out = self.where(self.gt(x0, self._k(2.0**28, x0)), big, small)
        return self.where(self.lt(x0, self._k(1.0, x0)), self._k(math.nan, x0), out)

    def atanh(self, x0: V) -> V:
        a = self.abs(x0)
        r = self.log1p(self.truediv(self.mul(a, self._k(2.0, a)), self.sub(self._k(1.0, a), a)))
        return self.copysign(self.mul(r, self._k(0.5, a)), x0)

    def _atan01(self, t: V) -> V:
        """atan(t) for t in [0, 1]: a rough start refined by Newton steps on tan(y) = t."""
        y = self.mul(t, self.add(self._k(math.pi / 4, t),
                                 self.mul(self._k(0.273, t), self.sub(self._k(1.0, t), t))))
        for _ in range(3 if t.dtype != torch.float64 else 4):
            s, c = self.sin(y), self.cos(y)
            y = self.sub(y, self.mul(c, self.sub(s, self.mul(t, c))))
        return y

    def atan(self, x0: V) -> V:
        a = self.abs(x0)
        big = self.gt(a, self._k(1.0, a))
        t = self.where(big, self.truediv(self._k(1.0, a), a), a)
        r = self._atan01(t)
        r = self.where(big, self.sub(self._k(math.pi / 2, a), r), r)
        return self.copysign(r, x0)

    def atan2(self, x0: V, x1: V) -> V:
        ay, ax = self.abs(x0), self.abs(x1)
        swap = self.gt(ay, ax)
        t = self.truediv(self.where(swap, ax, ay), self.where(swap, ay, ax))
        both_inf = self.logical_and(self.isinf(ay), self.isinf(ax))
        t = self.where(self.eq(ay, ax), self._k(1.0, t), t)
        t = self.where(self.eq(ay, self._k(0.0, ay)), self._k(0.0, t), t)
        r = self._atan01(t)
        r = self.where(swap, self.sub(self._k(math.pi / 2, r), r), r)
        r = self.where(both_inf, self._k(math.pi / 4, r), r)
        r = self.where(self.signbit(x1), self.sub(self._k(math.pi, r), r), r)
        r = self.where(self.logical_or(self.isnan(x0), self.isnan(x1)), self.add(x0, x1), r)
        return self.copysign(r, x0)

    def asin(self, x0: V) -> V:
        one = self._k(1.0, x0)
        c = self.sqrt(self.mul(self.sub(one, x0), self.add(one, x0)))
        return self.atan2(x0, c)

    def acos(self, x0: V) -> V:
        one = self._k(1.0, x0)
        s = self.sqrt(self.mul(self.sub(one, x0), self.add(one, x0)))
        return self.atan2(s, x0)

    def erfc(self, x0: V) -> V:
        # For x > 0.5 use the scaled form exp(-x²)·erfcx(x), avoiding 1 - erf cancellation.
        big = self.gt(x0, self._k(0.5, x0))
        tail = self.mul(self._exp_neg_sq(x0), self.erfcx(x0))  # type: ignore[attr-defined]
        out = self.where(big, tail, self.sub(self._k(1.0, x0), self.erf(x0)))
        return self.where(self.gt(x0, self._k(30.0, x0)), self._k(0.0, x0), out)

    def _exp_neg_sq(self, x: V) -> V:
        """exp(-x²) with x² split into hi + lo so large x keeps full relative accuracy."""
        hi = self.trunc(self.mul(x, self._k(4096.0, x)))
        hi = self.mul(hi, self._k(1.0 / 4096.0, x))
        lo = self.sub(x, hi)
        return self.mul(self.exp(self.neg(self.mul(hi, hi))),
                        self.exp(self.neg(self.mul(lo, self.add(x, hi)))))

    def copysign(self, x0: V, x1: V) -> V:
        a = self.abs(x0)
        return self.where(self.signbit(x1), self.mul(a, self._k(-1.0, a)), a)

    def hypot(self, x0: V, x1: V) -> V:
        a, b = self.abs(x0), self.abs(x1)
        hi, lo = self.maximum(a, b), self.minimum(a, b)
        r = self.truediv(lo, self.where(self.eq(hi, self._k(0.0, hi)), self._k(1.0, hi), hi))
        out = self.mul(hi, self.sqrt(self.add(self._k(1.0, r), self.mul(r, r))))
        inf = self.logical_or(self.isinf(a), self.isinf(b))
        return self.where(inf, self._k(math.inf, a), out)

    def ldexp(self, x0: V, n: V) -> V:
        return self.mul(x0, self.exp2(self.to_dtype(n, x0.dtype)))

    def pow(self, x0: V, x1: V) -> V:
        if not is_float(x0.dtype):
            return self._v(f"_ipow({x0}, {x1}, {x0.dtype.is_signed})", x0.dtype)
        # eager's bfloat16 rounds every NaN to the positive one
        cpu = self.ctx.interpret and x0.dtype != torch.bfloat16
        return self._v(f"_fpow({x0}, {x1}, {cpu})", x0.dtype)

    def frexp(self, x0: V) -> tuple[V, V]:
        src = torch.float32 if x0.dtype in LOW_PRECISION else x0.dtype
        if src == torch.float64:
            args = "tl.int64, 52, 0x7FF0000000000000, 1022, 2.2250738585072014e-308"
        else:
            args = "tl.int32, 23, 0x7F800000, 126, 1.1754943508222875e-38"
        expr = f"_frexp({x0}, {args})"
        pair = self._v(expr, x0.dtype)
        return V(f"{pair}[0]", x0.dtype), V(f"{pair}[1]", torch.int32)

    def nextafter(self, x0: V, x1: V) -> V:
        if x0.dtype in LOW_PRECISION:
            bf16 = x0.dtype == torch.bfloat16
            return self._v(f"_nextafter_narrow({x0}, {x1}, {bf16})", x0.dtype)
        return self._v(f"_nextafter({x0}, {x1}, {TL_DTYPE[BITS[x0.dtype]]})", x0.dtype)
