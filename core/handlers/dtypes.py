"""`DtypePropagation`: the op set evaluated on dtypes, one explicit rule per op.

Call an op with dtypes in place of values and it returns the result dtype (a tuple for
multi-output ops, None for ops without a value). Rules follow each op's docstring in
`polyduct.ops` and torch's semantics.

Compute types: ops on float16/bfloat16 operands report the *storage* dtype (float16 stays
float16), even though backends compute them in float32 (docs/conventions.md). The storage dtype
is what decides how a stored value rounds, and a backend that types its temporaries maps it to
its compute type in one place (`compute_dtype`).

Ops whose rule is shared (for example "keeps the first operand's dtype") are bound to one named
rule function with one class attribute per op; the class statement lists every op explicitly, and
a missing rule fails when this module is imported.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, Final

import sympy
import torch

from polyduct.errors import IncompleteBackend
from polyduct.ops import ReductionType, StoreMode, missing_ops, reduction_num_outputs

D = torch.dtype
# Dtypes held in float32 while computing (docs/conventions.md), and every float dtype.
LOW_PRECISION: Final = frozenset({torch.float16, torch.bfloat16})
FLOATS: Final = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})


def compute_dtype(dtype: D) -> D:
    """The dtype a backend computes `dtype` values in: float32 for float16/bfloat16."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def promote(*dtypes: D) -> D:
    """torch's type promotion of tensors of `dtypes` (all dimensioned, same category rules)."""
    if not dtypes:
        raise ValueError("promote() needs at least one dtype")
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = torch.promote_types(result, dtype)
    return result


def _first(self: DtypePropagation, x0: D, *rest: Any) -> D:
    """The result has the first operand's dtype."""
    return x0


def _second(self: DtypePropagation, x: Any, y: D) -> D:
    """The result has the second operand's dtype (polygamma(n, y))."""
    return y


def _boolean(self: DtypePropagation, *args: Any) -> D:
    """A predicate: the result is bool."""
    return torch.bool


def _to(self: DtypePropagation, x: Any, dtype: D, *rest: Any) -> D:
    """A conversion: the result has the requested `dtype`."""
    return dtype


def _no_value(self: DtypePropagation, *args: Any) -> None:
    """A side effect only (store, assertion): no value."""
    return


