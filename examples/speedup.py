"""Compile a small fused workload with polyduct and report its speedup over eager and Inductor.

Run: .venv/bin/python examples/speedup.py [--kernels NAME] [--size N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch


def workload(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """LayerNorm followed by a GELU-like pointwise epilogue: one reduction kernel plus fusion."""
    y = torch.nn.functional.layer_norm(x, x.shape[-1:], w, b)
    return y * torch.sigmoid(1.702 * y) + torch.tanh(x) * 0.5


def median_time(fn: Callable[[], object], repeat: int = 30) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    from polyduct.plugins import load

    parser = argparse.ArgumentParser(description=__doc__)
    installed = load().kernel_backends.names()
    default = "cpp" if "cpp" in installed else "reference"
    parser.add_argument("--kernels", default=default, choices=sorted(installed))
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()

    torch.manual_seed(0)
    n = args.size
    x, w, b = torch.randn(n, n), torch.randn(n), torch.randn(n)
    inputs = (x, w, b)
    want = workload(*inputs)

    compile_start = time.perf_counter()
    ours = torch.compile(workload, backend="polyduct", options={"kernels": args.kernels})
    got = ours(*inputs)
    compile_s = time.perf_counter() - compile_start
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

    inductor_start = time.perf_counter()
    theirs = torch.compile(workload)
    theirs(*inputs)
    inductor_compile_s = time.perf_counter() - inductor_start

    t_eager = median_time(lambda: workload(*inputs))
    t_inductor = median_time(lambda: theirs(*inputs))
    t_ours = median_time(lambda: ours(*inputs))
    print(f"workload: layernorm + gelu epilogue, {n}x{n} float32, kernels={args.kernels}")
    print(f"{'variant':<22}{'median ms':>12}{'vs eager':>10}{'compile s':>11}")
    print(f"{'eager':<22}{t_eager * 1e3:>12.3f}{1.0:>10.2f}{'-':>11}")
    print(f"{'inductor':<22}{t_inductor * 1e3:>12.3f}{t_eager / t_inductor:>10.2f}"
          f"{inductor_compile_s:>11.2f}")
    print(f"{'polyduct-' + args.kernels:<22}{t_ours * 1e3:>12.3f}{t_eager / t_ours:>10.2f}"
          f"{compile_s:>11.2f}")
    print(f"speedup of polyduct-{args.kernels}: {t_eager / t_ours:.2f}x vs eager, "
          f"{t_inductor / t_ours:.2f}x vs inductor")


if __name__ == "__main__":
    main()
