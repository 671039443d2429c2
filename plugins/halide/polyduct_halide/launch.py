"""Calling compiled pipelines on torch tensors: zero-copy buffers and error translation."""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import halide as hl
import torch

from polyduct.errors import KernelAssertError, KernelCompileError, KernelIndexError
from polyduct_halide import cuda
from polyduct_halide.aot import Runtime
from polyduct_halide.aot import buffer as aot_buffer
from polyduct_halide.trace import CHECK_MAGIC

_VIEW = {torch.bfloat16: torch.int16, torch.bool: torch.uint8}


def as_buffer(tensor: torch.Tensor) -> hl.Buffer:
    """A 1-D Halide buffer over the memory `tensor` addresses from its first element (no copy)."""
    extent = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    flat = torch.as_strided(tensor.detach(), (extent,), (1,))
    view = _VIEW.get(tensor.dtype)
    return hl.Buffer((flat.view(view) if view is not None else flat).numpy())


def _empty(dtype: torch.dtype) -> hl.Buffer:
    view = _VIEW.get(dtype, dtype)
    return hl.Buffer(torch.zeros(1, dtype=view).numpy())


def _buffer(tensor: torch.Tensor) -> hl.Buffer:
    return _empty(tensor.dtype) if tensor.numel() == 0 else as_buffer(tensor)


def _translate(module: ModuleType, backend: str, error: Exception | str) -> Exception:
    text = str(error)
    match = re.search(rf"\b{CHECK_MAGIC} (-?\d+) (-?\d+) (-?\d+)", text)
    if match is None:
        return KernelCompileError(backend, module.KERNEL, str(module.__file__), f"run time: {text}")
    buffer, message = module.CHECKS[int(match.group(1))]
    if message:
        return KernelAssertError(module.KERNEL, backend, message)
    return KernelIndexError(module.KERNEL, buffer, int(match.group(2)), int(match.group(3)))


def _order(module: ModuleType) -> tuple[int, list[int], list[int]]:
    """Tensor count, and which tensors are the pipeline's inputs and outputs, in call order."""
    args: Sequence[tuple[str, str, str, str]] = module.ARGS
    inputs = [i for i, a in enumerate(args) if a[2] in ("in", "inout")]
    slot = {a[0]: i for i, a in enumerate(args)}
    return len(args), inputs, [slot[name] for name in module.OUTPUTS]


def _nothing_to_write(tensors: Sequence[torch.Tensor], outputs: Sequence[int]) -> bool:
    """Every output is empty: no element to compute. Halide would still check the (empty)
    regions its bounds inference gives the inputs, which may start past an input's end."""
    return all(tensors[i].numel() == 0 for i in outputs)


def make_kernel(
    module: ModuleType, compiled: Callable[..., Any], backend: str
) -> Callable[..., None]:
    """The kernel callable `kernel(*tensors, *sizes)` for a JIT-compiled pipeline module."""
    n_tensors, inputs, outputs = _order(module)

    def kernel(*call_args: Any) -> None:
        tensors, sizes = call_args[:n_tensors], call_args[n_tensors:]
        if _nothing_to_write(tensors, outputs):
            return
        bufs = [_buffer(t) for t in tensors]
        try:
            compiled(
                *(bufs[i] for i in inputs), *(int(s) for s in sizes), *(bufs[i] for i in outputs)
            )
        except hl.HalideError as error:
            raise _translate(module, backend, error) from None

    kernel.__name__ = str(module.KERNEL)
    return kernel


def make_aot_kernel(
    module: ModuleType, fn: Callable[..., int], runtime: Runtime, backend: str
) -> Callable[..., None]:
    """The kernel callable `kernel(*tensors, *sizes)` for a pipeline's shared-library entry point."""
    n_tensors, inputs, outputs = _order(module)
    dtypes = [getattr(torch, a[3]) for a in module.ARGS]

    def kernel(*call_args: Any) -> None:
        tensors, sizes = call_args[:n_tensors], call_args[n_tensors:]
        if _nothing_to_write(tensors, outputs):
            return
        # (buffer, dimension) pairs: both must live until the call returns
        iface = runtime.device_interface
        bufs = [aot_buffer(t, d, iface) for t, d in zip(tensors, dtypes, strict=True)]
        # a CUDA runtime (device interface set) runs on torch's current stream; host kernels skip
        # the search for a CUDA tensor on every call
        device = cuda.device_of(tensors) if iface else None
        if device is not None:
            cuda.set_stream(runtime.lib, device)
        runtime.messages.clear()
        status = fn(
            *(ctypes.byref(bufs[i][0]) for i in inputs),
            *(ctypes.c_int32(int(s)) for s in sizes),
            *(ctypes.byref(bufs[i][0]) for i in outputs),
        )
        if status != 0:
            text = "\n".join(runtime.messages) or f"error code {status}"
            raise _translate(module, backend, text)

    kernel.__name__ = str(module.KERNEL)
    return kernel
