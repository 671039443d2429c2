"""Run a program in eager and through `torch.compile(backend="polyduct")`, compare the results.

Compared: every output, every input after the call (in-place writes), and in training programs
the gradient of a weighted sum of the float outputs with respect to every float input. Values the
generator marked exact (integers, bools, and floats that only moved, compared or were
selected) must match bit for bit, NaN positions included; others within a tolerance of the
lowest float precision the program computes in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from polyduct.conformance.tolerance import EXACT, Tol, compare, mismatch_mask
from polyduct.fuzz.program import Program, make_inputs, render_function, shadow_values
from polyduct.fuzz.repro import load_module, unload_module, write_module

INEXACT_TOL = {
    torch.float64: Tol(ulps=8, atol=1e-9, rtol=1e-7),
    torch.float32: Tol(ulps=8, atol=1e-4, rtol=1e-4),
    torch.float16: Tol(ulps=4, atol=1e-2, rtol=1e-2),
    torch.bfloat16: Tol(ulps=4, atol=5e-2, rtol=5e-2),
}
# Dtypes whose results, when they differ from eager's, are judged against a float64 run: accepted
# where they are as close to it as eager is (a fused float16 kernel keeps float32 intermediates;
# eager's own vectorised float32 path can overflow where its scalar path does not).
UPCAST = (torch.float16, torch.bfloat16, torch.float32)
MODE_DYNAMIC = {"static": False, "dynamic": True, "auto": None}
Results = dict[str, torch.Tensor]


class InvalidProgram(Exception):
    """Eager itself refused the program: it is not a test of polyduct."""


class Mismatch(AssertionError):
    """The compiled program's results differ from eager's."""


class UpstreamBug(Mismatch):
    """torch's own compilers fail the program too: `aot_eager` (Dynamo and AOTAutograd, nothing
    of polyduct) raises or differs from eager in the same results, or Inductor differs from eager
    in them. A bug of torch, reported apart."""


class _Float64Casts(TorchFunctionMode):
    """The float64 reference run: casts to a narrower float (`x.to(torch.float32)` of an integer
    input, `.half()`) go to float64 too, as the float inputs do, and so does the float32 a bit
    view of integers makes (`i.view(torch.float32)`); a program that needs the narrower type (a
    bit view of a float) fails there, and is then judged without a reference."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _NARROWING:
            return args[0].to(torch.float64)
        if func is torch.Tensor.view and len(args) == 2 and args[1] in UPCAST:
            return func(*args, **kwargs).to(torch.float64)
        if func is torch.Tensor.to:
            args = tuple(torch.float64 if a in UPCAST else a for a in args)
            if kwargs.get("dtype") in UPCAST:
                kwargs = {**kwargs, "dtype": torch.float64}
        return func(*args, **kwargs)


_NARROWING = (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16)


class _Rounded(_Float64Casts):
    """The float64 reference run with every new floating-point value, and the gradient that
    flows back to it, moved by `step` relative with a random sign per element (one rounding of
    the program's narrowest float type): how far one rounding per op can move each result.
    `cos` of 22 is -0.99996083 in float32 with an error of a fifth of an ulp in eager and four
    fifths in a kernel, and `log1p` after it magnifies the difference 25,000-fold (cpp seed 9201,
    program 964). The signs differ per element because a sum whose terms cancel moves only when
    they do not all move alike, and gradients move too because a backward's sums cancel as well
    (triton seed 9802, program 7906: a broadcast's gradient summing +-4e20 to 0, where eager's
    order leaves 2**17). The same seed each run, so `step` and `-step` move every value apart."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step
        self.signs = torch.Generator().manual_seed(0)

    def _moved(self, t: torch.Tensor) -> torch.Tensor:
        sign = torch.randint(0, 2, t.shape, generator=self.signs).to(t.device, t.dtype) * 2 - 1
        return t * (1 + self.step * sign)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = super().__torch_function__(func, types, args, kwargs)
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
            return out
        store = out.untyped_storage().data_ptr()
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        if any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == store
               for t in leaves):
            return out  # a view or an in-place write: the same memory, already rounded
        moved = self._moved(out)
        if moved.requires_grad:
            moved.register_hook(self._moved)
        return moved


@contextlib.contextmanager
def _float64_reference(step: float = 0.0) -> Iterator[None]:
    """Float64 in place of float32 everywhere: narrowing casts (`_Float64Casts`) and the default
    dtype, which an op on integers computes in (`cos` of an int64 tensor); with `step`, each new
    value moved by it (`_Rounded`)."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _Rounded(step) if step else _Float64Casts():
            yield
    finally:
        torch.set_default_dtype(default)


