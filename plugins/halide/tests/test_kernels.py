"""Hand-built KernelSpecs through the Halide backend, compared with torch eager."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import sympy
import torch

from polyduct import state
from polyduct.errors import InvalidOption, KernelIndexError
from polyduct.indexing import size_symbol
from polyduct.kernel import KernelBuffer, KernelSpec, Stage
from polyduct_halide.backend import HalideBackend, HalideOptions

F32 = torch.float32
S0, S1 = size_symbol("s0"), size_symbol("s1")


def run(spec: KernelSpec, *args: Any, options: HalideOptions | None = None) -> None:
    backend = HalideBackend(options)
    backend.load([backend.codegen(spec)])[spec.name](*args)


def buf(name: str, role: str, numel: sympy.Expr, dtype: torch.dtype = F32) -> KernelBuffer:
    return KernelBuffer(name, dtype, role, sympy.sympify(numel))  # type: ignore[arg-type]


def test_pointwise_strided_input_and_size_args() -> None:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        a = ops.load("a", x[0] + x[1] * S0)  # a transposed view: stride (1, s0)
        ops.store("out", x[0] * S1 + x[1], ops.sigmoid(ops.mul(a, a)))

    spec = KernelSpec(
        "pw",
        (S0, S1),
        (),
        (Stage("outer", body),),
        (buf("a", "in", S0 * S1), buf("out", "out", S0 * S1)),
        (S0, S1),
    )
    base = torch.randn(7, 5)
    a = base.t()  # (5, 7), strides (1, 5)
    out = torch.empty(5, 7)
    run(spec, a, out, 5, 7)
    torch.testing.assert_close(out, torch.sigmoid(a * a))


@pytest.mark.parametrize("rtype", ["sum", "prod", "max", "min", "argmax", "argmin", "any"])
def test_reduction_types_with_nan_and_ties(rtype: str, schedule: str = "default") -> None:
    out_dtype = torch.int64 if rtype.startswith("arg") else (torch.bool if rtype == "any" else F32)

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        v = ops.load("a", x[0] * 9 + r[0])
        red = ops.reduction(out_dtype if rtype != "any" else torch.bool, F32, rtype, v)
        ops.store_reduction("out", x[0], red)

    spec = KernelSpec(
        "red_" + rtype,
        (4,),
        (9,),
        (Stage("reduce", body),),
        (buf("a", "in", 36), buf("out", "out", 4, out_dtype)),
    )
    a = torch.randn(4, 9)
    a[1, 3] = float("nan")
    a[2, 2] = a[2, 6] = 10.0  # tie: first index wins
    out = torch.empty(4, dtype=out_dtype)
    run(spec, a, out, options=HalideOptions(schedule=schedule))
    want = {
        "sum": lambda: a.sum(1),
        "prod": lambda: a.prod(1),
        "max": lambda: a.amax(1),
        "min": lambda: a.amin(1),
        "argmax": lambda: a.argmax(1),
        "argmin": lambda: a.argmin(1),
        "any": lambda: (a != 0).any(1),
    }[rtype]()
    torch.testing.assert_close(out, want, equal_nan=True)


def test_welford_and_two_pass_softmax() -> None:
    def stats(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        mean, m2, _weight = ops.reduction(
            F32, F32, "welford_reduce", ops.load("a", x[0] * S0 + r[0])
        )
        ops.store_reduction("mean", x[0], mean)
        ops.store_reduction("m2", x[0], m2)

    spec = KernelSpec(
        "welford",
        (S1,),
        (S0,),
        (Stage("reduce", stats),),
        (buf("a", "in", S0 * S1), buf("mean", "out", S1), buf("m2", "out", S1)),
        (S0, S1),
    )
    a = torch.randn(6, 11)
    mean, m2 = torch.empty(6), torch.empty(6)
    run(spec, a, mean, m2, 11, 6)
    torch.testing.assert_close(mean, a.mean(1))
    torch.testing.assert_close(m2, a.var(1, unbiased=False) * 11)


def test_cumsum_scan_and_stable_descending_sort() -> None:
    def add(ops: Any) -> Any:
        def combine(left: tuple[Any, ...], right: tuple[Any, ...]) -> tuple[Any, ...]:
            return (ops.add(left[0], right[0]),)

        return combine

    def scan_body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        (c,) = ops.scan((F32,), add(ops), (ops.load("a", x[0] * 8 + r[0]),))
        ops.store("c", x[0] * 8 + r[0], c)

    def sort_body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        v = ops.load("a", x[0] * 8 + r[0])
        idx = ops.index_expr(r[0], torch.int64)
        sv, si = ops.sort((F32, torch.int64), (v, idx), True, True)
        ops.store("sv", x[0] * 8 + r[0], sv)
        ops.store("si", x[0] * 8 + r[0], si)

    a = torch.randint(0, 4, (3, 8)).float()
    a[0, 5] = float("nan")
    c = torch.empty(3, 8)
    run(
        KernelSpec(
            "cs", (3,), (8,), (Stage("scan", scan_body),), (buf("a", "in", 24), buf("c", "out", 24))
        ),
        a,
        c,
    )
    torch.testing.assert_close(c, a.cumsum(1), equal_nan=True)
    sv, si = torch.empty(3, 8), torch.empty(3, 8, dtype=torch.int64)
    run(
        KernelSpec(
            "st",
            (3,),
            (8,),
            (Stage("sort", sort_body),),
            (buf("a", "in", 24), buf("sv", "out", 24), buf("si", "out", 24, torch.int64)),
        ),
        a,
        sv,
        si,
    )
    want_v, want_i = torch.sort(a, dim=1, descending=True, stable=True)
    torch.testing.assert_close(sv, want_v, equal_nan=True)
    torch.testing.assert_close(si, want_i)


def _gather_spec() -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        i = ops.indirect_indexing(ops.load("idx", x[0]), 10)
        mask = ops.lt(ops.index_expr(x[0], torch.int64), ops.constant(5, torch.int64))
        val = ops.masked(mask, lambda: ops.load("table", i), 0.0)
        ops.store("out", x[0], val)

    return KernelSpec(
        "gather",
        (6,),
        (),
        (Stage("outer", body),),
        (buf("idx", "in", 6, torch.int64), buf("table", "in", 10), buf("out", "out", 6)),
    )


def test_masked_indirect_gather_wraps_negative_indices() -> None:
    table, out = torch.randn(10), torch.empty(6)
    idx = torch.tensor([0, -1, 9, 3, -10, 99])  # 99 is masked off (x0 >= 5)
    run(_gather_spec(), idx, table, out)
    torch.testing.assert_close(out[:5], table[idx[:5]])
    assert out[5].item() == 0.0


def test_out_of_bounds_index_raises_kernel_index_error() -> None:
    idx = torch.tensor([0, 1, 2, 3, 12, 0])
    with pytest.raises(KernelIndexError, match=r"kernel 'gather'.*index 12.*'table' of size 10"):
        run(_gather_spec(), idx, torch.randn(10), torch.empty(6))


def test_inout_and_bf16_round_trip() -> None:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        v = ops.load("a", x[0])
        ops.store("a", x[0], ops.mul(v, ops.constant(3.0, torch.bfloat16)))

    spec = KernelSpec(
        "inplace", (9,), (), (Stage("outer", body),), (buf("a", "inout", 9, torch.bfloat16),)
    )
    a = torch.randn(9).bfloat16()
    want = (a.float() * 3).bfloat16()
    run(spec, a)
    torch.testing.assert_close(a, want)


@pytest.mark.parametrize("schedule", ["none", "Mullapudi2016", "Adams2019", "Li2018"])
def test_schedules_agree(schedule: str) -> None:
    a, out = torch.randn(64), torch.empty(64)
    spec = _unary_spec("sched_" + schedule)
    run(spec, a, out, options=HalideOptions(schedule=schedule))
    torch.testing.assert_close(out, torch.exp(a) + 1)


def _unary_spec(name: str) -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        ops.store("out", x[0], ops.add(ops.exp(ops.load("a", x[0])), ops.constant(1.0, F32)))

    return KernelSpec(
        name, (64,), (), (Stage("outer", body),), (buf("a", "in", 64), buf("out", "out", 64))
    )


def test_invalid_options_are_refused() -> None:
    with pytest.raises(InvalidOption, match="schedule"):
        HalideOptions(schedule="fastest")
    with pytest.raises(InvalidOption, match="Anderson2021"):  # GPU only: refused for CPU kernels
        HalideBackend(HalideOptions(schedule="Anderson2021")).codegen(_unary_spec("cpu"))
    with pytest.raises(InvalidOption, match="colour"):
        HalideOptions.from_mapping({"colour": "red"})


def test_schedule_choice_changes_the_source() -> None:
    spec = _unary_spec("key")
    default = HalideBackend().codegen(spec).source
    auto = HalideBackend(HalideOptions(schedule="Mullapudi2016")).codegen(spec).source
    assert default != auto and "Mullapudi2016" in auto
    assert HalideBackend().codegen(spec).source == default  # deterministic


def test_warm_load_uses_the_cached_library_without_compiling(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polyduct.cache import default_cache
    from polyduct_halide import aot

    monkeypatch.setenv("POLYDUCT_CACHE_DIR", str(tmp_path))
    spec = _unary_spec("warm")
    a, out = torch.randn(64), torch.empty(64)
    run(spec, a, out)
    assert list((tmp_path / "halide-aot").glob(f"*/{aot.LIBRARY}"))
    builds = default_cache().builds

    def refuse(*args: Any) -> None:
        raise AssertionError("a warm load compiled the pipeline")

    monkeypatch.setattr(aot, "compile_library", refuse)
    assert builds > 0
    with state.isolated():  # as in a new process
        out2 = torch.empty(64)
        run(spec, a, out2)
        assert default_cache().builds == 0
    torch.testing.assert_close(out2, torch.exp(a) + 1)


def test_jit_path_without_aot_agrees() -> None:
    a, out = torch.randn(64), torch.empty(64)
    run(_unary_spec("jit"), a, out, options=HalideOptions(aot=False))
    torch.testing.assert_close(out, torch.exp(a) + 1)


def test_deep_expressions_with_nan_tests_and_mul_rn_build() -> None:
    # 40 levels of x = x*x + x: a DAG whose tree form has ~3^40 nodes; nothing may walk it as a
    # tree (Halide's strict_float/is_nan do), or the build runs out of time and memory.
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        v = ops.load("a", x[0])
        for _ in range(40):
            v = ops.sub(ops.add(ops.mul(v, v), v), ops.mul(v, v))
        ops.store("out", x[0], ops.mul_rn(ops.where(ops.isnan(v), v, v), v))

    spec = KernelSpec(
        "deep",
        (16,),
        (),
        (Stage("outer", body),),
        (buf("a", "in", 16), buf("out", "out", 16)),
    )
    a, out = torch.randn(16), torch.empty(16)
    run(spec, a, out)
    want = a.clone()
    for _ in range(40):
        want = (want * want + want) - want * want
    torch.testing.assert_close(out, want * want)


@pytest.mark.parametrize("schedule", ["Mullapudi2016", "Adams2019", "Li2018"])
def test_autoscheduled_small_reduction_falls_back_to_the_default_schedule(schedule: str) -> None:
    # The autoschedulers tile for 1024-element estimates; Halide refuses these 4-element buffers
    # at entry (nothing written yet) and the kernel reruns with the default schedule.
    test_reduction_types_with_nan_and_ties("sum", schedule)


def test_halide_without_package_metadata_compiles(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Halide built from source and put on the path has no distribution metadata: kernels
    still compile (every compile raised PackageNotFoundError), keyed by its extension modules."""
    from importlib.metadata import PackageNotFoundError

    from polyduct_halide import aot

    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setenv("POLYDUCT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(aot, "version", missing)
    aot.halide_version.cache_clear()
    try:
        assert aot.halide_version().startswith("unpackaged halide_")
        for options in (None, HalideOptions(aot=False)):
            with state.isolated():
                a, out = torch.randn(64), torch.empty(64)
                run(_unary_spec("unpackaged"), a, out, options=options)
                torch.testing.assert_close(out, torch.exp(a) + 1)
    finally:
        aot.halide_version.cache_clear()


def test_scan_over_an_empty_view_past_its_buffer_reads_nothing() -> None:
    """cummax and var_mean of an empty view whose offset lies past its buffer's end (a slice at
    the end of a transposed row): the scan's source was computed at one point, Halide's union
    of two empty regions, and read past the buffer (halide seed 10503, program 1237)."""

    def scanned(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = a0.select(0, 3).narrow(0, 7, 0)
        return torch.var_mean(v, correction=0)[1], torch.cummax(v, -1)[0]

    def sorted_(a0: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = a0[:, 7:]
        return v.sort(1)[0], v.sum(1)

    a = torch.randn(7, 7).t()
    for fn in (scanned, sorted_):
        torch._dynamo.reset()
        got = torch.compile(fn, backend="polyduct", options={"kernels": "halide"})(a)
        for g, w in zip(got, fn(a), strict=True):
            assert g.shape == w.shape
            torch.testing.assert_close(g, w, equal_nan=True)


def test_narrowed_integers_keep_their_sign() -> None:
    # int64 -> int32 masked to its low 32 bits was a non-negative int64 whose cast to int32
    # Halide may take as out of range: the column minimum of -8 came out -3 (fuzz seed 10913,
    # program 2916). A narrowed value is now sign-extended in the wide type before the cast.
    a = torch.tensor([[5, -3, 2], [-8, 7, 0], [1, 4, -6]], dtype=torch.int64)
    fn = torch.compile(lambda a: (a.to(torch.int32).amin(0), a.to(torch.int8).amax(1)),
                       backend="polyduct", options={"kernels": "halide"})
    for got, want in zip(fn(a), (a.to(torch.int32).amin(0), a.to(torch.int8).amax(1)), strict=True):
        assert torch.equal(got, want)
