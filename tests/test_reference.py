"""Reference kernel backend: kernels built from small specs, compared with torch eager."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import sympy
import torch

from polyduct.errors import KernelIndexError
from polyduct.indexing import size_symbol
from polyduct.kernel import KernelBuffer, KernelSpec, Stage, check_complete
from polyduct.ops import REDUCTION_TYPES
from polyduct.reference.backend import ReferenceBackend

BACKEND = ReferenceBackend()
S0 = size_symbol("s0")
EDGES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -3.5]


@pytest.fixture(autouse=True)
def _cache(isolated_cache: Path) -> Path:
    return isolated_cache


def buf(name: str, dtype: torch.dtype, role: str, numel: Any) -> KernelBuffer:
    return KernelBuffer(name, dtype, role, sympy.sympify(numel))  # type: ignore[arg-type]


def run(
    ranges: Sequence[Any],
    rranges: Sequence[Any],
    stages: Sequence[tuple[str, Callable[..., None]]],
    buffers: Sequence[KernelBuffer],
    args: Sequence[Any],
    size_args: Sequence[sympy.Symbol] = (),
) -> str:
    spec = KernelSpec(
        "k_test",
        tuple(sympy.sympify(r) for r in ranges),
        tuple(sympy.sympify(r) for r in rranges),
        tuple(Stage(kind, body) for kind, body in stages),  # type: ignore[arg-type]
        tuple(buffers),
        tuple(size_args),
    )
    source = BACKEND.codegen(spec)
    BACKEND.load([source])["k_test"](*args)
    return source.source


def randn(*shape: int, seed: int = 0, edges: bool = True) -> torch.Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    if edges:
        flat = x.view(-1)
        flat[: len(EDGES)] = torch.tensor(EDGES[: flat.numel()])
    return x


def test_backend_is_complete_and_deterministic() -> None:
    check_complete(ReferenceBackend)
    body = _pointwise_body("exp")
    spec = KernelSpec("k", (sympy.Integer(4),), (), (Stage("outer", body),), _pw_buffers(4))
    assert BACKEND.codegen(spec).source == BACKEND.codegen(spec).source


def _pw_buffers(n: Any, dtype: torch.dtype = torch.float32) -> tuple[KernelBuffer, ...]:
    return (buf("a", dtype, "in", n), buf("out", dtype, "out", n))


def _pointwise_body(op: str) -> Callable[..., None]:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.store("out", x[0], getattr(ops, op)(ops.load("a", x[0])))

    return body


def test_pointwise_dynamic_size_and_strided_view() -> None:
    base = randn(5, 7)
    view = base.t()  # shape (7, 5), strides (1, 7)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0] * 1 + x[1] * S0)  # element (x0, x1) of the view
        two = ops.constant(2.0, torch.float32)
        ops.store("out", x[0] * 5 + x[1], ops.mul(ops.sigmoid(value), two))

    out = torch.empty(7, 5)
    buffers = (buf("a", torch.float32, "in", 5 * S0), buf("out", torch.float32, "out", 35))
    run((7, 5), (), [("outer", body)], buffers, (view, out, 7), (S0,))
    torch.testing.assert_close(out, torch.sigmoid(view) * 2, equal_nan=True)


def test_half_loads_compute_in_float32_and_stores_round() -> None:
    a = randn(33, seed=1).half()
    b = randn(33, seed=2).half()

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.store("out", x[0], ops.add(ops.load("a", x[0]), ops.load("b", x[0])))

    out = torch.empty(33, dtype=torch.float16)
    buffers = (*_pw_buffers(33, torch.float16)[:1], buf("b", torch.float16, "in", 33))
    run((33,), (), [("outer", body)], (*buffers, buf("out", torch.float16, "out", 33)), (a, b, out))
    torch.testing.assert_close(out, a + b, equal_nan=True, rtol=0, atol=0)


def test_int8_wraps() -> None:
    a = torch.tensor([127, -128, 100, 5], dtype=torch.int8)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0])
        ops.store("out", x[0], ops.add(value, ops.constant(100, torch.int8)))

    out = torch.empty(4, dtype=torch.int8)
    run((4,), (), [("outer", body)], _pw_buffers(4, torch.int8), (a, out))
    assert torch.equal(out, a + torch.tensor(100, dtype=torch.int8))


REDUCTION_EXPECT: dict[str, Callable[[torch.Tensor], tuple[torch.Tensor, ...]]] = {
    "sum": lambda t: (t.sum(1),),
    "prod": lambda t: (t.prod(1),),
    "max": lambda t: (t.amax(1),),
    "min": lambda t: (t.amin(1),),
    "argmax": lambda t: (t.argmax(1),),
    "argmin": lambda t: (t.argmin(1),),
    "any": lambda t: (t.any(1),),
    "xor_sum": lambda t: (_xor_rows(t),),
    "welford_reduce": lambda t: (
        t.mean(1),
        ((t - t.mean(1, True)) ** 2).sum(1),
        torch.full((t.shape[0],), float(t.shape[1])),
    ),
    "online_softmax_reduce": lambda t: (t.amax(1), torch.exp(t - t.amax(1, True)).sum(1)),
}


def _xor_rows(t: torch.Tensor) -> torch.Tensor:
    result = torch.zeros(t.shape[0], dtype=t.dtype)
    for column in t.unbind(1):
        result ^= column
    return result


def _reduction_input(kind: str) -> torch.Tensor:
    if kind == "xor_sum":
        return torch.randint(-1000, 1000, (4, 9), generator=torch.Generator().manual_seed(3))
    if kind == "any":
        return (randn(4, 9, edges=False) > 1.0).to(torch.float32)
    t = randn(4, 9, seed=4, edges=False)
    if kind in ("max", "min", "argmax", "argmin"):
        t[1, 3] = t[1, 6] = float("nan")  # first NaN wins
        t[2, 2] = t[2, 5] = 9.0 if kind in ("max", "argmax") else -9.0  # ties: first index
        t[3, :] = float("-inf")
    return t


@pytest.mark.parametrize("kind", sorted(set(REDUCTION_TYPES) - {"welford_combine"}))
def test_reduction(kind: str) -> None:
    t = _reduction_input(kind)
    expected = REDUCTION_EXPECT[kind](t)
    dtype = {"argmax": torch.int64, "argmin": torch.int64, "any": torch.bool}.get(kind, t.dtype)
    outs = [torch.empty(4, dtype=dtype) for _ in expected]

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        result = ops.reduction(dtype, t.dtype, kind, ops.load("a", x[0] * 9 + r[0]))
        for i, value in enumerate(result if isinstance(result, tuple) else (result,)):
            ops.store_reduction(f"out{i}", x[0], value)

    buffers = [buf("a", t.dtype, "in", 36)] + [
        buf(f"out{i}", dtype, "out", 4) for i in range(len(outs))
    ]
    run((4,), (9,), [("reduce", body)], buffers, (t, *outs))
    for got, want in zip(outs, expected, strict=True):
        torch.testing.assert_close(got, want.to(dtype), equal_nan=True)


def test_welford_combine_matches_variance() -> None:
    t = randn(3, 12, seed=5, edges=False)
    parts = t.view(3, 4, 3)  # 4 chunks of 3 per row
    mean, m2 = parts.mean(2), ((parts - parts.mean(2, True)) ** 2).sum(2)
    weight = torch.full((3, 4), 3.0)
    outs = [torch.empty(3) for _ in range(3)]

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = tuple(ops.load(n, x[0] * 4 + r[0]) for n in ("m", "q", "w"))
        result = ops.reduction(torch.float32, torch.float32, "welford_combine", value)
        for i, part in enumerate(result):
            ops.store_reduction(f"out{i}", x[0], part)

    buffers = [buf(n, torch.float32, "in", 12) for n in ("m", "q", "w")]
    buffers += [buf(f"out{i}", torch.float32, "out", 3) for i in range(3)]
    run((3,), (4,), [("reduce", body)], buffers, (mean, m2, weight, *outs))
    torch.testing.assert_close(outs[0], t.mean(1))
    torch.testing.assert_close(outs[1] / outs[2], t.var(1, unbiased=False))


def test_two_reduction_dims_argmax_is_flat_row_major() -> None:
    t = randn(2, 3, 4, seed=6, edges=False)
    out = torch.empty(2, dtype=torch.int64)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0] * 12 + r[0] * 4 + r[1])
        ops.store_reduction("out", x[0], ops.reduction(torch.int64, torch.float32, "argmax", value))

    buffers = (buf("a", torch.float32, "in", 24), buf("out", torch.int64, "out", 2))
    run((2,), (3, 4), [("reduce", body)], buffers, (t, out))
    assert torch.equal(out, t.view(2, 12).argmax(1))


def test_local_buffer_softmax() -> None:
    t = randn(3, 10, seed=7, edges=False)
    out = torch.empty(3, 10)

    def reduce(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        top = ops.reduction(torch.float32, torch.float32, "max", ops.load("a", x[0] * 10 + r[0]))
        ops.store_reduction("top", x[0], top)

    def inner(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        shifted = ops.sub(ops.load("a", x[0] * 10 + r[0]), ops.load("top", x[0]))
        ops.store("out", x[0] * 10 + r[0], ops.exp(shifted))

    buffers = (
        buf("a", torch.float32, "in", 30),
        buf("top", torch.float32, "local", 3),
        buf("out", torch.float32, "out", 30),
    )
    run((3,), (10,), [("reduce", reduce), ("inner", inner)], buffers, (t, out))
    torch.testing.assert_close(out, torch.exp(t - t.amax(1, True)))


def test_scan_cumsum_and_two_value_cummax() -> None:
    t = randn(3, 11, seed=8, edges=False)
    total, best, where = (
        torch.empty(3, 11),
        torch.empty(3, 11),
        torch.empty(3, 11, dtype=torch.int64),
    )

    def combine(ops: Any) -> Callable[..., tuple[Any, ...]]:
        def fn(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
            take_b = ops.ge(b[0], a[0])
            return ops.where(take_b, b[0], a[0]), ops.where(take_b, b[1], a[1])

        return fn

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0] * 11 + r[0])
        (summed,) = ops.scan((torch.float32,), _add_combine(ops), (value,))
        ops.store("sum", x[0] * 11 + r[0], summed)
        index = ops.index_expr(r[0], torch.int64)
        top, arg = ops.scan((torch.float32, torch.int64), combine(ops), (value, index))
        ops.store("best", x[0] * 11 + r[0], top)
        ops.store("where", x[0] * 11 + r[0], arg)

    buffers = (
        buf("a", torch.float32, "in", 33),
        buf("sum", torch.float32, "out", 33),
        buf("best", torch.float32, "out", 33),
        buf("where", torch.int64, "out", 33),
    )
    run((3,), (11,), [("scan", body)], buffers, (t, total, best, where))
    torch.testing.assert_close(total, t.cumsum(1))
    want = torch.cummax(t, 1)
    torch.testing.assert_close(best, want.values)
    assert torch.equal(where, want.indices)


def _add_combine(ops: Any) -> Callable[..., tuple[Any, ...]]:
    def fn(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return (ops.add(a[0], b[0]),)

    return fn


@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_with_indices_and_nan(descending: bool) -> None:
    t = torch.randint(0, 4, (3, 13), generator=torch.Generator().manual_seed(9)).float()
    t[0, 2] = t[1, 5] = float("nan")
    t[2, 0] = float("-inf")
    values, indices = torch.empty(3, 13), torch.empty(3, 13, dtype=torch.int64)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0] * 13 + r[0])
        index = ops.index_expr(r[0], torch.int64)
        result = ops.sort((torch.float32, torch.int64), (value, index), True, descending)
        ops.store("v", x[0] * 13 + r[0], result[0])
        ops.store("i", x[0] * 13 + r[0], result[1])

    buffers = (
        buf("a", torch.float32, "in", 39),
        buf("v", torch.float32, "out", 39),
        buf("i", torch.int64, "out", 39),
    )
    run((3,), (13,), [("sort", body)], buffers, (t, values, indices))
    want = torch.sort(t, dim=1, descending=descending, stable=True)
    torch.testing.assert_close(values, want.values, equal_nan=True)
    assert torch.equal(indices, want.indices)


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_matches_torch(right: bool) -> None:
    bounds = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    values = randn(20, seed=13, edges=False)
    values[:3] = torch.tensor([0.0, 0.5, 2.0])
    out = torch.empty(20, dtype=torch.int64)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value, start = ops.load("v", x[0]), ops.constant(0, torch.int64)
        bounds_desc = ("b", sympy.Integer(4), sympy.Integer(4), sympy.Integer(1))
        ops.store("out", x[0], ops.bucketize(value, bounds_desc, start, torch.int64, right))

    buffers = (
        buf("v", torch.float32, "in", 20),
        buf("b", torch.float32, "in", 4),
        buf("out", torch.int64, "out", 20),
    )
    run((20,), (), [("outer", body)], buffers, (values, bounds, out))
    assert torch.equal(out, torch.bucketize(values, bounds, right=right))


_TRITON_CHECK = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from polyduct.reference import philox

@triton.jit
def k(out_r, out_n, out_i, seed, low, high, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_r + offs, tl.rand(seed, offs))
    tl.store(out_n + offs, tl.randn(seed, offs))
    r0, r1, _, _ = tl.randint4x(seed, offs)
    wide = r0.to(tl.uint64) | (r1.to(tl.uint64) << 32)
    tl.store(out_i + offs, (wide % (high - low).to(tl.uint64)).to(tl.int64) + low)

n = 256
for seed, low, high in ((0, 0, 10), (2**40 + 77, -(2**40), 2**61), (-5, -3, 3)):
    r, g, i = torch.empty(n), torch.empty(n), torch.empty(n, dtype=torch.int64)
    k[(1,)](r, g, i, seed, low, high, n)
    s, o = torch.tensor(seed), torch.arange(n, dtype=torch.int32)
    lo, hi = torch.tensor(low), torch.tensor(high)
    assert torch.equal(philox.rand(s, o), r), seed
    assert (philox.randn(s, o) - g).abs().max() < 1e-5, seed
    assert torch.equal(philox.randint64(s, o, lo, hi), i), seed
print("ok")
"""


