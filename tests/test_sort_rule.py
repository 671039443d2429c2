"""Which sorts are generated and which are library calls: a kernel backend's `caps.sort_limits`."""

from __future__ import annotations

import sympy
import torch

from polyduct.lowering.scan import library_sort_reason
from polyduct.plugins import load

LIMITS = {"cuda": 32, "cpu": 1024}


def test_lengths_up_to_the_limit_are_generated() -> None:
    assert library_sort_reason(sympy.Integer(32), "cuda:0", LIMITS) is None
    assert library_sort_reason(sympy.Integer(1), "cuda", LIMITS) is None
    assert library_sort_reason(sympy.Integer(1024), "cpu", LIMITS) is None


def test_longer_and_symbolic_lengths_are_library_calls() -> None:
    why = library_sort_reason(sympy.Integer(33), "cuda:1", LIMITS)
    assert why == (
        "sort along a dim of 33 elements on cuda:1 (generated sorts up to 32, past which they "
        "compile slowly): library call"
    )
    assert "symbolic length" in str(library_sort_reason(sympy.Symbol("s0"), "cuda", LIMITS))


def test_no_limit_for_a_device_the_backend_does_not_name() -> None:
    assert library_sort_reason(sympy.Integer(10**6), "cpu", {"cuda": 32}) is None
    assert library_sort_reason(sympy.Symbol("s0"), "cpu", {}) is None


def test_triton_sorts_on_cuda_that_compiled_for_minutes_are_library_calls() -> None:
    limits = load().kernel_backends.get("triton").backend_cls.caps.sort_limits
    for length in (256, 300, 513, 1000):  # over 60 s, 171 s, over 200 s to compile on CUDA
        assert library_sort_reason(sympy.Integer(length), "cuda:0", limits) is not None
    assert library_sort_reason(sympy.Integer(8000), "cpu", limits) is not None


def test_a_long_sort_runs_as_a_library_call_and_says_so(isolated_cache: object) -> None:
    graphs: list = []
    x = torch.randn(3, 2000)
    torch._dynamo.reset()
    opts = {"kernels": "triton", "observer": graphs.append}
    got = torch.compile(lambda x: torch.sort(x, descending=True), backend="polyduct", options=opts)(
        x
    )
    want = torch.sort(x, descending=True)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert "2000 elements on cpu (generated sorts up to 1024" in str(graphs[0].report)
