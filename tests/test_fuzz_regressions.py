"""Bugs `polyduct fuzz` found, each as its shrunk program, compiled with every CPU backend.

A case is the reproducer the fuzzer wrote, trimmed by hand: the program's statements as `fn`
and its inputs as a `Program`; `check_program` compares the compiled results with eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from polyduct.fuzz.check import check_program
from polyduct.fuzz.program import InputSpec, Program

CPU_BACKENDS = ("reference", "cpp")
ALL_BACKENDS = ("reference", "cpp", "triton", "halide")  # for bugs in every backend's codegen
Case = tuple[Callable[..., Any], Program, tuple[str, ...]]


def _program(
    *inputs: InputSpec, outputs: int = 1, train: bool = False, mode: str = "static"
) -> Program:
    return Program(inputs, (), tuple(f"out{i}" for i in range(outputs)), mode, train)


def _stored_then_reloaded(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Training keeps v0 for the backward: the fused kernel stores it, and the next member
    # loads it back. That buffer was taken for one that must exist before the kernel (`inout`)
    # and never allocated: NameError 'buf0' (scheduling.plan._buffers).
    v0 = torch.addcmul(a0, a0, a0, value=0.5)
    return torch.erfc(v0), v0


def _reshape_of_empty(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Re-indexing the flat result over the input's sizes (1, 1, 0) divided by the empty size:
    # sympy's `zoo` in the kernel source (indexing.unflatten).
    return (torch.add(a0, a0, alpha=2).reshape(-1),)


def _negative_slice_start(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # At a symbolic size s the first element is Max(s - 4, 0): no kernel index printer knew
    # sympy's Max (reference: no rm.imax, cpp: 'Max' not declared, triton/halide: Python max).
    return ((a0 & True).expand_as(a0)[..., -4:], a0[..., -4:0:3])


def _reduction_then_flip(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The flip was fused as the reduction's epilogue and read the kernel-local result of its
    # own row, not the mirrored one: every row but the middle one wrong (scheduler._reads_ok).
    return (torch.flip(torch.amax(a0.unfold(2, 4, 2), -1), (1,)),)


def _sum_then_flip(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (a0.sum(-1).flip(0),)


def _float_floor_divide(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Lowered as floor(a / b): inf // 3 gave inf and 1 // 0.1 gave 10, where eager (through
    # fmod) gives NaN and 9 (polyduct.lowering.pointwise._div).
    return (a0 // a1, torch.floor_divide(a0, 0.1), torch.div(a1, a0, rounding_mode="floor"))


def _integer_fmod(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Integer fmod reached the float-only op `fmod`: Halide's float algorithm on int32 did
    # not compile (polyduct.lowering.pointwise: integers take `mod`).
    return (torch.fmod(a0, a0.clamp(min=1)), torch.fmod(a0, -3))


def _sum_of_expanded_dim(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The summed value does not depend on the reduction position: Halide's update definition
    # named no RDom and added it once, not four times (polyduct_halide.runtime.reduction).
    return (a0.expand(4, *a0.shape).sum(-2, keepdim=True), a0.expand(3, 4).amax(0))


def _integer_rounding(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # floor/ceil/round/trunc and signbit of integers and bools reached float-only ops: the
    # Triton kernel did not compile, signbit raised KeyError (polyduct.lowering.pointwise).
    return (a0.floor(), a0.ceil(), a0.round(), a0.trunc(), a0.signbit(), a1.signbit())


def _empty_gradient(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The backward graph's empty tangent arrived with strides (0, 0, 1), not the traced
    # (11, 1, 1): InputMismatch, though no element is ever addressed (wrapper.runtime).
    v6 = a0.narrow(2, 4, 0)
    return (torch.pow(v6 / v6, 3),)


def _strided_reshape(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # A strided uint8 input flattened under dynamic shapes: elements in the wrong order.
    return (a0.reshape(-1), a0.reshape(-1, 2) + 1)


def _roll_of_dynamic_size(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The shift modulo a dynamic size is torch's PythonMod, which no index printer knew
    # (sizes._polyduct_functions: it is sympy's Mod).
    return (torch.roll(a0.t(), 3, 1), torch.roll(a0, -2, 0) * 2)


def _uint8_all_any(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # all/any of uint8 are uint8 in eager; the lowering returned bool (polyduct.lowering.reduce._all).
    return (a0.all(), a0.any(), a0.all(0), a0.any(-1, keepdim=True))


def _negative_scalar_of_uint8(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # A Python scalar out of uint8's range (-2 is 254 in eager): Triton's interpreter refused
    # the constant (OverflowError); values._scalar wraps it as torch does.
    return (a0 % -2, a0.masked_fill(a0 > 3, -1), torch.where(a0 > 3, a0, -1))


def _guarded_broadcast(a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # v1's last size is (s0//3), which torch guarded to be 1 when it broadcast it against
    # 2*s0: the kernel indexed it by position (out of bounds; sizes._guarded_constant).
    v0 = a1.repeat_interleave(2, 0)
    v1 = v0.reshape(6, -1)
    return (torch.addcdiv(v0, v0, v1, value=-2),)


def _integer_nansum(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # nansum of int64 returned 0 on Halide (0-d, and keepdim over dim 0).
    return (torch.nansum(a0), torch.nansum(a1, 0, keepdim=True), torch.nansum(a1))


def _variance_gradient(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The backward of std/var under dynamic shapes scales by 2 / (n - 1), a SymFloat: the
    # Python wrapper printed FloatTrueDiv and ToFloat as calls (NameError).
    return (a0.std(), torch.var(a0, 0, correction=2), torch.var_mean(a0, -1)[0])


def _overwritten_reduction(a0: torch.Tensor, a3: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The sum is overwritten before anything reads it: its kernel stored nothing, and a Halide
    # pipeline without outputs does not compile (scheduling.plan.plan drops such a kernel).
    v1 = a0.sum()
    v1.fill_(float("-inf"))
    return (torch.div(v1, a3),)


def _empty_slice_past_the_end(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # An empty result whose index is a constant past the input's end: the reference kernel
    # loaded (and bounds-checked) it though no element is computed (reference codegen).
    v3 = a1.unflatten(0, (1, -1)).diagonal(2, 0, 1)
    return (a0[2:-2].reshape(-1), v3.repeat_interleave(2, -1))


def _mean_of_an_empty_strided_slice(a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # A reduction over an empty range of two dims: the reference kernel unflattened no
    # coordinates into constants and loaded (and bounds-checked) one element (reference codegen).
    return (torch.mean(a1[:, 6:4:3]),)


def _cummin_of_an_empty_narrow(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The scan's empty range decoded its coordinates into constants: the Triton kernel stored a
    # block through a scalar pointer and did not compile (polyduct.indexing.unflatten).
    return (torch.cummin(a0.narrow(1, 1, 0), -2)[0].to(torch.int8),)


def _reciprocal_of_a_zero_remainder(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # -4 % 2 is -0 in torch (fmod's sign), so its reciprocal is -inf: the C++ and reference
    # remainders gave a zero the divisor's sign, as Python and numpy do.
    v4 = a0.to(torch.float16) % a0.clamp(min=1)
    return (torch.pow(v4.relu_(), -1), 1 / (a0.float() % 2))


def _scatter_amax_of_no_index(a2: torch.Tensor, i5: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # No index: the max of no source elements is the identity, which the reference kernel
    # asked torch's amax for (it refuses an empty dim: reference.reduce).
    return (torch.scatter_reduce(a2, 0, i5, a2.flip(0), "amax", include_self=False),)


def _accumulated_then_overwritten(a0: torch.Tensor, i3: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The index_put result is read only by a product the copy_ overwrites: its buffer was
    # removed from the fused kernel but its accumulating store kept (KeyError 'buf0').
    v4 = a0.index_put((i3,), a0[:1].flip(0), accumulate=True) * 3
    v4.copy_(a0)
    return (v4 * 2,)


def _bitwise_not_of_an_argmax(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The reference kernel gave a float argmax its values' dtype: ~ of a float raised.
    return (~torch.argmax(a0),)


def _float64_silu(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # silu computed float64 inputs in float32 (error 4e-8) and labelled the result float64:
    # the clamp after it mixed float and double, and C++ did not compile (polyduct.lowering.pointwise).
    return (torch.nn.functional.silu(a0).clamp(max=0), torch.nn.functional.silu(a0))


def _saved_overlapping_view(a2: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The backward saves `v3`, windows of `v2` that share memory: the forward returned a
    # row-major copy, and the backward's stride assert refused it (lowering.output_views).
    v2 = torch.where(a2 > 0, a2, a2 * 2)
    return (torch.sinh(v2.unfold(0, 6, 2)),)


def _saved_sort_of_transposed(a2: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The backward saves the sorted values, which eager lays out as its transposed input:
    # the forward returned them row-major (lowering.output_views.eager_strided).
    return (torch.var(torch.msort(a2), 1, correction=1),)


def _saved_size_expression(a1: torch.Tensor, a2: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The forward graph returns sizes for the backward, among them `2*s0`: it was returned as
    # a sympy expression, which AOTAutograd refused (compile._size_outputs).
    v5 = torch.cat([a2, a2], 0).repeat_interleave(2, -1)
    return ((v5 / a1.movedim(1, 0)).movedim(-4, 1),)


def _unfold_made_contiguous(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The backward zero-fills the gradient and scatter-adds into it, in one C++ kernel tiled for
    # its transposed stores: the tile of zeros was written after the additions, so the gradient
    # was 0 (cpp codegen: a kernel that accesses an output twice is not tiled).
    v1 = a0.unfold(2, 3, 3).contiguous()
    return (v1.expand(6, *v1.shape),)


def _logcumsumexp_of_one_element(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Eager's scan starts from -inf: logaddexp(-inf, -0) is +0, and rsqrt tells the zeros apart.
    # The scan took its first element as it was (lowering.scan.logcumsumexp).
    return (torch.rsqrt(torch.logcumsumexp(a0, 2)),)


def _atan2_of_truncated_zeros(a3: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # -0.3 truncated to the integer 0 and back is +0.0: GCC folded float -> int -> float into
    # trunc() (-0.0) and atan2(-0, -0) is -pi (cpp codegen: an integer zero converts to +0).
    v9 = a3.nan_to_num(0.0, 0.0, 0.0).clamp(-100, 100).to(torch.int64)
    return (torch.atan2(v9, v9),)


def _python_or_of_a_view(a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # `v2 | v5` is Python's operator.or_, whose name ends in `_`: the overlapping-write check
    # took it for torch's in-place or_ of a view of its own input and refused it (overlap).
    v2 = a1 > 0
    return (v2 | v2.narrow(0, 0, 1), v2 & v2[1:2])


def _gradient_through_two_sorts(a1: torch.Tensor, a3: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The backward scatters twice: the second scatter reads the first's result, whose storage
    # a3's gradient (computed in the same kernel) takes over. Halide realises each output in its
    # own loops and wrote a3's gradient first: a1's gradient read it (halide codegen._outputs).
    v1 = torch.sort(a1, dim=-1, descending=True, stable=True)[0]
    return (torch.sort(v1, dim=0, stable=True)[0].mean() / a3,)


def _deep_reduction_body(a1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # floor_divide's rounding fixes share subexpressions deeply: Halide's strict_float() of the
    # amin's values expanded them as a tree (5 minutes to define one update; halide seed 9103,
    # program 2216). The values are now a Func the update reads.
    v0 = a1.select(3, 1).mul(-1)
    v1 = torch.floor_divide(a1, v0)
    return (torch.atanh(torch.amin(v1, -2)), torch.cumprod(v1.clamp(-1.25, 1.25), 1))


def _norm_then_its_min(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The norm's square root was written over the sum of squares it reads (in place), and
    # Halide realised that output before the min that also reads the sums: min(sqrt(sqrt(s)))
    # (halide seed 9103, program 3484). Halide kernels no longer write outputs in place.
    v1 = torch.linalg.vector_norm(a0, 2, 0)
    return torch.min(v1, -1)[0], v1


def _cumsum_over_an_empty_dim(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # (5, 0, 1): the scan kernel's outer variable of the size-1 dim is the constant 0, and its
    # store's index (r0 + x1) was taken to span the outer axis: a pointer block [1, RBLOCK]
    # under an [XBLOCK, RBLOCK] mask, which Triton refuses (triton seed 9802, program 9300).
    return (torch.cumsum(a0, 1) * 2,)


CASES: dict[str, Case] = {
    "stored_then_reloaded": (
        _stored_then_reloaded,
        _program(InputSpec("a0", (2, 3), torch.float64, grad=True), outputs=2, train=True),
        CPU_BACKENDS,
    ),
    "reduction_then_flip": (
        _reduction_then_flip,
        _program(InputSpec("a0", (8, 8, 8), torch.float16)),
        CPU_BACKENDS,
    ),
    "sum_of_expanded_dim": (
        _sum_of_expanded_dim,
        _program(InputSpec("a0", (4,), torch.float64), outputs=2),
        ALL_BACKENDS,
    ),
    "sum_then_flip": (
        _sum_then_flip,
        _program(InputSpec("a0", (3, 4), torch.float32)),
        CPU_BACKENDS,
    ),
    "empty_gradient": (
        _empty_gradient,
        _program(InputSpec("a0", (5, 11, 5), torch.float32, grad=True), train=True),
        CPU_BACKENDS,
    ),
    "float_floor_divide": (
        _float_floor_divide,
        _program(
            InputSpec("a0", (4, 8), torch.float32, values="edge"),
            InputSpec("a1", (8,), torch.float64, values="edge"),
            outputs=3,
        ),
        CPU_BACKENDS,
    ),
    "reshape_of_empty": (
        _reshape_of_empty,
        _program(InputSpec("a0", (1, 1, 0), torch.float32)),
        CPU_BACKENDS,
    ),
    "integer_fmod": (
        _integer_fmod,
        _program(InputSpec("a0", (8, 8), torch.int32, values="edge"), outputs=2),
        ALL_BACKENDS,
    ),
    "integer_rounding": (
        _integer_rounding,
        _program(
            InputSpec("a0", (4, 5), torch.int64, values="edge"),
            InputSpec("a1", (3,), torch.bool),
            outputs=6,
        ),
        ALL_BACKENDS,
    ),
    "negative_slice_start": (
        _negative_slice_start,
        _program(
            InputSpec("a0", (1, 4, 4), torch.bool, alt_shape=(1, 6, 6)), outputs=2, mode="auto"
        ),
        ALL_BACKENDS,
    ),
    "strided_reshape": (
        _strided_reshape,
        _program(
            InputSpec("a0", (3, 2), torch.uint8, values="edge", layout="strided",
                      alt_shape=(5, 4)),
            outputs=2, mode="dynamic",
        ),
        ALL_BACKENDS,
    ),
    "roll_of_dynamic_size": (
        _roll_of_dynamic_size,
        _program(InputSpec("a0", (5, 3), torch.float32, alt_shape=(7, 6)), outputs=2, mode="auto"),
        ALL_BACKENDS,
    ),
    "uint8_all_any": (
        _uint8_all_any,
        _program(InputSpec("a0", (4, 5), torch.uint8, values="edge"), outputs=4),
        ALL_BACKENDS,
    ),
    "negative_scalar_of_uint8": (
        _negative_scalar_of_uint8,
        _program(InputSpec("a0", (4, 5), torch.uint8), outputs=3),
        ALL_BACKENDS,
    ),
    "guarded_broadcast": (
        _guarded_broadcast,
        _program(InputSpec("a1", (3,), torch.float32), mode="dynamic"),
        ALL_BACKENDS,
    ),
    "integer_nansum": (
        _integer_nansum,
        _program(
            InputSpec("a0", (), torch.int64), InputSpec("a1", (4, 5), torch.int64), outputs=3
        ),
        ALL_BACKENDS,
    ),
    "variance_gradient": (
        _variance_gradient,
        _program(
            InputSpec("a0", (5, 4), torch.float64, grad=True, alt_shape=(7, 6)),
            outputs=3, train=True, mode="dynamic",
        ),
        CPU_BACKENDS,
    ),
    "overwritten_reduction": (
        _overwritten_reduction,
        _program(InputSpec("a0", (3,), torch.float32), InputSpec("a3", (3, 3), torch.int64)),
        ALL_BACKENDS,
    ),
    "empty_slice_past_the_end": (
        _empty_slice_past_the_end,
        _program(
            InputSpec("a0", (1, 1), torch.bfloat16, layout="strided"),
            InputSpec("a1", (2,), torch.bool),
            outputs=2,
        ),
        CPU_BACKENDS,
    ),
    "float64_silu": (
        _float64_silu,
        _program(InputSpec("a0", (2, 8), torch.float64), outputs=2),
        ALL_BACKENDS,
    ),
    "saved_overlapping_view": (
        _saved_overlapping_view,
        _program(InputSpec("a2", (8, 16, 1), torch.float32, grad=True), train=True),
        CPU_BACKENDS,
    ),
    "saved_sort_of_transposed": (
        _saved_sort_of_transposed,
        _program(
            InputSpec("a2", (17, 1, 17), torch.float32, layout="transposed", grad=True),
            train=True,
        ),
        CPU_BACKENDS,
    ),
    "saved_size_expression": (
        _saved_size_expression,
        _program(
            InputSpec("a1", (1, 4, 5, 1), torch.float32, grad=True),
            InputSpec("a2", (4,), torch.float32, grad=True),
            train=True, mode="dynamic",
        ),
        CPU_BACKENDS,
    ),
    "mean_of_an_empty_strided_slice": (
        _mean_of_an_empty_strided_slice,
        _program(InputSpec("a1", (5, 5, 1), torch.float32, layout="transposed")),
        CPU_BACKENDS,
    ),
    "cummin_of_an_empty_narrow": (
        _cummin_of_an_empty_narrow,
        _program(InputSpec("a0", (1, 1, 1), torch.int32)),
        ALL_BACKENDS,
    ),
    "reciprocal_of_a_zero_remainder": (
        _reciprocal_of_a_zero_remainder,
        _program(InputSpec("a0", (32, 2), torch.int16), outputs=2),
        ALL_BACKENDS,
    ),
    "scatter_amax_of_no_index": (
        _scatter_amax_of_no_index,
        _program(InputSpec("a2", (1,), torch.int64),
                 InputSpec("i5", (0,), torch.int64, values="index", high=1, low=0)),
        ALL_BACKENDS,
    ),
    "accumulated_then_overwritten": (
        _accumulated_then_overwritten,
        _program(InputSpec("a0", (1, 1, 1, 1), torch.float64),
                 InputSpec("i3", (1,), torch.int64, values="index", high=1, low=0)),
        ALL_BACKENDS,
    ),
    "bitwise_not_of_an_argmax": (
        _bitwise_not_of_an_argmax,
        _program(InputSpec("a0", (3, 1), torch.float32)),
        CPU_BACKENDS,
    ),
    "unfold_made_contiguous": (
        _unfold_made_contiguous,
        _program(InputSpec("a0", (3, 1, 3, 6), torch.float64, grad=True), train=True),
        ALL_BACKENDS,
    ),
    "logcumsumexp_of_one_element": (
        _logcumsumexp_of_one_element,
        _program(InputSpec("a0", (1, 1, 1, 17), torch.float32, values="edge")),
        ALL_BACKENDS,
    ),
    "atan2_of_truncated_zeros": (
        _atan2_of_truncated_zeros,
        _program(InputSpec("a3", (4, 4, 4), torch.float32)),
        ALL_BACKENDS,
    ),
    "python_or_of_a_view": (
        _python_or_of_a_view,
        _program(InputSpec("a1", (4, 3), torch.float32), outputs=2),
        CPU_BACKENDS,
    ),
    "gradient_through_two_sorts": (
        _gradient_through_two_sorts,
        _program(InputSpec("a1", (7,), torch.float32, grad=True),
                 InputSpec("a3", (7,), torch.float32, grad=True), train=True),
        ALL_BACKENDS,
    ),
    "deep_reduction_body": (
        _deep_reduction_body,
        _program(InputSpec("a1", (2, 2, 2, 2), torch.bfloat16, layout="transposed"), outputs=2),
        ALL_BACKENDS,
    ),
    "cumsum_over_an_empty_dim": (
        _cumsum_over_an_empty_dim,
        _program(InputSpec("a0", (5, 0, 1), torch.float32)),
        ALL_BACKENDS,
    ),
    "norm_then_its_min": (
        _norm_then_its_min,
        _program(InputSpec("a0", (2, 2), torch.float64), outputs=2),
        ALL_BACKENDS,
    ),
}


PARAMS = [
    (case, backend) for case, (_, _, backends) in sorted(CASES.items()) for backend in backends
]


@pytest.mark.parametrize(("case", "backend"), PARAMS)
def test_fuzz_regression(case: str, backend: str) -> None:
    fn, program, _ = CASES[case]
    check_program(fn, program, backend)