def test_philox_matches_triton_interpreter() -> None:
    pytest.importorskip("triton")
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _TRITON_CHECK],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


CONVERSIONS: list[tuple[str, torch.dtype, torch.dtype, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("to_dtype", torch.float32, torch.int32, lambda t: t.to(torch.int32)),
    ("to_dtype", torch.float32, torch.bool, lambda t: t.to(torch.bool)),
    ("to_dtype", torch.float32, torch.float16, lambda t: t.to(torch.float16)),
    ("to_dtype", torch.int64, torch.int8, lambda t: t.to(torch.int8)),
    ("to_dtype_bitcast", torch.float32, torch.int32, lambda t: t.view(torch.int32)),
    ("to_dtype_bitcast", torch.float16, torch.int16, lambda t: t.view(torch.int16)),
    ("ceil_to_int", torch.float32, torch.int64, lambda t: torch.ceil(t).to(torch.int64)),
    ("floor_to_int", torch.float32, torch.int32, lambda t: torch.floor(t).to(torch.int32)),
    ("round_to_int", torch.float32, torch.int64, lambda t: torch.round(t).to(torch.int64)),
    ("trunc_to_int", torch.float64, torch.int16, lambda t: torch.trunc(t).to(torch.int16)),
]


@pytest.mark.parametrize(("op", "src", "dst", "want"), CONVERSIONS, ids=lambda v: str(v))
def test_conversions(
    op: str, src: torch.dtype, dst: torch.dtype, want: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    t = (torch.arange(-20, 21) * 0.75).to(src)
    out = torch.empty(41, dtype=dst)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0])
        extra = (src,) if op == "to_dtype_bitcast" else ()
        ops.store("out", x[0], getattr(ops, op)(value, dst, *extra))

    buffers = (buf("a", src, "in", 41), buf("out", dst, "out", 41))
    run((41,), (), [("outer", body)], buffers, (t, out))
    assert torch.equal(out, want(t))