_ROUNDING = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24}


def _rounding(program: Program) -> float:
    """The unit roundoff of the program's narrowest float type (float32 when it has none)."""
    used = [_ROUNDING[t.dtype] for t in shadow_values(program).values() if t.dtype in _ROUNDING]
    return max(used, default=_ROUNDING[torch.float32])


def _loss_weights(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1234)
    return [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device)
            for o in outputs]


def execute(fn: Callable[..., Any], program: Program, seed: int, device: str,
            alt: bool = False, upcast: bool = False, step: float = 0.0) -> Results:
    """Call `fn` on fresh inputs: outputs, inputs after the call, and gradients when training
    (`upcast`: float16, bfloat16 and float32 inputs as float64, for a more exact reference;
    `step`: each new value of that run moved by it, see `_Rounded`)."""
    inputs = make_inputs(program, seed, device, alt)
    if upcast:
        inputs = [t.detach().double().requires_grad_(t.requires_grad) if t.dtype in UPCAST else t
                  for t in inputs]
    with _float64_reference(step) if upcast else contextlib.nullcontext():
        outs = list(fn(*inputs))
    results = {name: out for name, out in zip(program.outputs, outs, strict=True)}
    results.update({spec.name: t for spec, t in zip(program.inputs, inputs, strict=True)})
    if program.train:
        diff = [o for o in outs if o.requires_grad and o.is_floating_point()]
        leaves = [t for t in inputs if t.requires_grad]
        loss = sum((o.double() * w).sum() for o, w in zip(diff, _loss_weights(diff), strict=True))
        if diff:
            grads = torch.autograd.grad(loss, leaves, allow_unused=True)
            for spec, grad in zip([s for s in program.inputs if s.grad], grads, strict=True):
                if grad is not None:
                    results[f"{spec.name}.grad"] = grad
    return {k: v.detach().cpu().clone() for k, v in results.items()}


def program_tolerance(program: Program) -> Tol:
    """The tolerance of the lowest float precision any value of `program` has."""
    used = {t.dtype for t in shadow_values(program).values()}
    tols = [tol for d, tol in INEXACT_TOL.items() if d in used] or [INEXACT_TOL[torch.float64]]
    return max(tols, key=lambda t: t.rtol)


def tolerance(program: Program, name: str, dtype: torch.dtype, inexact: Tol) -> Tol:
    """EXACT for exact values and non-floats; else `inexact` (looser for gradients)."""
    if name in program.exact or not dtype.is_floating_point:
        return EXACT
    return Tol(inexact.ulps, inexact.atol * 4, inexact.rtol * 4) if ".grad" in name else inexact


