"""Programs at eager's edges: writes eager refuses, and dtypes no kernel backend computes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from .helpers import assert_same, compile_fn


def _shifted_add(a: torch.Tensor) -> torch.Tensor:
    return a[1:].add_(a[:-1])


def _copy_transposed(a: torch.Tensor) -> torch.Tensor:
    return a.copy_(a.t())


def _row_into_all(a: torch.Tensor) -> torch.Tensor:
    return a.add_(a[0])


@pytest.mark.parametrize("fn", [_shifted_add, _copy_transposed, _row_into_all])
def test_overlapping_in_place_writes_raise_as_eager_does(
    backends: tuple[str, str], device: str, fn: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    a = torch.randn(4, 4, device=device)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        fn(a.clone())
    compiled, _ = compile_fn(fn, backends)
    mine = a.clone()
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        compiled(mine)
    assert torch.equal(mine, a)  # nothing was written


def _same_view_and_disjoint(a: torch.Tensor) -> torch.Tensor:
    a[:2].mul_(a[2:])  # disjoint halves: allowed
    return a.add_(a)  # the very same view: allowed


def test_full_and_no_overlap_are_still_allowed(backends: tuple[str, str], device: str) -> None:
    a = torch.randn(4, 4, device=device)
    compiled, _ = compile_fn(_same_view_and_disjoint, backends)
    mine, want = a.clone(), a.clone()
    assert_same(compiled(mine), _same_view_and_disjoint(want))
    assert_same(mine, want)


def _complex(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c = x.cfloat() * (x + 1).cdouble()
    return c, torch.view_as_real(x.chalf()).float(), (c * 2).real.float() + x


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_complex_values_run_as_library_calls(
    backends: tuple[str, str], device: str, dtype: torch.dtype
) -> None:
    x = (torch.randn(5, 7, device=device) * 4).to(dtype)
    compiled, graphs = compile_fn(_complex, backends)
    assert_same(compiled(x), _complex(x))
    reasons = "\n".join(str(g.report) for g in graphs)
    assert "torch.complex64 values: no kernel backend computes them; library call" in reasons


@pytest.mark.parametrize("exponent", [3, 3.0, -1, -2.0, -0.5, 0.5, 2])
def test_small_scalar_powers_round_as_eager(
    backends: tuple[str, str], device: str, exponent: float
) -> None:
    """Eager computes these powers without pow (x*x*x, 1/(x*x), 1/sqrt(x), ...); so does
    polyduct, with the same roundings: the C++ backend matches it bit for bit."""
    compiled, _ = compile_fn(lambda x: x.pow(exponent), backends)
    edges = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30, -3e38, 7.0])
    x = torch.cat([torch.randn(997) * 40, edges]).to(device)
    # x ** 0.5 is a correctly rounded sqrt; eager's vectorised loop is 1 ulp off it on some
    # elements (25.7692 ** 0.5), its scalar loop is not: no backend can match both
    exact = backends[0] == "cpp" and exponent != 0.5
    tol = {"rtol": 0.0, "atol": 0.0} if exact else {"rtol": 1e-6, "atol": 0.0}
    torch.testing.assert_close(compiled(x), x.pow(exponent), equal_nan=True, **tol)
    i = torch.randint(-50, 50, (301,), device=device)
    if exponent in (2, 3):
        torch.testing.assert_close(compiled(i), i.pow(exponent), rtol=0, atol=0)
