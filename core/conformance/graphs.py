"""The `graph` category: whole programs through `torch.compile(backend="polyduct")` vs eager.

Each `GraphCase` is a small program exercising one thing the op-level probes cannot: fusion
(pointwise chain, reduction with epilogue), views, dynamic shapes, multiple outputs, in-place
mutation of an input, and training (forward + backward graphs). A case becomes one matrix row
(`graph.<name>`, float32) run by `run_graph_probe`: compile with `options={"kernels": backend}`,
run, compare every output (and mutated input, and gradient) with eager, and check that the
backend under test generated every kernel polyduct compiled.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from polyduct.conformance.probe import Probe
from polyduct.conformance.tolerance import EXACT, Tol, compare
from polyduct.kernel import KernelBackend

PREFIX = "graph."
F32_TOL = Tol(ulps=4, atol=1e-5, rtol=1e-4)

Inputs = dict[str, torch.Tensor]


def _pointwise_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (torch.sin(x) * 2 + torch.cos(y)).relu() * x + 1


def _softmax_layernorm(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sm = torch.softmax(x * 0.5, dim=-1)
    ln = torch.nn.functional.layer_norm(x, (x.shape[-1],), weight=w)
    return sm, ln


def _views(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a = x.t()[1:, ::2] * 3 + y[1::2, 2:8]
    b = x.reshape(-1)[5:40].view(5, 7).exp() - x[2:7, :7].permute(1, 0).t()
    return a, b


def _dynamic(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.tanh(x) + y
    return z, z.sum(dim=1)


def _multi_output(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    var, mean = torch.var_mean(x, dim=1, correction=1)
    return mean, var, x.amax(dim=1), x.argmax(dim=1), torch.cumsum(x, dim=1), x - mean[:, None]


def _in_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.mul_(2).add_(y)
    y.clamp_(min=-0.5)
    return x.sum(dim=0)


def _int_where(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.div(a, b, rounding_mode="floor")
    keep = torch.where(a > 0, a % b, -a)
    return q + keep, (a ^ b).to(torch.float32).mean(dim=0)


def _train(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    h = torch.nn.functional.gelu(torch.addmm(b, x, w))
    return torch.nn.functional.layer_norm(h, (h.shape[-1],)).square().mean()


def _scalar_reductions(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Reductions of 0-d tensors: one element, no reduction loop (issue 28)."""
    floats = (x.sum(), x.mean(), x.amax(), x.amin(), x.logsumexp(0), x.norm(), x.prod())
    spread = (x.var(correction=0), x.std(correction=0), x.var(), x.softmax(0), x.sum(0, True))
    ints = (i.sum(), i.prod(), i.amax(), i.argmax(), i.argmin(), x.argmax(), i.all(), i.any())
    return floats + spread + ints + (x.bool().all(), (x * 0).any())