def closer_than_eager(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor,
                      tol: Tol, spread: torch.Tensor | None = None) -> bool:
    """Whether `got` is within tolerance of `want`, or as close to the float64 result `exact`
    as eager is (twice its error, or its worst error in the tensor; eager's NaN where the float64
    result is a number is an infinite error): a fused kernel keeps float16 and bfloat16 intermediates in float32 where eager rounds
    each one, and an ill-conditioned op after them (cos of 1000) magnifies eager's rounding, not
    the kernel's error."""
    if exact.shape != want.shape:
        return False
    g, w, e = (t.detach().double() for t in (got, want, exact))
    eager_error = torch.where(w.isnan() & ~e.isnan(), torch.inf, (w - e).abs())
    if spread is not None and spread.shape == eager_error.shape:  # what a rounding per op moves
        eager_error = torch.maximum(eager_error, spread.detach().double().nan_to_num(0.0))
    # an element eager happens to get right in an ill-conditioned result (a running sum of
    # +-1e4 and small values, summed in another order) is held to eager's worst error in it
    finite = eager_error[eager_error.isfinite()]
    worst = finite.max() if finite.numel() else torch.zeros((), dtype=eager_error.dtype)
    closer = (g - e).abs() <= 2 * torch.maximum(eager_error, worst) + tol.atol
    # where the float64 result is beyond the dtype's range and eager's is not a number either,
    # the order of a sum decides between an infinity and a NaN (partial sums of +-1.5e38
    # overflowing both ways: eager NaN, Inductor inf; triton seed 10932, program 9634)
    overflow = (e.abs() > torch.finfo(want.dtype).max) & ~w.isfinite() & ~g.isfinite()
    return bool((~mismatch_mask(got, want, tol) | closer | overflow | (g.isnan() & e.isnan())).all())


def _eager_misses(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor) -> bool:
    """Whether an exact float result is eager's wherever it is not the float64 run's, rounded:
    eager's vectorised `remainder` of 1.5 by a subnormal is NaN (its `a / b` overflows), its
    scalar path and the kernels give the exact remainder (cpp seed 9301, programs 3009, 5424)."""
    if exact.shape != want.shape or not got.is_floating_point():
        return False
    rounded = exact.to(got.dtype)
    same = (got == want) | (got.isnan() & want.isnan())
    exactly = (got == rounded) | (got.isnan() & rounded.isnan())
    return bool((same | exactly).all())


def compare_results(program: Program, got: Results, want: Results, label: str,
                    reference: Results | None = None, spread: Results | None = None) -> list[str]:
    """One line per differing result (empty: all equal within tolerance); with `reference`
    (eager in float64), a float result is accepted when it is as close to it as eager, or as
    one rounding per op moves it (`spread`)."""
    if set(got) != set(want):
        return [f"{label}: results {sorted(got)}, eager {sorted(want)}"]
    problems = []
    inexact = program_tolerance(program)
    for name, w in want.items():
        tol = tolerance(program, name, w.dtype, inexact)
        if reference is not None and name in reference and w.is_floating_point():
            if tol is EXACT and _eager_misses(got[name], w, reference[name]):
                continue
            if tol is not EXACT and closer_than_eager(got[name], w, reference[name], tol,
                                                      (spread or {}).get(name)):
                continue
        bad = compare(name, got[name], w, tol, {})
        if bad is not None:
            exact = " (exact)" if name in program.exact else ""
            problems.append(f"{label}{exact}: {bad}")
    return problems


def _judged(fn: Callable[..., Any], program: Program, device: str, seed: int, got: Results,
            want: Results, label: str, alt: bool = False) -> list[str]:
    """The problem lines of `got` against eager's `want`, float results that differ judged
    against eager run in float64 too."""
    problems = compare_results(program, got, want, label)
    if problems and any(t.dtype in UPCAST for t in want.values()):
        try:
            reference = execute(fn, program, seed, device, alt, upcast=True)
        except Exception:  # noqa: BLE001 -- the program needs its float32 (a bit view): no reference
            return problems
        problems = compare_results(program, got, want, label, reference)
        if problems:
            spread = _spread(fn, program, device, seed, alt, reference)
            problems = compare_results(program, got, want, label, reference, spread)
    return problems


