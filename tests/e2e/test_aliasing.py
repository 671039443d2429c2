"""Mutation and aliasing: outputs that alias inputs or each other, out= ops, in-place user ops."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import torch

from .helpers import assert_same, check, compile_fn, kernels_of


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_outputs_alias_each_other(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> Any:
        y = x * 2 + 1
        return y, y.view(-1), y[1], y.t(), x.t()

    x = torch.randn(4, 9, device=device)
    graphs = check(fn, backends, x)
    got = compile_fn(fn, backends)[0](x)
    want = fn(x)
    for i in (1, 2, 3):
        assert shares_storage(got[0], got[i]) == shares_storage(want[0], want[i]) is True
    assert shares_storage(got[4], x)
    assert kernels_of(graphs) == 1  # y is computed once, every view reads its buffer
    got[1].zero_()  # writing through one alias shows in the others, as in eager
    assert got[2].abs().sum().item() == 0 and got[0].abs().sum().item() == 0


def test_same_output_twice(backends: tuple[str, str], device: str) -> None:
    compiled, _ = compile_fn(lambda x: ((x + 1).sin(),) * 2, backends)
    a, b = compiled(torch.randn(3, 5, device=device))
    assert_same(a, b, atol=0, rtol=0)
    assert shares_storage(a, b)


def test_out_variant_and_in_place(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        torch.add(x, 1, out=out)
        x.mul_(out)
        return out.sum(0)

    x = torch.randn(5, 6, device=device)
    x[0, 0] = float("nan")
    mine, theirs = x.clone(), x.clone()
    out_mine, out_theirs = torch.empty(5, 6, device=device), torch.empty(5, 6, device=device)
    compiled, graphs = compile_fn(fn, backends)
    assert_same(compiled(mine, out_mine), fn(theirs, out_theirs))
    assert_same(out_mine, out_theirs)
    assert_same(mine, theirs)
    assert graphs


def test_entry_point_without_importing_polyduct(device: str, tmp_path: Path) -> None:
    """`torch.compile(backend="polyduct")` finds the backend through its entry point alone."""
    code = textwrap.dedent(
        f"""
        import sys
        import torch

        before = "polyduct" in sys.modules
        fn = torch.compile(lambda x: x.sin() + 1, backend="polyduct")
        x = torch.randn(5, device={device!r})
        torch.testing.assert_close(fn(x), x.sin() + 1)
        print(before, "polyduct" in sys.modules)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,  # nothing importable from the checkout by accident
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["False", "True"], run.stdout
