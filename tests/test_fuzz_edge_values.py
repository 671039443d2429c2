"""Bugs `polyduct fuzz` found in edge values, each checked directly on hand-picked inputs (the
exact values that tell eager's semantics apart: infinities in a row, NaN payloads, signed zeros,
float16 roundings), on every backend."""

from __future__ import annotations

import pytest
import torch

ALL_BACKENDS = ("reference", "cpp", "triton", "halide")


def _var_mean_rows(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (*torch.var_mean(x, dim=-1), *torch.var_mean(x.t(), dim=(0,), keepdim=True))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_var_mean_of_infinities_as_eager(backend: str) -> None:
    # Eager's var_mean runs Welford's update element by element: a row's mean is +-inf only where
    # its sole non-finite element is the last, NaN where any other is. Summing backends gave +-inf
    # for every row of same-signed infinities, C++'s vector lanes NaN for a trailing one
    # (lowering.reduce._welford_mean_of_inf).
    inf = float("inf")
    x = torch.randn(7, 37)
    x[0, -1], x[1, 0], x[2, 5], x[2, 9], x[3, -1], x[4, -1], x[4, 3] = inf, inf, -inf, -inf, -inf, inf, inf
    x[5, 4], x[5, -1] = float("nan"), inf
    compiled = torch.compile(_var_mean_rows, backend="polyduct", options={"kernels": backend})
    for want, got in zip(_var_mean_rows(x), compiled(x), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)
    assert compiled(x)[1][:5].tolist()[0] == inf  # the row whose only infinity is last


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize(
    ("dtype", "nans"),
    [(torch.float16, [0x7E00, 0xFE00, 0x7E01, 0xFFFF]), (torch.bfloat16, [0x7FC0, 0xFFC0, 0x7FC1])],
)
def test_moved_nan_keeps_its_bits(backend: str, dtype: torch.dtype, nans: list[int]) -> None:
    # A moved element is its bits, which a reinterpreting view shows: the reference kernels'
    # float16 <-> float32 conversions (torch's scalar tail) turned NaN 0x7e00 into 0x7fff
    # (reference.memory.widened / rounded).
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.repeat_interleave(2, 0).view(torch.int16)

    x = torch.tensor(nans * 11, dtype=torch.int32).to(torch.int16).view(dtype)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    assert torch.equal(compiled(x), fn(x))


def _half_comparisons(x: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x == 0.1, x < 0.1, x.bfloat16() > 0.1, torch.ne(x.to(torch.float16), a), torch.ne(x, a))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_comparison_operands_round_to_the_common_dtype(backend: str) -> None:
    # Eager converts a comparison's operands to their common dtype first: a Python float and an
    # int64 compared with a float16 tensor round to float16 (0.1 -> 0.0999755859375, INT64_MIN
    # -> -inf). They were converted to float32, float16's compute type, instead: `x == 0.1` was
    # False for x = float16(0.1) (lowering.values.promoted; the Triton backend's constant() did
    # not round to float16 either). Seed 9001 program 3295.
    x = torch.tensor([0.1, 1 / 3, 0.2, float("inf"), -4.0], dtype=torch.float16)
    a = torch.tensor([-(2**63), 65519, 70000, 2049, -4], dtype=torch.int64)
    compiled = torch.compile(_half_comparisons, backend="polyduct", options={"kernels": backend})
    for want, got in zip(_half_comparisons(x, a), compiled(x, a), strict=True):
        assert torch.equal(got, want)


def _lgamma(x: torch.Tensor) -> torch.Tensor:
    return torch.lgamma(x) * 1


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_lgamma_of_huge_negative_integers(backend: str) -> None:
    # Every float past 2**53 is an integer, a pole: lgamma is +inf. The reflection formula gave
    # -log|sinpi(x)| - lgamma(1 - x) = inf - inf (decomp.gamma.lgamma; seed 9002, program 154).
    # And lgamma(1) is +0, not -0 (e * poly(e) at e = 0; seed 9002, program 2283).
    x = torch.tensor([-1.7976931348623157e308, -1e300, -(2.0**60), -3.0, -2.5, 1e300, 1.0, 2.0],
                     dtype=torch.float64)
    for dtype in (torch.float64, torch.float32):
        values = x.to(dtype)
        compiled = torch.compile(_lgamma, backend="polyduct", options={"kernels": backend})
        torch.testing.assert_close(compiled(values), _lgamma(values), equal_nan=True)
        assert torch.equal(compiled(values).signbit(), _lgamma(values).signbit())


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_round_keeps_the_sign_of_zero(backend: str) -> None:
    # round(-0.3) is -0, and x // -0 is -inf for x > 0: Triton's round (floor, then + 1) gave +0
    # (seed 9002, program 6267).
    a0 = torch.tensor([[1.5], [-2.0]], dtype=torch.bfloat16)
    a1 = torch.tensor([[-0.3, 0.3, -0.0, 2.7, -0.5, -2.5, 0.5]], dtype=torch.float64)

    def fn(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a0 // torch.round(a1), torch.round(a1.float())

    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for got, want in zip(compiled(a0, a1), fn(a0, a1), strict=True):
        assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit())


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_std_takes_its_root_before_rounding(backend: str, dtype: torch.dtype) -> None:
    # A standard deviation of 539 has a variance of 290521, past float16's 65504: the variance
    # was rounded to float16 (inf) before its square root (halide seed 9103, program 742; every
    # backend). Eager takes the root at float32 and rounds once (lowering.reduce._welford).
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.std(x, dim=(1, 0), correction=0), torch.std(x.transpose(1, 2), dim=-1)

    x = (torch.randn(1, 7, 3) * 100).to(dtype)
    x[0, 2, 1], x[0, 3, 1] = 1000.0, -1000.0
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x), compiled(x), strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_reductions_of_zero_times_infinity_are_nan(backend: str) -> None:
    # 0 * inf is NaN, and so is any sum or mean over it. Halide's rfactor (a reduction's vector
    # lanes) simplified `x * 0` to 0 before StrictFloat applied (halide seed 9103, program 1075).
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = 0 * x
        return z.sum(-1), z.mean(), z.unfold(1, 6, 1).mean(dim=(2, 1)), (x * 0.0).amax(0)

    x = torch.randn(3, 40)
    x[0, 7], x[1, 30], x[2, 0] = float("inf"), float("-inf"), float("nan")
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x), compiled(x), strict=True):
        assert want.isnan().any()
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_reduction_tail_of_a_difference_with_itself(backend: str) -> None:
    # `x - x` is NaN where x is infinite or NaN. Halide's pass that trims loops whose updates
    # change nothing took it for 0 and dropped the guarded tail of a vector-lane row sum (13 = 8
    # + 5): the tail's NaNs were lost (halide seed 9203, program 7788; runtime.reduction).
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x - x).sum(-1), (x - x).amax(-1), (x * 0).sum(-1)

    x = torch.randn(4, 13)
    x[0, 12], x[1, 9], x[2, 0], x[3, 11] = float("inf"), float("nan"), float("-inf"), 1.0
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x), compiled(x), strict=True):
        assert want[:3].isnan().all()
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_negative_zero_constants_and_running_sums(backend: str) -> None:
    # Halide's IR equality holds the constants -0.0 and +0.0 equal: beside the 0.0 of a stack's
    # select, `copysign(x, -0.0)` came out positive (halide seed 9103, program 2461). And eager's
    # cumsum starts from +0, so a leading -0 sums to +0 (program 2808, every backend).
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        stacked = torch.stack([x, x], 1)
        return (torch.copysign(stacked, -0.0), torch.where(x > 0, 0.0, -0.0),
                torch.cumsum(x.clamp(max=-0.0) * 0, 1), torch.cumsum(x.double() * -0.0, 0))

    x = torch.randn(5, 7)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x), compiled(x), strict=True):
        assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit())


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_arithmetic_wraps(backend: str, dtype: torch.dtype) -> None:
    # Halide takes 32- and 64-bit signed arithmetic not to overflow: relu(x + x) of INT_MAX
    # came out -2, and -INT_MIN widened to +2**31 in a cumsum (halide seed 9103, programs 3273
    # and 3444). Torch wraps.
    # Computing them unsigned must not reach a float: Halide folds uint(int(f)) into a
    # saturating uint(f), and (-4.2).to(int) ** 3 came out -1 (program 4813). abs(INT_MIN) is
    # INT_MIN: Halide took its abs as non-negative, and copysign(abs(x), 1) kept the sign (5408).
    def fn(x: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, ...]:
        i = f.to(dtype)
        return (torch.relu(x + x), torch.cumsum(-x, -1), torch.relu(x * 3 - 1), x.pow(3) > 0,
                i.pow(3), i * i - i, -i, torch.copysign(x.abs(), True))

    info = torch.iinfo(dtype)
    x = torch.tensor([[info.max, info.min, 5, -7], [info.max - 3, info.min + 1, 0, 1]], dtype=dtype)
    f = torch.tensor([[-4.2, -2.5, 3.1, 1.0], [0.3, -1.9, 5.5, -100.0]])
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x, f), compiled(x, f), strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_magnitudes_of_negative_zero_are_positive(backend: str, dtype: torch.dtype) -> None:
    # Halide's abs of a float64 (hypot widens float32 to it) kept the sign of -0.0: hypot(-0, -0)
    # was -0 and its reciprocal -inf (halide seed 9103, program 4926).
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return 1 / torch.hypot(x, x), 1 / x.abs(), torch.hypot(x, -x)

    x = torch.tensor([-0.0, 0.0, -1.5, float("nan"), float("-inf")] * 4, dtype=dtype)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x), compiled(x), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)
        assert torch.equal(got.signbit(), want.signbit())


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_read_after_an_in_place_write_of_a_view(backend: str) -> None:
    # neg_ of a strided view writes into its input's buffer, and the kernel reads it back.
    # Halide realised the reading output first, from the data before the write (halide seed
    # 9103, program 8586). Only the result is compared: the mutated input itself is
    # functionalized wrongly by torch (aot_eager too).
    def fn(a0: torch.Tensor) -> torch.Tensor:
        v0 = a0.unfold(1, 1, 2)
        v0.neg_()
        return (v0 == 3) + v0

    x = torch.randn(4, 4)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    torch.testing.assert_close(compiled(x.clone()), fn(x.clone()))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_bool_condition_that_also_feeds_its_branch(backend: str) -> None:
    # Halide's stage-skipping pass failed on a condition whose value also feeds the branch it
    # chooses, the other branch reading a reduction: "argument of Not is not a bool" (halide seed
    # 9103 program 8448; hlmath.condition).
    def fn(a0: torch.Tensor) -> torch.Tensor:
        v0 = torch.erfc(a0)
        return torch.where(a0, v0, v0.sum())

    x = torch.rand(3, 3, 3, 3) < 0.5
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    torch.testing.assert_close(compiled(x), fn(x))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_slice_from_the_end_with_dynamic_sizes(backend: str) -> None:
    # `v[..., -3:4:2]` of a dim of size s has max(1, (-s) // 2 + 4) elements: C's and Triton's
    # integer division truncate (-5) / 2 to -2, so the kernel's strides said 2 where the buffer
    # was allocated for 1, and it wrote past it (CUDA seed 21, program 1903; indexing.FloorDiv).
    def fn(a0: torch.Tensor) -> torch.Tensor:
        v0 = torch.cummin(a0, 1)[1][..., -3:4:2]
        return torch.div(v0, v0.clamp(min=1), rounding_mode="floor")

    x = torch.randn(3, 3, 5, dtype=torch.float64)
    compiled = torch.compile(fn, backend="polyduct", dynamic=True, options={"kernels": backend})
    torch.testing.assert_close(compiled(x), fn(x))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_lgamma_between_its_negative_poles(backend: str) -> None:
    # lgamma is near 0 between -3 and -2: the reflection formula subtracts two values near 1.25,
    # and in float32 kept 20 of their ulps, a thousand of the result's; 1 / lgamma showed it
    # (halide seed 9203, program 4382; decomp.gamma.lgamma).
    x = torch.tensor([-2.4537627696990967, -2.435375452041626, -2.762629508972168, -2.6,
                      -3.1, -0.3, 0.7, 1.0001, 2.9999, 9.5])
    compiled = torch.compile(torch.lgamma, backend="polyduct", options={"kernels": backend})
    want = torch.lgamma(x.double()).float()
    torch.testing.assert_close(compiled(x), want, rtol=4e-6, atol=0.0)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_cosine_of_a_narrow_integer_compiles_quickly(backend: str) -> None:
    # Halide's simplifier tracks the bounds of every subexpression of cos's float64 range
    # reduction; from a uint8 (bounds known), clamped and fed to a product's reduction, it took
    # minutes to compile (halide seed 9203, program 8202; math_ops._target). It now takes about
    # a second: a hang here is the failure.
    def fn(a0: torch.Tensor) -> torch.Tensor:
        v = torch.nn.functional.softplus(torch.nn.functional.hardtanh(torch.cos(a0)))
        return v @ v.mT

    x = torch.randint(0, 256, (2, 1, 2), dtype=torch.uint8)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    torch.testing.assert_close(compiled(x), fn(x))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("width", [10, 3000])
