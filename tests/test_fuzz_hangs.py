"""Programs `polyduct fuzz` found whose compile never finished (a `timeout`), each as its shrunk
program, compiled with every CPU backend (the cases of `test_fuzz_regressions.py`, for compiles
that hung instead of failing: without the fix such a test does not end)."""

from __future__ import annotations

import pytest
import torch
from test_fuzz_regressions import ALL_BACKENDS, Case, _program

from polyduct.fuzz.check import check_program
from polyduct.fuzz.program import InputSpec


def _power_of_a_gathered_element(a0: torch.Tensor, i1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Halide's integer pow squares its base once per bit of the exponent's type; of a value
    # loaded at a gathered index, bounds inference walked that expression as a tree of 2**32
    # nodes and the pipeline never compiled. Constant whole exponents are products now.
    v2 = torch.clamp(torch.pow(a0, 1), max=3)
    return (v2 % a0.clamp(min=1))[i1], torch.pow(a0, 5)[i1], torch.pow(a0, 0)


CASES: dict[str, Case] = {
    "power_of_a_gathered_element": (
        _power_of_a_gathered_element,
        _program(InputSpec("a0", (1,), torch.int32, layout="strided"),
                 InputSpec("i1", (1,), torch.int64, values="index", high=1, low=-1), outputs=3),
        ALL_BACKENDS,
    ),
}


@pytest.mark.parametrize(("case", "backend"), [
    (case, backend) for case, (_, _, backends) in sorted(CASES.items()) for backend in backends
])
def test_fuzz_compile_regression(case: str, backend: str) -> None:
    fn, program, _ = CASES[case]
    check_program(fn, program, backend)