def _spread(fn: Callable[..., Any], program: Program, device: str, seed: int, alt: bool,
            reference: Results) -> Results:
    """Per float result, how far the float64 run moves when each op's value is rounded by one
    unit of the program's narrowest float type, up or down (the larger of the two)."""
    step = _rounding(program)
    moved: Results = {}
    for sign in (1.0, -1.0):
        try:
            run = execute(fn, program, seed, device, alt, upcast=True, step=sign * step)
        except Exception:  # noqa: BLE001, S112 -- the moved run fails where the exact one ran
            continue
        for name, exact in reference.items():
            if name in run and exact.is_floating_point() and run[name].shape == exact.shape:
                delta = (run[name].double() - exact.double()).abs()
                moved[name] = torch.maximum(moved[name], delta) if name in moved else delta
    return moved


def device_lost(exc: BaseException) -> bool:
    """Whether `exc` is a CUDA error that leaves this process's device unusable (a device-side
    assert, an illegal address): every later CUDA call raises it again, so no later result in
    the process says anything about its own program (CUDA seed 44: one eager out-of-bounds
    scatter turned 585 later programs `invalid`)."""
    return "CUDA error: " in str(exc)


def check_program(fn: Callable[..., Any], program: Program, backend: str,
                  options: Mapping[str, Any] | None = None, device: str = "cpu",
                  seed: int = 0) -> int:
    """Raise `Mismatch` when polyduct's results differ from eager's (`UpstreamBug` when
    torch's own compilers fail the same way, see `_classified`); return the graph count.

    Raises `InvalidProgram` when eager raises, and lets any compile or run error propagate."""
    try:
        want = execute(fn, program, seed, device)
    except Exception as exc:
        raise InvalidProgram(f"{type(exc).__name__}: {exc}") from exc
    want_alt = None
    if program.has_alt():
        try:
            want_alt = execute(fn, program, seed + 1, device, alt=True)
        except Exception as exc:  # a constant in the program fits the first shapes only
            if device_lost(exc):  # nothing more can run on the device in this process
                raise InvalidProgram(f"eager raises on the second shapes: {exc}") from exc
            want_alt = None
    graphs: list[Any] = []
    opts = {**(options or {}), "kernels": backend, "observer": graphs.append}
    try:
        problems, got = _compiled_problems(fn, program, device, seed, want, want_alt, "polyduct",
                                           opts)
    except Exception as exc:
        if device_lost(exc):  # a second opinion would only meet the same dead device
            raise
        try:
            _compiled_problems(fn, program, device, seed, want, want_alt, "aot_eager")
        except Exception:  # noqa: BLE001 -- torch alone raises too: the failure is torch's
            raise UpstreamBug(f"aot_eager raises too: {type(exc).__name__}: {exc}") from exc
        raise
    if problems:
        verdict = _classified(fn, program, device, seed, want, want_alt, problems, got)
        if isinstance(verdict, Mismatch) and _nan_bits_through_a_view(program, problems, got,
                                                                      (want, want_alt)):
            raise InvalidProgram("its integer results hold NaNs that a float view of them wrote, "
                                 "and docs/conventions.md leaves which NaN an op makes "
                                 f"unspecified:\n{verdict}")
        if isinstance(verdict, Mismatch):
            rerun = _nan_canonical_rerun(program, device, seed, opts)
            if rerun == "":
                raise InvalidProgram("its results depend on the sign or payload of a NaN, which "
                                     f"docs/conventions.md leaves unspecified:\n{verdict}")
            if rerun is not None:
                verdict = type(verdict)(f"{verdict}\nwith the NaNs it reads made canonical: "
                                        f"{rerun}")
        raise verdict
    return len(graphs)


# operands whose NaNs' bits the program reads: the sign in `torch.copysign(a, B)` and
# `torch.signbit(B)`, every bit in `B.view(torch.int16)`
_NAN_BITS_READ = re.compile(
    r"(?P<sign>torch\.copysign\([^,()]+, |torch\.signbit\()(?P<b>[A-Za-z_]\w*)\)"
    r"|(?P<view>[A-Za-z_]\w*)\.view\((?P<dtype>torch\.\w+)\)"
)


