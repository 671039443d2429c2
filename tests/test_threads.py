"""One compiled function called from many threads at once, on every installed kernel backend."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from polyduct.plugins import load

THREADS, CALLS = 8, 6


def _program(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.sin(x) * y).sum(-1) + x.amax(-1), torch.softmax(x, -1) * 2


def _cpu_backends() -> list[Any]:
    plugins = load()
    names = [n for n, s in plugins.kernel_backends.items() if "cpu" in s.backend_cls.caps.devices]
    # Triton runs CPU tensors only in its interpreter (TRITON_INTERPRET=1)
    off = os.environ.get("TRITON_INTERPRET") != "1"
    skip = pytest.mark.skip(reason="Triton on CPU tensors needs TRITON_INTERPRET=1")
    return [pytest.param(n, marks=skip) if n == "triton" and off else n for n in names]


@pytest.mark.parametrize("kernels", _cpu_backends())
def test_one_compiled_function_from_many_threads(kernels: str, isolated_cache: Path) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(_program, backend="polyduct", options={"kernels": kernels})
    _from_threads(compiled, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_one_triton_function_from_many_threads_on_cuda(isolated_cache: Path) -> None:
    pytest.importorskip("polyduct_triton")
    torch._dynamo.reset()
    compiled = torch.compile(_program, backend="polyduct", options={"kernels": "triton"})
    _from_threads(compiled, "cuda")


def _from_threads(compiled: Any, device: str) -> None:
    """THREADS threads each call `compiled` CALLS times at once; every result is checked."""
    failures: list[str] = []

    def work(seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        for _ in range(CALLS):
            x, y = torch.randn(6, 37, generator=gen), torch.randn(6, 37, generator=gen)
            x, y = x.to(device), y.to(device)
            try:
                for got, want in zip(compiled(x, y), _program(x, y), strict=True):
                    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
            except Exception as exc:  # noqa: BLE001 - every failure of every thread is reported
                failures.append(f"{type(exc).__name__}: {str(exc)[:300]}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, f"{len(failures)} of {THREADS * CALLS} calls failed: {failures[:3]}"
