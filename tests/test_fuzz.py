"""`polyduct fuzz`: generation is reproducible, a difference is caught, failures shrink, and a
fixed-seed campaign per CPU backend passes (the regression guard of the fuzzer's findings)."""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from polyduct.fuzz import check, runner
from polyduct.fuzz.check import InvalidProgram, Mismatch, UpstreamBug, check_program
from polyduct.fuzz.cli import FUZZ_DTYPES, _dtypes
from polyduct.fuzz.generate import generate
from polyduct.fuzz.program import (
    InputSpec,
    Program,
    Stmt,
    make_inputs,
    render_function,
    shadow_values,
)
from polyduct.fuzz.repro import load_module, render_module, unload_module
from polyduct.fuzz.runner import FAILURES, Campaign, run_campaign, summary_table
from polyduct.fuzz.shrink import shrink
from polyduct.fuzz.worker import Config

SEED = 28
# (backend, graphs): a few hundred programs per backend, about 4 minutes from a cold kernel cache
# on two cores (reference 60 s, cpp 75 s, halide 80 s, triton 50 s).
CI_RUNS = (("reference", 300), ("cpp", 200), ("halide", 200), ("triton", 200))


def test_generation_is_reproducible() -> None:
    first = [generate(7, i, FUZZ_DTYPES) for i in range(20)]
    assert first == [generate(7, i, FUZZ_DTYPES) for i in range(20)]
    assert len({p.stmts for p in first}) > 15  # and programs differ from one index to the next
    a, b = (make_inputs(first[3], seed=0) for _ in range(2))
    assert all(torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(a, b, strict=True))


def test_second_call_indexes_the_second_shapes() -> None:
    """A dynamic program's index inputs address the sizes of the call they are drawn for: the
    second call, at larger sizes, also reaches the elements past the first call's sizes."""
    specs = [
        s
        for p in (generate(11, i, FUZZ_DTYPES) for i in range(300))
        if p.has_alt()
        for s in p.inputs
        if s.values == "index" and s.alt_high is not None and 0 not in s.shape
    ]
    assert specs, "no dynamic program indexes a dim that grows"
    for spec in specs:
        assert spec.alt_high > spec.high
        program = Program((spec,), (Stmt("v0", f"{spec.name} + 0"),), ("v0",), "dynamic")
        (first,), (second,) = (make_inputs(program, seed=3, alt=alt) for alt in (False, True))
        assert int(first.max()) < spec.high and int(second.max()) < spec.alt_high
        assert int(first.min()) >= spec.low and int(second.min()) >= -spec.alt_high
    reach = [make_inputs(Program((s,), (), ()), 0, alt=True)[0] for s in specs]
    assert any(int(t.max()) >= s.high for t, s in zip(reach, specs, strict=True))


def test_no_program_converts_a_raw_float_to_an_integer() -> None:
    # Float to integer is undefined in C for NaN, inf and out-of-range values, and eager's answer
    # is the platform's: `int_tensor.copy_(float_tensor)` was generated unsanitised (seed 9001,
    # program 1893: eager gave INT64_MIN for -inf, the C++ kernel 0). Like a cast, it must go
    # through nan_to_num and a clamp first.
    copies = 0
    for index in (1893, *range(400)):
        program = generate(9001, index, FUZZ_DTYPES)
        values = shadow_values(program)
        for stmt in program.stmts:
            target, _, rest = stmt.expr.partition(".copy_(")
            if not rest or target not in values:
                continue
            copies += 1
            source = values.get(rest.removesuffix(")"))
            if source is not None and not values[target].dtype.is_floating_point:
                assert values[target].dtype == torch.bool or not source.is_floating_point(), stmt
    assert copies > 5


def test_no_training_program_sorts_unstably() -> None:
    # Tied elements (NaNs from log1p, for one) may come out of an unstable sort in any order, and
    # the gradient follows that order: eager on CUDA and a stable Triton sort disagreed on
    # `msort(log1p(a))`'s gradient (CUDA seed 11, program 1981). Training programs sort stably.
    unstable = ("torch.msort(", "torch.topk(")
    sorts = 0
    for index in (1981, *range(300)):
        program = generate(11, index, FUZZ_DTYPES)
        for stmt in program.stmts:
            sorts += "torch.sort(" in stmt.expr or any(u in stmt.expr for u in unstable)
            assert not (program.train and any(u in stmt.expr for u in unstable)), stmt
    assert sorts > 5