def test_device_assert_and_check_bounds_raise() -> None:
    from polyduct.errors import KernelAssertError

    t = torch.arange(5.0)
    out = torch.empty(5)

    def asserting(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        value = ops.load("a", x[0])
        ops.device_assert_async(ops.lt(value, ops.constant(4.0, torch.float32)), 'x < 4 "q"')
        ops.store("out", x[0], value)

    with pytest.raises(KernelAssertError, match=r'k_test.*x < 4 "q"'):
        run((5,), (), [("outer", asserting)], _pw_buffers(5), (t, out))

    def bounded(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.check_bounds(x[0] + 1, sympy.Integer(5), True, True)

    with pytest.raises(KernelIndexError, match="index 5 is out of bounds"):
        run((5,), (), [("outer", bounded)], _pw_buffers(5), (t, out))


def test_random_ops_in_a_kernel_are_deterministic() -> None:
    seed = torch.tensor([7], dtype=torch.int64)
    outs = [
        (torch.empty(4096), torch.empty(4096), torch.empty(4096, dtype=torch.int64))
        for _ in range(2)
    ]

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        s = ops.load_seed("seed", ops.constant(0, torch.int64))
        offset = ops.index_expr(x[0], torch.int32)
        ops.store("u", x[0], ops.rand(s, offset))
        ops.store("n", x[0], ops.randn(s, offset))
        low, high = ops.constant(-5, torch.int64), ops.constant(5, torch.int64)
        ops.store("i", x[0], ops.randint64(s, offset, low, high))

    buffers = (
        buf("seed", torch.int64, "in", 1),
        buf("u", torch.float32, "out", 4096),
        buf("n", torch.float32, "out", 4096),
        buf("i", torch.int64, "out", 4096),
    )
    for out in outs:
        run((4096,), (), [("outer", body)], buffers, (seed, *out))
    assert all(torch.equal(a, b) for a, b in zip(*outs, strict=True))
    uniform, normal, ints = outs[0]
    assert float(uniform.min()) >= 0.0 and float(uniform.max()) < 1.0
    assert abs(float(uniform.mean()) - 0.5) < 0.02
    assert abs(float(normal.mean())) < 0.06 and abs(float(normal.std()) - 1.0) < 0.06
    assert int(ints.min()) == -5 and int(ints.max()) == 4
