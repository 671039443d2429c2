"""Part of scripts/install_test.sh: torch.compile one program on every installed backend.

Run with the freshly installed environment's Python, from outside the repository. Each kernel
backend (and each wrapper backend, with the default kernels) compiles a program of a fused
pointwise chain and a reduction; the result is compared with eager on random inputs.
"""

from __future__ import annotations

import sys

import torch


def program(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.sin(x) * y + torch.exp(-x.abs())
    return z, z.softmax(dim=-1).sum(dim=0)


def check(options: dict[str, str]) -> str:
    torch._dynamo.reset()
    x, y = torch.randn(33, 17), torch.randn(33, 17)
    y[0, :3] = torch.tensor([0.0, -0.0, 1e-30])
    got = torch.compile(program, backend="polyduct", options=options)(x, y)
    want = program(x, y)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    return f"torch.compile with {options}: matches eager"


def main() -> int:
    import polyduct
    from polyduct.plugins import load

    plugins = load()
    assert "/site-packages/" in polyduct.__file__, f"not the installed wheel: {polyduct.__file__}"
    print(f"polyduct {polyduct.__version__} from {polyduct.__file__}")
    for name in plugins.kernel_backends.names():
        if "cpu" in plugins.kernel_backends.get(name).backend_cls.caps.devices:
            print(check({"kernels": name}))
    for name in plugins.wrapper_backends.names():
        print(check({"wrapper": name}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