def test_no_program_takes_the_top_zero_of_a_0d_tensor() -> None:
    # eager's CUDA topk returns before writing anything when k is 0, leaving a 0-d input's
    # one-element result unwritten, where the CPU's holds the element (CUDA seed 43, program
    # 132: eager and polyduct read two different stale values); program 813 of today's
    # generator takes the top of a 0-d tensor
    program = generate(43, 813, FUZZ_DTYPES)
    values = shadow_values(program)
    topks = [s for s in program.stmts if s.expr.startswith("torch.topk(")]
    assert topks
    for stmt in topks:
        source = values[stmt.expr.removeprefix("torch.topk(").split(",")[0]]
        assert source.dim() or ", 0, dim=" not in stmt.expr, stmt


def test_circular_pads_are_never_negative() -> None:
    # A negative circular pad of a size-1 dim makes eager read memory no one wrote (CUDA seed
    # 12, program 1716): its result is undefined, so the fuzzer never asks for one.
    circular = 0
    for index in (1716, *range(2000)):
        for stmt in generate(12, index, FUZZ_DTYPES).stmts:
            if "mode='circular'" in stmt.expr:
                circular += 1
                widths = stmt.expr.split("(")[2].split(")")[0]
                assert all(int(w) >= 0 for w in widths.split(",") if w.strip()), stmt
    assert circular > 3


def _differs_when_compiled(a0: torch.Tensor) -> tuple[torch.Tensor]:
    # Dynamo traces the compiling branch: eager and compiled run different programs.
    return (a0 + 1,) if torch.compiler.is_compiling() else (a0,)


def _one_input() -> Program:
    return Program((InputSpec("a0", (3, 4), torch.float32),), (), ("out0",))


def test_a_difference_is_a_mismatch() -> None:
    with pytest.raises(Mismatch, match=r"out0: 12/12 elements differ"):
        check_program(_differs_when_compiled, _one_input(), "reference")


def _cos_of_remainder(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor]:
    # 0.47 % -1000 is -999.53, which eager rounds to bfloat16 (-1000) before the cosine; the
    # fused kernel keeps it in float32: cos differs by 0.3, and the float64 result sides with it.
    return (torch.cos(a1 % a0),)


def test_low_precision_results_are_judged_against_float64() -> None:
    program = Program(
        (InputSpec("a0", (3, 17), torch.bfloat16, values="edge"), InputSpec("a1", (), torch.float64)),
        (), ("out0",),
    )
    check_program(_cos_of_remainder, program, "reference", seed=0)
    low = Program((InputSpec("a0", (3, 4), torch.bfloat16),), (), ("out0",))
    with pytest.raises(Mismatch, match=r"out0: 12/12 elements differ"):
        check_program(_differs_when_compiled, low, "reference")


def _reciprocal_gelu_of_integers(a0: torch.Tensor) -> tuple[torch.Tensor]:
    # 1 / gelu(-3): eager's vectorised float32 erf is 6 ulp off in 1 + erf(-2.12), 1.3e-4 in the
    # result; the kernels' erf is closer to float64. The float64 reference must cast the integer
    # input to float64, not to the float32 the program asks for (seed 9002, program 463).
    return (torch.reciprocal(torch.nn.functional.gelu(a0.to(torch.float32))),)


def test_the_float64_reference_widens_casts() -> None:
    program = Program((InputSpec("a0", (5, 1, 7), torch.int64),), (), ("out0",))
    check_program(_reciprocal_gelu_of_integers, program, "reference", seed=0)


def _log1p_of_cos(a0: torch.Tensor) -> tuple[torch.Tensor]:
    # cos(22) is -0.99996083: one ulp of its float32 value moves log1p of it by 1.2e-3. Compiled,
    # the cosine is moved by one ulp, as another libm's may be (cpp seed 9201, program 964).
    c = torch.cos(a0 + a0)
    if torch.compiler.is_compiling():
        c = torch.nextafter(c, torch.zeros_like(c))
    return (torch.log1p(c),)