# an integer tensor's bits as floats: `a1.view(torch.float32)`
_FLOAT_VIEW = re.compile(r"(?P<name>[A-Za-z_]\w*)\.view\(torch\.(?P<dtype>float16|bfloat16|float32|float64)\)")


def _nan_bits_through_a_view(program: Program, problems: list[str], got: Calls,
                             wants: tuple[Results, Results | None]) -> bool:
    """Whether every result that differs is an integer tensor the program viewed as floats, and
    differs only where both its and eager's bits, seen through that view, are NaNs: the program
    wrote a NaN into the integer tensor, and which NaN an op makes is unspecified. Eager's
    `x * -1` keeps a NaN's sign where the C++ backend's negation flips it (cpp seed 10901,
    program 9790: an int32 input mutated through its float32 view)."""
    views = {m["name"]: getattr(torch, m["dtype"])
             for stmt in program.stmts for m in _FLOAT_VIEW.finditer(stmt.expr)}
    for key in _keys(problems):
        label, name = key.split(": ")
        call = 1 if label.startswith("call 2") else 0
        want = wants[call]
        if call >= len(got) or want is None or name not in views or name not in want:
            return False
        ours, theirs, dtype = got[call][1].get(name), want[name], views[name]
        if (ours is None or ours.dtype.is_floating_point or ours.dtype.itemsize != dtype.itemsize
                or ours.shape != theirs.shape):
            return False
        differ = ours != theirs
        if not (ours.view(dtype).isnan() & theirs.view(dtype).isnan())[differ].all():
            return False
    return bool(problems)


def _canonical_nans(name: str) -> str:
    """`name` with every NaN replaced by the default quiet NaN (floats only)."""
    return (f"(torch.where({name} != {name}, torch.full_like({name}, float('nan')), {name}) "
            f"if {name}.is_floating_point() else {name})")


def _nan_canonical_rerun(program: Program, device: str, seed: int,
                         options: dict[str, Any]) -> str | None:
    """Run the program again with every NaN whose bits it reads made the default quiet NaN:
    "" when it then passes (its difference from eager is only which NaN an op made: x86 gives
    `0 / 0` the negative NaN, gcc folds it to the positive one; eager's amin of a bfloat16 NaN
    returns the default NaN, not the one it read; IEEE 754 and docs/conventions.md leave that
    open), why not when it fails, None when the program reads no NaN's bits."""

    def canonical(m: re.Match[str]) -> str:
        if m["view"]:
            return f"{_canonical_nans(m['view'])}.view({m['dtype']})"
        return f"{m['sign']}{_canonical_nans(m['b'])})"

    stmts = tuple(dataclasses.replace(s, expr=_NAN_BITS_READ.sub(canonical, s.expr))
                  for s in program.stmts)
    if stmts == program.stmts:
        return None
    blind = dataclasses.replace(program, stmts=stmts)
    with tempfile.TemporaryDirectory(prefix="polyduct-fuzz-") as scratch:
        path = Path(scratch) / "blind.py"
        write_module(path, f"import torch\n\n\n{render_function(blind)}")
        module = load_module(path, f"polyduct_fuzz_blind_{os.getpid()}")
        try:
            want = execute(module.fn, blind, seed, device)
            want_alt = (execute(module.fn, blind, seed + 1, device, alt=True)
                        if blind.has_alt() else None)
            problems, _ = _compiled_problems(module.fn, blind, device, seed, want, want_alt,
                                             "polyduct", options)
        except Exception as exc:  # noqa: BLE001 -- the rewritten program does not run
            return f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            unload_module(module)
    return "\n".join(problems)


Calls = list[tuple[str, Results]]  # (label, results) of each call of a compiled program