def _int_rounding(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Float-domain ops of integers: rounding is the identity, isnan false, fmod C's remainder."""
    rounded = (a.floor(), a.ceil(), a.trunc(), a.round())
    return (*rounded, a.isnan(), a.isinf(), a.signbit(), torch.fmod(a, b), torch.fmod(a, 7))


def _negative_polygamma(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Hurwitz zeta of a negative q sums direct terms up to q + k > 9, as torch does."""
    return torch.polygamma(2, x), torch.polygamma(3, x), torch.special.zeta(4.0, x)


def _constant_reductions(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Reductions of values that do not depend on the element (counts): once per element."""
    count = torch.ones_like(x, dtype=torch.int64).sum(dim=0) + x.sum(0).long()
    return count, torch.masked.var(x), torch.masked.std(x, 1), torch.full_like(x, 1.5).prod(1)


def _empty_means(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The mean of no elements is NaN, also when Welford computes it with the variance."""
    return (*torch.var_mean(x), *torch.std_mean(x, dim=-1), x.mean(), x.var(dim=0))


def _half_rounding_division(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Trunc division of float16 / bfloat16 tensors is the trunc of the rounded quotient, not
    the rounded trunc, as eager's kernels compute it; on the CPU floor division rounds every
    step too (eager's CUDA floor division is not modelled exactly: docs/conventions.md)."""
    h, g = a.half(), b.half()
    big = torch.tensor(3.0e4, device=a.device)  # a float32 0-d dividend: rounded first
    trunc = (torch.div(a, b, rounding_mode="trunc"), torch.div(h, g, rounding_mode="trunc"),
             torch.div(big, b, rounding_mode="trunc"))
    if a.device.type != "cpu":
        return trunc
    return (*trunc, torch.div(a, b, rounding_mode="floor"), torch.div(h, g, rounding_mode="floor"),
            a // b[1:2])


def _narrowing_casts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A float made a wide integer, then narrowed: the integer is truncated (-4 becomes 252 as
    uint8, 200 becomes -56 as int8). Every float is finite and in range before its conversion,
    which is undefined otherwise."""
    w = (x.nan_to_num(0.0, 0.0, 0.0) * 100).clamp(-30000, 30000)
    i64, i32 = w.to(torch.int64), w.to(torch.int32)
    return (i64.to(torch.uint8), (i64 + 3).to(torch.int8), (i32 * 7).to(torch.int16),
            i32.to(torch.uint8))


@dataclass(frozen=True)
class GraphCase:
    """One program: `fn` over `make(seed, size)` inputs; `sizes` > 1 entries re-run the compiled
    program on new shapes (with `dynamic=True`, one symbolic compile serves them all)."""

    name: str
    fn: Callable[..., Any]
    make: Callable[[torch.Generator, tuple[int, int]], Inputs]
    sizes: tuple[tuple[int, int], ...] = ((7, 33),)
    dynamic: bool | None = None
    mutates: tuple[str, ...] = ()  # inputs the program writes: compared after the call
    grads: bool = False  # float inputs require grad; out0.backward() runs, grads are compared
    tol: Tol = F32_TOL
    dtype: torch.dtype = torch.float32  # the matrix column; the backend must support it


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float32)


def _two(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    return {"x": _randn(gen, *size), "y": _randn(gen, *size)}


def _one(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    x = _randn(gen, *size)
    x[0, :2] = torch.tensor([float("nan"), -0.0])  # NaN propagates through every output
    x[2, 5] = x[2, 9] = 10.0  # argmax tie: the first index wins (docs/conventions.md)
    # No inf: eager's Welford var_mean gives mean NaN for a row holding inf (inf - inf).
    return {"x": x}


def _norm_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    return {"x": _randn(gen, *size), "w": _randn(gen, size[1])}


def _views_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    return {"x": _randn(gen, 12, 10), "y": _randn(gen, 19, 13)}


def _int_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    a = torch.randint(-1000, 1000, size, generator=gen, dtype=torch.int64)
    b = torch.randint(1, 50, size, generator=gen, dtype=torch.int64)
    b[1::2] = -b[1::2]
    return {"a": a, "b": b}


def _scalar_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    x = _randn(gen) * 3
    return {"x": x, "i": torch.randint(-9, 9, (), generator=gen, dtype=torch.int64)}


def _negative_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    x = torch.rand(size, generator=gen) * -20 - 0.5
    return {"x": torch.where(x == x.round(), x - 0.25, x)}  # poles (integers) excluded


def _two_dims(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    return {"x": _randn(gen, *size)}


def _edge_two_dims(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    x = _randn(gen, *size)
    x[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, -1.27])
    return {"x": x}


def _empty_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    return {"x": _randn(gen, size[0], 0)}


def _half_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    a = (_randn(gen, *size) * 3000).to(torch.bfloat16)
    b = _randn(gen, *size).to(torch.bfloat16)
    a[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 5.0])
    b[0, 3:6] = torch.tensor([0.0, -0.0, float("inf")])
    return {"a": a, "b": b}


def _train_inputs(gen: torch.Generator, size: tuple[int, int]) -> Inputs:
    return {"x": _randn(gen, 6, 16), "w": _randn(gen, 16, 24) * 0.2, "b": _randn(gen, 24)}


GRAPH_CASES: tuple[GraphCase, ...] = (
    GraphCase("pointwise_fusion", _pointwise_chain, _two, ((19, 27),)),
    GraphCase("reduction_epilogue", _softmax_layernorm, _norm_inputs),
    GraphCase("views", _views, _views_inputs),
    GraphCase("dynamic_shapes", _dynamic, _two, ((5, 17), (9, 31), (3, 64)), dynamic=True),
    GraphCase("multi_output", _multi_output, _one, ((6, 29),)),
    GraphCase("in_place", _in_place, _two, ((11, 13),), mutates=("x", "y")),
    GraphCase("int_where", _int_where, _int_inputs, ((9, 21),), dtype=torch.int64),
    GraphCase("scalar_reductions", _scalar_reductions, _scalar_inputs),
    GraphCase("int_rounding", _int_rounding, _int_inputs, ((5, 9),), dtype=torch.int64),
    GraphCase("empty_means", _empty_means, _empty_inputs, ((3, 0),)),
    GraphCase("negative_polygamma", _negative_polygamma, _negative_inputs, ((4, 9),)),
    GraphCase("constant_reductions", _constant_reductions, _two_dims, ((5, 6),)),
    GraphCase("half_rounding_division", _half_rounding_division, _half_inputs, ((16, 40),),
              tol=EXACT, dtype=torch.bfloat16),
    GraphCase("narrowing_casts", _narrowing_casts, _edge_two_dims, ((16, 40),), tol=EXACT),
    GraphCase(
        "training_backward", _train, _train_inputs, grads=True, tol=Tol(atol=1e-4, rtol=1e-3)
    ),
)
BY_NAME = {PREFIX + case.name: case for case in GRAPH_CASES}


def installed_as(name: str, backend: KernelBackend) -> str | None:
    """`name` when torch.compile's `kernels=name` builds a backend of `backend`'s class."""
    from polyduct.plugins import load

    plugins = load()
    if name not in plugins.kernel_backends.names():
        return None
    return name if type(plugins.kernel_backend(name)) is type(backend) else None


def graph_probes() -> list[Probe]:
    """One probe (matrix row) per case; it carries the first size's inputs for the report."""
    probes = []
    for case in GRAPH_CASES:
        inputs = case.make(torch.Generator().manual_seed(0), case.sizes[0])
        probes.append(
            Probe(PREFIX + case.name, case.dtype, "graph", "torch.compile", (), (), inputs, {})
        )
    return probes


def _fresh(inputs: Inputs, device: str, grads: bool) -> Inputs:
    out = {}
    for name, t in inputs.items():
        t = t.detach().clone().to(device)
        out[name] = t.requires_grad_(grads and t.is_floating_point())
    return out


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [v for item in value for v in _flat(item)]
    return [value]


def _outputs(case: GraphCase, fn: Callable[..., Any], inputs: Inputs) -> dict[str, torch.Tensor]:
    results = _flat(fn(*inputs.values()))
    named = {f"out{i}": r for i, r in enumerate(results)}
    named.update({f"{n} (mutated)": inputs[n] for n in case.mutates})
    if case.grads:
        results[0].backward()
        named.update({f"{n}.grad": t.grad for n, t in inputs.items() if t.grad is not None})
    return {k: v.detach().cpu() for k, v in named.items() if isinstance(v, torch.Tensor)}


def _compare_all(
    case: GraphCase, got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], inputs: Inputs
) -> list[str]:
    if set(got) != set(want):
        return [f"outputs differ: got {sorted(got)}, want {sorted(want)}"]
    cpu = {k: v.detach().cpu() for k, v in inputs.items()}
    problems = []
    for name, w in want.items():
        bad = compare(name, got[name], w, case.tol, cpu)
        if bad is not None:
            problems.append(str(bad))
    return problems


def _kernel_problems(backend: str, graphs: list[Any]) -> list[str]:
    """Polyduct must have compiled the program, with every kernel from `backend` (or from a
    fallback for ops `backend` declares unsupported)."""
    if not graphs:
        return ["polyduct compiled no graph (torch.compile fell back or never called it)"]
    if not sum(g.kernel_count for g in graphs):
        return ["polyduct generated no kernel (everything went to extern calls)"]
    if any(g.report.kernels for g in graphs):
        return []
    others = sorted({s.backend for g in graphs for s in g.sources.values()} - {backend})
    return [f"kernels generated by {others}, not {backend!r}"] if others else []


def _fallbacks(graphs: list[Any]) -> list[str]:
    """The kernels that ran on another backend because `backend` declares an op unsupported."""
    return [line for g in graphs for line in g.report.kernels]


def _run_case(case: GraphCase, backend: str, device: str) -> tuple[list[str], list[str]]:
    torch._dynamo.reset()
    graphs: list[Any] = []
    opts: dict[str, Any] = {"kernels": backend, "observer": graphs.append}
    compiled = torch.compile(case.fn, backend="polyduct", options=opts, dynamic=case.dynamic)
    problems: list[str] = []
    for seed, size in enumerate(case.sizes):
        base = case.make(torch.Generator().manual_seed(seed), size)
        want = _outputs(case, case.fn, _fresh(base, device, case.grads))
        got_inputs = _fresh(base, device, case.grads)
        got = _outputs(case, compiled, got_inputs)
        problems += [f"size {size}: {p}" for p in _compare_all(case, got, want, base)]
    problems += _kernel_problems(backend, graphs)
    if case.dynamic and len(graphs) > 1:
        problems.append(f"dynamic=True compiled {len(graphs)} graphs for {len(case.sizes)} sizes")
    return problems, _fallbacks(graphs)


def run_graph_probe(probe: Probe, backend: str, device: str) -> tuple[list[str], float, list[str]]:
    """Problems of graph case `probe` on `backend` (empty: passed), the seconds it took, and
    its kernels that ran on a fallback (the case is then reported skipped, not passed)."""
    case = BY_NAME[probe.op]
    start = time.perf_counter()
    fallbacks: list[str] = []
    try:
        problems, fallbacks = _run_case(case, backend, device)
    except Exception as exc:  # noqa: BLE001 -- any error of a backend under test is a result
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        problems = [f"{type(exc).__name__}: {exc}\n" + "".join(tb[-6:])]
    finally:
        torch._dynamo.reset()
    return problems, time.perf_counter() - start, fallbacks