def test_one_rounding_magnified_by_the_program_is_not_a_mismatch() -> None:
    program = Program((InputSpec("a0", (60,), torch.int64, values="index", low=-30, high=30),),
                      (), ("out0",))
    check_program(_log1p_of_cos, program, "reference", seed=0)


def _cosh_of_signed_sum(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor]:
    # a0 (1, 16) broadcast over 16 rows of signs: a0's gradient sums 16 terms of +-sinh(s),
    # about 4e20, whose signs cancel in some columns. The exact sum is 0; each summation order
    # leaves another rounding residue (eager 2**13 to 2**17, the kernels 0), and the float64
    # reference run must see how far one rounding per value of the backward moves it (triton
    # seed 9802, program 7906).
    return (torch.cosh(torch.nansum(torch.copysign(a0, a1)).reshape(-1)),)


def _signed_sum_program() -> Program:
    return Program(
        (InputSpec("a0", (1, 16), torch.float64, grad=True),
         InputSpec("a1", (16, 16), torch.float32, grad=True)),
        (), ("out0",), train=True,
    )


@pytest.mark.parametrize("backend", ["reference", "cpp"])
def test_a_gradient_that_cancels_is_judged_by_its_rounding(backend: str) -> None:
    check_program(_cosh_of_signed_sum, _signed_sum_program(), backend, seed=0)


def test_a_float64_result_that_differs_is_still_a_mismatch() -> None:
    program = Program((InputSpec("a0", (3, 4), torch.float64), InputSpec("a1", (), torch.float32)),
                      (), ("out0",))

    def differs(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor]:
        return (_differs_when_compiled(a0)[0] * a1,)

    with pytest.raises(Mismatch, match=r"out0: 12/12 elements differ"):
        check_program(differs, program, "reference")


def _by_subnormal_bits(shape: tuple[int, ...], dtype: torch.dtype, bits: torch.dtype) -> Program:
    """A float input `a0` and an integer one `a1` whose small values, viewed as `dtype`, are
    subnormals; the result is exact."""
    return Program(
        (InputSpec("a0", shape, dtype),
         InputSpec("a1", shape, bits, values="index", low=1, high=64)),
        (), ("out0",), exact=("out0",),
    )


def _remainder_by_subnormals(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor]:
    # Eager's vectorised remainder by a subnormal is NaN (a / b overflows); its scalar path and
    # the kernels give the exact remainder, which float64 confirms (cpp seed 9301, program 3009).
    return (torch.remainder(a0, a1.view(torch.float32)),)


def test_an_exact_result_eager_misses_is_judged_by_float64() -> None:
    program = _by_subnormal_bits((4, 16), torch.float32, torch.int32)
    check_program(_remainder_by_subnormals, program, "cpp", seed=0)
    with pytest.raises(Mismatch, match=r"out0: 12/12 elements differ"):
        check_program(_differs_when_compiled, replace(_one_input(), exact=("out0",)), "cpp")


def _fmod_by_subnormals(a0: torch.Tensor, a1: torch.Tensor) -> tuple[torch.Tensor]:
    # float64: no wider run to judge by. Eager's vectorised fmod by a subnormal is NaN, its
    # scalar loop (strided inputs) exact, as the kernels are (cpp seed 9301, program 9236).
    return (torch.fmod(a0, a1.view(torch.float64)),)


def test_eager_disagreeing_with_itself_on_strided_inputs_is_upstream() -> None:
    program = _by_subnormal_bits((32, 3), torch.float64, torch.int64)
    with pytest.raises(UpstreamBug, match="eager gives these results on strided inputs"):
        check_program(_fmod_by_subnormals, program, "cpp", seed=0)


def _unfold_of_index(a0: torch.Tensor, i1: torch.Tensor) -> tuple[torch.Tensor]:
    # AOTAutograd hands the backward graph its tangent in the overlapping strides of the unfold
    # output (2, 1, 1): with Inductor and aot_eager too, a0's gradient is wrong.
    return (a0[:, i1].unfold(0, 10, 2),)