def _classified(fn: Callable[..., Any], program: Program, device: str, seed: int,
                want: Results, want_alt: Results | None, problems: list[str],
                got: Calls) -> Mismatch:
    """An `UpstreamBug` when torch's own compilers account for the difference: `aot_eager`
    (Dynamo and AOTAutograd alone, running the very graph polyduct compiles) differs from eager
    in the same results, a bug of theirs whatever polyduct makes of that graph (it may read
    memory no one wrote: seed 9001, program 8718); or Inductor gives polyduct's results where
    both differ from eager (its vectorised float32 gelu of +inf is NaN, its scalar path's inf).
    Inductor merely differing in the same results is not enough: both compilers may be wrong,
    each its own way (Halide's and Inductor's `0 * x` of an infinite x, halide seed 9103
    program 1075)."""
    keys = _keys(problems)
    if _eager_agrees_strided(fn, program, device, seed, got, keys):
        return UpstreamBug("eager gives these results on strided inputs:\n" + "\n".join(problems))
    for compiler in ("aot_eager", "inductor"):
        try:
            other, theirs = _compiled_problems(fn, program, device, seed, want, want_alt,
                                               compiler)
        except Exception:  # noqa: BLE001, S112 -- no second opinion from this compiler
            continue
        if not other or not keys <= _keys(other):
            continue
        if compiler == "inductor":
            apart = [line for (label, ours), (_, results) in zip(got, theirs, strict=True)
                     for line in compare_results(program, ours, results, label)]
            if keys & _keys(apart):
                continue
        return UpstreamBug(f"{compiler} differs from eager the same way:\n" + "\n".join(problems))
    return Mismatch("\n".join(problems))


def _eager_agrees_strided(fn: Callable[..., Any], program: Program, device: str, seed: int,
                          got: Calls, keys: set[str]) -> bool:
    """Whether eager, given the same values in strided memory (every other element), computes
    polyduct's results where they differ: eager's answer then depends on its inputs' layout. Its
    vectorised loops (contiguous inputs) and scalar ones (strided inputs) disagree on edge values:
    `fmod` by a subnormal is NaN in the first and exact in the second (cpp seed 9301, program
    9236), hardtanh's gradient at NaN 0 in the first (triton seed 9002, program 1205)."""
    strided = dataclasses.replace(
        program, inputs=tuple(dataclasses.replace(s, layout="strided") for s in program.inputs))
    try:
        theirs = [execute(fn, strided, seed + i, device, alt=i == 1) for i in range(len(got))]
    except Exception:  # noqa: BLE001 -- no second run of eager
        return False
    pairs = list(zip(got, theirs, strict=True))
    if any(set(ours) != set(results) for (_, ours), results in pairs):
        return False
    apart = [line for (label, ours), results in pairs
             for line in compare_results(program, ours, results, label)]
    return not keys & _keys(apart)


def _keys(problems: list[str]) -> set[str]:
    """The call and result each problem line names ("call 1: a0.grad: ..." -> "call 1: a0.grad")."""
    return {": ".join(line.split(": ")[:2]) for line in problems}


def _compiled_problems(fn: Callable[..., Any], program: Program, device: str, seed: int,
                       want: Results, want_alt: Results | None, compiler: str,
                       options: dict[str, Any] | None = None) -> tuple[list[str], Calls]:
    """The problem lines of `fn` compiled by the `compiler` backend against eager's results,
    and the results of each call."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=compiler, options=options,
                             dynamic=MODE_DYNAMIC[program.mode])
    try:
        calls = [("call 1", execute(compiled, program, seed, device))]
        problems = _judged(fn, program, device, seed, calls[0][1], want, "call 1")
        if want_alt is not None:
            calls.append(("call 2 (new shapes)",
                          execute(compiled, program, seed + 1, device, alt=True)))
            problems += _judged(fn, program, device, seed + 1, calls[1][1], want_alt,
                                "call 2 (new shapes)", alt=True)
    finally:
        torch._dynamo.reset()
    return problems, calls