class DtypePropagation:
    """`OpHandler[torch.dtype]`: each op maps operand dtypes to its result dtype.

    `buffers` gives the dtype of every buffer a body may `load` (by name).
    """

    def __init__(self, buffers: Mapping[str, D] | None = None) -> None:
        self.buffers: dict[str, D] = dict(buffers or {})
        self._indirect = itertools.count()

    # math: the result keeps the first operand's dtype
    abs = _first
    acos = _first
    acosh = _first
    add = _first
    airy_ai = _first
    asin = _first
    asinh = _first
    atan = _first
    atan2 = _first
    atanh = _first
    bessel_j0 = _first
    bessel_j1 = _first
    bessel_y0 = _first
    bessel_y1 = _first
    ceil = _first
    chebyshev_polynomial_t = _first
    chebyshev_polynomial_u = _first
    chebyshev_polynomial_v = _first
    chebyshev_polynomial_w = _first
    copysign = _first
    cos = _first
    cosh = _first
    digamma = _first
    div_rn = _first
    erf = _first
    erfc = _first
    erfcx = _first
    erfinv = _first
    exp = _first
    exp2 = _first
    expm1 = _first
    floor = _first
    floordiv = _first
    fma = _first
    fmod = _first
    gammainc = _first
    gammaincc = _first
    hermite_polynomial_h = _first
    hermite_polynomial_he = _first
    hypot = _first
    i0 = _first
    i0e = _first
    i1 = _first
    i1e = _first
    igamma = _first
    igammac = _first
    laguerre_polynomial_l = _first
    ldexp = _first
    legendre_polynomial_p = _first
    lgamma = _first
    log = _first
    log10 = _first
    log1p = _first
    log2 = _first
    log_ndtr = _first
    maximum = _first
    minimum = _first
    mod = _first
    modified_bessel_i0 = _first
    modified_bessel_i1 = _first
    modified_bessel_k0 = _first
    modified_bessel_k1 = _first
    mul = _first
    mul_rn = _first
    ndtr = _first
    ndtri = _first
    neg = _first
    nextafter = _first
    polygamma = _second
    pow = _first
    reciprocal = _first
    relu = _first
    remainder = _first
    round = _first
    rsqrt = _first
    scaled_modified_bessel_k0 = _first
    scaled_modified_bessel_k1 = _first
    shifted_chebyshev_polynomial_t = _first
    shifted_chebyshev_polynomial_u = _first
    shifted_chebyshev_polynomial_v = _first
    shifted_chebyshev_polynomial_w = _first
    sigmoid = _first
    sign = _first
    sin = _first
    sinh = _first
    spherical_bessel_j0 = _first
    sqrt = _first
    square = _first
    sub = _first
    tan = _first
    tanh = _first
    truediv = _first
    trunc = _first
    truncdiv = _first
    zeta = _first

    def frexp(self, x0: D) -> tuple[D, D]:
        return x0, torch.int32

    def int_truediv(self, x0: D, x1: D) -> D:
        return torch.float32

    # comparison
    eq = _boolean
    ge = _boolean
    gt = _boolean
    isinf = _boolean
    isnan = _boolean
    le = _boolean
    lt = _boolean
    ne = _boolean
    signbit = _boolean

    # bitwise and logical
    and_ = _boolean
    bitwise_and = _first
    bitwise_left_shift = _first
    bitwise_not = _first
    bitwise_or = _first
    bitwise_right_shift = _first
    bitwise_xor = _first
    logical_and = _boolean
    logical_not = _boolean
    logical_or = _boolean
    logical_xor = _boolean
    lshift = _first
    or_ = _boolean
    rshift = _first
    xor = _boolean

    # dtype
    ceil_to_int = _to
    floor_to_int = _to
    round_to_int = _to
    trunc_to_int = _to
    to_dtype_bitcast = _to

    def to_dtype(
        self, x: D, dtype: D, src_dtype: D | None = None, use_compute_types: bool = True
    ) -> D:
        return dtype

    # memory
    def load(self, name: str, index: sympy.Expr) -> D:
        if name not in self.buffers:
            known = ", ".join(sorted(self.buffers)) or "none"
            raise KeyError(f"dtype propagation: unknown buffer {name!r} (known: {known})")
        return self.buffers[name]

    def store(self, name: str, index: sympy.Expr, value: D, mode: StoreMode = None) -> None:
        return

    store_reduction = _no_value
    check_bounds = _no_value
    device_assert_async = _no_value

    # indexing
    def bucketize(
        self,
        values: D,
        boundaries: tuple[str, sympy.Expr, sympy.Expr, sympy.Expr],
        boundary_indices: D,
        indexing_dtype: D,
        right: bool,
        sorter: tuple[str, sympy.Expr] | None = None,
        sorter_indices: D | None = None,
    ) -> D:
        return indexing_dtype

    def index_expr(self, expr: sympy.Expr, dtype: D) -> D:
        return dtype

    def value_expr(self, expr: sympy.Expr, dtype: D) -> D:
        return dtype

    def indirect_indexing(
        self, x: D, size: sympy.Expr, check: bool = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        return sympy.Symbol(f"indirect{next(self._indirect)}", integer=True, nonnegative=True)

    # reduction, scan, sort
    def reduction(
        self, dtype: D, src_dtype: D, reduction_type: ReductionType, value: Any
    ) -> D | tuple[D, ...]:
        count = reduction_num_outputs(reduction_type)
        return dtype if count == 1 else (dtype,) * count

    def scan(
        self,
        dtypes: tuple[D, ...],
        combine_fn: Callable[[tuple[D, ...], tuple[D, ...]], tuple[D, ...]],
        values: tuple[D, ...],
    ) -> tuple[D, ...]:
        return tuple(dtypes)

    def sort(
        self, dtypes: tuple[D, ...], values: tuple[D, ...], stable: bool, descending: bool
    ) -> tuple[D, ...]:
        return tuple(dtypes)

    # random
    def load_seed(self, name: str, offset: D) -> D:
        return torch.int64

    def rand(self, seed: D, offset: D) -> D:
        return torch.float32

    def randn(self, seed: D, offset: D) -> D:
        return torch.float32

    def randint64(self, seed: D, offset: D, low: D, high: D) -> D:
        return torch.int64

    # other
    def constant(self, value: bool | float, dtype: D) -> D:
        return dtype

    def identity(self, x: D) -> D:
        return x

    def masked(self, mask: D, body: Callable[[], Any], other: Any) -> Any:
        return body()

    def where(self, condition: D, input: D, other: D) -> D:
        return input


_MISSING: Final = missing_ops(DtypePropagation)
if _MISSING:
    raise IncompleteBackend("dtype propagation", _MISSING)