def test_a_difference_torch_itself_makes_is_upstream() -> None:
    program = Program(
        (InputSpec("a0", (32, 1), torch.float32, grad=True),
         InputSpec("i1", (1,), torch.int64, values="index", high=1, low=-1)),
        (), ("out0",), train=True,
    )
    try:
        check_program(_unfold_of_index, program, "reference")
    except UpstreamBug as exc:
        assert "a0.grad" in str(exc)
    else:
        pytest.skip("this torch computes the gradient right: nothing upstream to tell apart")


def test_upstream_means_torch_gives_our_results(monkeypatch: pytest.MonkeyPatch) -> None:
    # Halide and Inductor both lost the NaN of `0 * inf` (halide seed 9103, program 1075), each
    # in other elements: two wrong answers are not torch's bug. Inductor accounts for a
    # difference where it gives polyduct's results; aot_eager, which runs the very graph
    # polyduct compiles, wherever it differs from eager in the same results.
    x = torch.ones(3, 4)
    problems = ["call 1: out0: 12/12 elements differ"]
    ours, others = [("call 1", {"out0": x + 1})], [("call 1", {"out0": x + 2})]
    cases = (("inductor", ours, UpstreamBug), ("inductor", others, Mismatch),
             ("aot_eager", others, UpstreamBug))
    for culprit, theirs, verdict in cases:
        def second_opinion(*args: object, c: str = culprit, t: object = theirs) -> object:
            return (problems if args[6] == c else []), t

        monkeypatch.setattr(check, "_compiled_problems", second_opinion)
        found = check._classified(_differs_when_compiled, _one_input(), "cpu", 0, {"out0": x},
                                  None, problems, ours)
        assert type(found) is verdict, (culprit, verdict)


def _sign_program(flip: str) -> Program:
    # Under compilation the sign of `flip`'s elements of a0 is flipped before copysign reads it.
    flipped = f"(torch.where({flip}, -a0, a0) if torch.compiler.is_compiling() else a0)"
    return Program(
        (InputSpec("a0", (16, 33), torch.float32, values="edge"),
         InputSpec("a1", (16, 33), torch.float32)),
        (Stmt("v0", flipped), Stmt("v1", "torch.copysign(a1, v0)"), Stmt("v2", "torch.signbit(v0)"),
         Stmt("v3", "v0.view(torch.int32)")),
        ("v1", "v2", "v3"),
    )


def test_only_the_bits_of_a_nan_are_not_a_mismatch() -> None:
    # x86 gives `0 / 0` the negative NaN, gcc folds it to the positive one (cpp seed 9501,
    # program 1544: copysign by `b / b` of a bool b); eager's bfloat16 amin returns the default
    # NaN, not the one it read (cpp seed 78, program 175: its int16 view): docs/conventions.md
    # leaves which NaN open. A real mismatch says what the canonical re-run found.
    cases = ((("a0 != a0", InvalidProgram, "of a NaN")),
             ("a0 > 0", Mismatch, "made canonical: call 1.*: v1: "))
    for flip, verdict, says in cases:
        program = _sign_program(flip)
        scope: dict[str, object] = {"torch": torch}
        exec(render_function(program), scope)  # noqa: S102 -- the program's own text
        with pytest.raises(verdict, match=says):
            check_program(scope["fn"], program, "reference")  # type: ignore[arg-type]


def test_a_nan_written_into_integer_bits_is_not_a_mismatch() -> None:
    # An int32 input mutated through its float32 view: eager's `x * -1` keeps a NaN's sign,
    # the C++ backend's negation flips it (cpp seed 10901, program 9790). The int32 bits differ
    # only where both views hold a NaN; any other difference stays a mismatch.
    a1 = InputSpec("a1", (16,), torch.int32)
    program = Program((a1,), (Stmt("v0", "a1.view(torch.float32)"), Stmt("v1", "v0.mul_(-1)")),
                      ("v1",), exact=("a1",))
    scope: dict[str, object] = {"torch": torch}
    exec(render_function(program), scope)  # noqa: S102 -- the program's own text
    with pytest.raises(InvalidProgram, match="NaNs that a float view of them wrote"):
        check_program(scope["fn"], program, "cpp")  # type: ignore[arg-type]
    want = {"a1": torch.tensor([-11, 5], dtype=torch.int32)}  # a NaN's bits, a subnormal's
    problem = ["call 1 (exact): a1: 1/2 elements differ"]
    for ours, only_nans in (([2147483637, 5], True), ([-11, 6], False)):
        got = [("call 1", {"a1": torch.tensor(ours, dtype=torch.int32)})]
        assert check._nan_bits_through_a_view(program, problem, got, (want, None)) is only_nans


