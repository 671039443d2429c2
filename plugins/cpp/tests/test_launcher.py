"""The launcher extension: data pointers of plain tensors read in C, everything else by a call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import backend, buf, compile_one, spec

from polyduct.kernel import KernelFn
from polyduct_cpp.launcher import launcher_module, tensor_data_ptr_address


class Marked(torch.Tensor):
    """A tensor subclass: not one of the launcher's exact types, so `data_ptr()` is called."""


def _copy_spec():  # type: ignore[no-untyped-def]
    def body(ops, x, r):
        ops.store("out", x[0], ops.load("src", x[0]))

    return spec(
        "copy",
        [4],
        [],
        [("outer", body)],
        [buf("src", torch.float32, "in", 4), buf("out", torch.float32, "out", 4)],
    )


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelFn]:
    be = backend(tmp_path)
    if launcher_module(be.cache.root, be.options.compiler) is None:
        pytest.skip("no Python headers: kernels run through ctypes")
    yield compile_one(be, _copy_spec())


def test_kernels_use_the_launcher_with_torch_accessor(kernel: KernelFn) -> None:
    assert type(kernel).__name__ == "Kernel"
    assert tensor_data_ptr_address() != 0


@pytest.mark.parametrize("kind", ["tensor", "view", "parameter", "subclass"])
def test_every_tensor_kind_reads_its_own_data(kernel: KernelFn, kind: str) -> None:
    base = torch.arange(12.0)
    src = {
        "tensor": base[:4].clone(),
        "view": base[5:9],  # storage offset 5: the pointer includes it
        "parameter": torch.nn.Parameter(base[:4].clone(), requires_grad=False),
        "subclass": base[2:6].as_subclass(Marked),
    }[kind]
    out = torch.full((4,), -1.0)
    kernel(src, out)
    assert out.tolist() == torch.Tensor(src).tolist()


def test_non_tensor_argument_raises(kernel: KernelFn) -> None:
    with pytest.raises(AttributeError, match="data_ptr"):
        kernel([1.0, 2.0, 3.0, 4.0], torch.empty(4))
    out = torch.empty(4)
    kernel(torch.ones(4), out)
    assert out.tolist() == [1.0] * 4