def test_mean_of_values_near_the_largest_float(backend: str, width: int) -> None:
    # A row's float32 sum overflows where its mean does not; eager's CPU Welford accumulates in
    # float64. Halide and the reference summed in float32 and gave inf, then NaN (halide seed
    # 9203, program 5825). Triton's block mean was a sum over a count (as Inductor's persistent
    # reductions are); a block whose sum overflows now sums its values scaled by 2**-32.
    # 3000 columns take Triton's looped reduction, 10 its single block.
    big = torch.finfo(torch.float32).max
    x = torch.zeros(3, width)
    x[0, 0], x[0, 9], x[1, ::2], x[1, 1::2] = big, big, big / 2, big / 4
    x[2, ::2] = -big
    compiled = torch.compile(_var_mean_rows, backend="polyduct", options={"kernels": backend})
    for want, got in zip(_var_mean_rows(x), compiled(x), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.isfinite(compiled(x)[1]).all()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_product_and_quotient_by_a_scalar(backend: str, dtype: torch.dtype) -> None:
    # Eager's CPU mul and div read a second operand that is a number or a 0-d float32 tensor at
    # float32, unrounded: `x // b` of a bfloat16 1000 by 1.1369 is 880, and 876 with b rounded
    # to bfloat16 first (triton seed 9402, program 5754; division._operand_dtype). Sums
    # round the scalar: they stay as they were. Dynamo traces `addcdiv(a, a, b, value=-2)` as
    # three calls, a + (a / b) * -2, each rounded as eager rounds it: that is aot_eager's
    # result, one rounding from eager's fused addcdiv (program 4274).
    b = torch.tensor(1.1369)

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * b, x / b, x // b, torch.div(x, b, rounding_mode="trunc"), x * 1.1369,
                x / 0.3, x // 1.1369, x + b, x - 1.1369)

    def addcdiv(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.addcdiv(x, x, y, value=-2)

    x, y = (torch.randn(4, 250) * 300).to(dtype), (torch.randn(4, 250) + 3).to(dtype)
    x[0, 0] = 1000.0
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x, y), compiled(x, y), strict=True):
        assert torch.equal(got, want)
    torch._dynamo.reset()  # two backends per parametrisation: keep under the recompile limit
    traced = torch.compile(addcdiv, backend="aot_eager")(x, y)
    assert torch.equal(torch.compile(addcdiv, backend="polyduct",
                                     options={"kernels": backend})(x, y), traced)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_negation_flips_the_sign_of_nan(backend: str, dtype: torch.dtype) -> None:
    # Eager's neg flips the sign bit, of NaNs too; Triton's `x * -1` kept a NaN's sign (triton
    # seed 9402, program 8177).
    x = torch.tensor([float("nan"), 1.0, -0.0, 0.0, float("inf")], dtype=dtype)
    x = torch.cat([x, -x])

    def fn(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.signbit(torch.neg(a)), torch.copysign(torch.ones_like(a), -a)

    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x), compiled(x), strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sign_of_the_nan_of_a_negative_base_to_a_fractional_power(
    backend: str, dtype: torch.dtype
) -> None:
    # Eager's CPU pow gives x86's default NaN, negative, which `copysign` shows; Triton's pow
    # gave the positive NaN under the interpreter (triton seed 9402, program 8123).
    x = torch.tensor([-2.0, -0.5, 2.0, -3.0, float("-inf")], dtype=dtype)

    def fn(a: torch.Tensor) -> torch.Tensor:
        return torch.copysign(torch.ones_like(a), torch.pow(a, 1.5))

    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    assert torch.equal(compiled(x), fn(x))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_clamp_keeps_a_value_equal_to_its_bound(backend: str) -> None:
    # eager's clamp keeps x where it equals a bound: clamp(-0.0, min=0.0) is -0.0, which a
    # maximum gives as +0.0 (cpp seed 9501, program 484: `.view(torch.int32)` of it); NaN in x or
    # in a bound is NaN.
    nan = float("nan")

    def fn(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.clamp(min=0.0).view(torch.int32), x.clamp(max=-0.0).view(torch.int32),
                x.clamp(0.0, -0.0).view(torch.int32), torch.clamp(x, lo, hi),
                x.clamp(min=2.0, max=1.0))

    x = torch.tensor([1.0, nan, -0.0, 0.0, 5.0, -3.0, float("inf"), -float("inf")] * 3)
    lo, hi = torch.full_like(x, -1.0), torch.full_like(x, 2.0)
    lo[::5], hi[::7] = nan, nan
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    for want, got in zip(fn(x, lo, hi), compiled(x, lo, hi), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_value_computed_twice_is_the_same_value(backend: str) -> None:
    # A row's maximum and the row itself are computed in different loops (a reduction, then a
    # pointwise kernel), vectorised or not: on the C++ backend glibc's vector exp and its scalar
    # exp differ in about half of all floats, so `y == y.amax()` could hold nowhere in a row and
    # log_softmax's largest value be above 0 (cpp seed 9501, program 3277; pd_vmath.h).
    def fn(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.exp(a) + torch.pow(a.abs(), 1.5) + torch.tanh(a)
        top = y.amax(1, keepdim=True)
        return (y == top).any(1), (y - top).amax(1), torch.log_softmax(y, 1)

    a = torch.randn(16, 37, 21) * 2
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    hit, gap, logp = compiled(a)
    assert hit.all(), f"{(~hit).sum().item()} rows have no element equal to their maximum"
    assert (gap == 0).all() and (logp <= 0).all()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_intermediate_overflows_as_eager(backend: str, dtype: torch.dtype) -> None:
    # Eager rounds every op's float16 result: `x ** -2` of 0.003 is inf, and nan_to_num makes it
    # 65504. Kernels compute float16 in float32: unless the lowering rounds the power as eager
    # does (lowering/precision.py), it stays 111111, nan_to_num leaves it, and the store rounds
    # it to inf (cpp seed 10707, program 2394). bfloat16 rounds each op's last bits the same way.
    # (eager's bfloat16 `pow` is not rounded from float32: a bfloat16 case without it)
    def fn(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.bfloat16:
            return torch.nan_to_num(x.exp() * 1e38) * 3 + x.sigmoid() * 7
        return torch.nan_to_num(torch.pow(x, -2)) * 3 + x.exp() * 7

    x = torch.tensor([0.003, 0.004, 1e-3, 2.0, 1e-20, 1.37, -5.1, 1.2], dtype=torch.float32).to(dtype)
    compiled = torch.compile(fn, backend="polyduct", options={"kernels": backend})
    assert torch.equal(compiled(x), fn(x))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_running_sum_accumulates_as_eager_on_the_cpu(backend: str) -> None:
    # Eager's CPU cumsum and cumprod of float32 accumulate in float64: after 1e4 ... -1e4 the
    # sum is the small values' exactly, where a float32 one keeps 1e-3 of error (cpp seed
    # 10709, program 6391: a lerp of it differed by 3e-3)
    x = torch.tensor([1e4, -0.5058, -0.7204, -1.0, -3.6851, 0.1883, 1.0239, 1.1924, 2.5822,
                      -1e4, 1e-38, 2.1667, -3.8572])
    compiled = torch.compile(lambda t: (t.cumsum(0), (1 + t / 1e5).cumprod(0)), backend="polyduct",
                             options={"kernels": backend})
    for got, want in zip(compiled(x), (x.cumsum(0), (1 + x / 1e5).cumprod(0)), strict=True):
        assert torch.equal(got, want)