def test_a_sum_past_the_float_range_may_be_nan_where_eager_is_not_a_number_either() -> None:
    # +-1.5e38 summed in another order than eager's overflows both ways (triton seed 10932,
    # program 9634): where the float64 sum is past float32's range, inf and NaN are both orders'
    inf, nan, tol = float("inf"), float("nan"), check.INEXACT_TOL[torch.float32]
    exact = torch.tensor([-1.06e39, 1.06e39, 7.5e38, 3.0], dtype=torch.float64)
    want = torch.tensor([-inf, inf, nan, 3.0])
    assert check.closer_than_eager(torch.tensor([nan, nan, inf, 3.0]), want, exact, tol)
    assert not check.closer_than_eager(torch.tensor([nan, nan, inf, nan]), want, exact, tol)


def test_eager_errors_make_a_program_invalid() -> None:
    with pytest.raises(InvalidProgram, match="mat1 and mat2"):
        check_program(lambda a0: (a0 @ a0,), _one_input(), "reference")


def test_shrinking_keeps_what_the_failure_needs() -> None:
    program = generate(3, 4, FUZZ_DTYPES, known=False)
    assert len(program.stmts) >= 4, "pick a program with a few statements"
    culprit = program.stmts[len(program.stmts) // 2].expr
    program = replace(program, outputs=(*program.outputs, program.stmts[-1].out))

    def still_fails(p: Program) -> bool:
        return any(s.expr == culprit for s in p.stmts)

    small = shrink(program, still_fails, budget_s=30)
    assert [s.expr for s in small.stmts][-1] == culprit
    assert len(small.stmts) < len(program.stmts) and len(small.outputs) == 1


def test_reproducer_module_runs_the_program(tmp_path: Path) -> None:
    program = Program(
        (InputSpec("a0", (2, 3), torch.float32, values="edge"),),
        (Stmt("v0", "torch.sin(a0).sum(1)"),),
        ("v0",),
    )
    path = tmp_path / "test_repro.py"
    path.write_text(render_module(program, "reference", 5, {}, "cpu", "Mismatch: \"x\" \\ y"))
    module = load_module(path, "polyduct_fuzz_repro_test")
    assert program == module.PROGRAM
    assert module.BACKEND == "reference"
    module.test_reference_seed0_graph5()
    # Dynamo may import a traced function's module by name (torch 2.11 did: halide seed 9803,
    # program 2026, whose NaN-canonical re-run failed with ModuleNotFoundError)
    assert importlib.import_module("polyduct_fuzz_repro_test") is module
    unload_module(module)
    assert "polyduct_fuzz_repro_test" not in sys.modules


@pytest.mark.parametrize(("backend", "graphs"), CI_RUNS, ids=[b for b, _ in CI_RUNS])
def test_fixed_seed_campaign(backend: str, graphs: int, tmp_path: Path) -> None:
    config = Config(backend, SEED, {}, "cpu", _dtypes(backend), tmp_path, 0.0, known=False)
    results = run_campaign(Campaign(config, graphs, jobs=2, timeout_s=240), io.StringIO())
    assert len(results) == graphs
    failed = [r for r in results if r.status in FAILURES]
    assert not failed, summary_table(results, backend, 0.0)


def test_workers_leave_no_scratch_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each worker writes its programs under a directory of its own, removed when it stops; it
    # was left behind, one empty directory per worker of every campaign.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # read by the spawned workers' tempfile
    config = Config("reference", SEED, {}, "cpu", _dtypes("reference"), tmp_path / "out", 0.0,
                    known=False)
    results = run_campaign(Campaign(config, 2, jobs=2, timeout_s=240), io.StringIO())
    assert len(results) == 2
    assert not list(scratch.glob("polyduct-fuzz-*"))


def test_a_stopped_campaign_resumes_where_it_stopped(tmp_path: Path) -> None:
    # A runner cut off part-way (its time limit; once, a segfault of its own) left the rest of
    # the programs to be found and run by hand. --resume keeps the results this campaign logged
    # (not another seed's, not a line the kill cut short) and runs only the others.
    config = Config("reference", SEED, {}, "cpu", _dtypes("reference"), tmp_path, 0.0,
                    known=False)
    first = run_campaign(Campaign(config, 1, start=1, timeout_s=240), io.StringIO())
    log = tmp_path / "results.jsonl"
    other = json.dumps({**json.loads(log.read_text()), "index": 0, "campaign": "cpp seed 1"})
    log.write_text(log.read_text() + other + '\n{"index": 2, "sta')
    results = run_campaign(Campaign(config, 3, timeout_s=240, resume=True), io.StringIO())
    assert [r.index for r in results] == [0, 1, 2] and results[1] == first[0]
    lines = [json.loads(line) for line in log.read_text().splitlines()[3:]]
    assert sorted(line["index"] for line in lines) == [0, 2]


def test_eager_crashing_in_the_generator_costs_one_graph(tmp_path: Path) -> None:
    # Generating halide seed 10903's program 9769 runs eager's bfloat16 grouped conv2d on a
    # transposed stand-in, which segfaults (torch 2.11 and 2.13). The worker died before the
    # program existed; the runner generated it again to write the reproducer and died too.
    config = Config("reference", 10903, {}, "cpu", _dtypes("halide"), tmp_path, 0.0)
    results = run_campaign(Campaign(config, 2, start=9769, timeout_s=240), io.StringIO())
    if results[0].status != "upstream":
        pytest.skip(f"eager runs the program now: {results[0].status}")
    assert [r.index for r in results] == [9769, 9770] and "failed" in results[0].detail
    run = subprocess.run([sys.executable, results[0].repro], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode != 0 and "conv2d" in run.stdout.splitlines()[-1]


def _loses_the_device(a0: torch.Tensor) -> tuple[torch.Tensor]:
    if a0.shape[0] == 5:
        raise RuntimeError("CUDA error: device-side assert triggered")
    return (a0 + 1,)


def test_an_error_that_loses_the_device_ends_the_judging(monkeypatch: pytest.MonkeyPatch) -> None:
    # After a CUDA device-side assert every later call in the process raises it again: eager's
    # out-of-bounds scatter on the second shapes (CUDA seed 44, program 843) made polyduct's run
    # and then aot_eager's raise, which read as torch's own bug. Eager losing the device makes
    # the program invalid; polyduct losing it is a crash, with no second opinion.
    program = Program((InputSpec("a0", (4,), torch.float32, alt_shape=(5,)),), (), ("out0",),
                      mode="dynamic")
    with pytest.raises(InvalidProgram, match="second shapes"):
        check_program(_loses_the_device, program, "reference")
    asked = []

    def compiled(*args: object) -> object:
        asked.append(args[6])
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(check, "_compiled_problems", compiled)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        check_program(_loses_the_device, _one_input(), "reference")
    assert asked == ["polyduct"]


def test_a_retired_worker_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker whose device became unusable exits after sending its result: the runner starts
    # another before giving it the next graph.
    config = Config("reference", SEED, {}, "cpu", _dtypes("reference"), tmp_path, 0.0,
                    known=False)
    spawn, spawned = runner._spawn, []

    def retired_first(c: Config) -> runner._Slot:
        slot = spawn(c)
        if not spawned:
            slot.conn.send(None)
            slot.proc.join(timeout=60)
        spawned.append(slot)
        return slot

    monkeypatch.setattr(runner, "_spawn", retired_first)
    results = run_campaign(Campaign(config, 2, jobs=1, timeout_s=240), io.StringIO())
    assert [r.index for r in results] == [0, 1] and len(spawned) == 2


def test_programs_convolve() -> None:
    # 1-d and 2-d convolutions, depthwise ones reading their groups from the input's shape
    exprs = [s.expr for i in range(300) for s in generate(28, i, FUZZ_DTYPES).stmts
             if "conv" in s.tags]
    assert any("conv2d(" in e for e in exprs) and any("conv1d(" in e for e in exprs)
    assert any(".shape[" in e.split("groups=")[1] for e in exprs)
    assert any(".relu(), " in e for e in exprs)  # a computed input, as the layout plan needs
