"""Run-time helpers of the modules the Python wrapper generates (`polyduct.wrapper.python`).

Generated modules import these by name: input and intermediate asserts, the learned input guard,
CPU and CUDA allocation, the current CUDA device, extern op lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol, final

import torch

from polyduct.errors import InputMismatch
from polyduct.wrapper import library


class OutputMismatch(InputMismatch):
    """An intermediate a kernel or extern op wrote differs from what the IR expects.

    Raised by the debug asserts (`POLYDUCT_DEBUG_ASSERTS=1`); names the producer and the buffer.
    """

    def __init__(
        self, producer: str, name: str, attr: str, expected: object, actual: object
    ) -> None:
        super().__init__(name, attr, expected, actual)
        self.producer = producer
        self.args = (
            f"{producer} wrote buffer {name!r} with {attr} {actual}; the IR expects {expected}",
        )


def assert_input(
    name: str,
    value: object,
    size: Sequence[int],
    stride: Sequence[int],
    dtype: torch.dtype,
    producer: str = "",
) -> None:
    """Raise unless `value` is a tensor of this size, stride and dtype.

    `InputMismatch` for a graph input; with `producer` (an intermediate that kernel or extern op
    wrote) `OutputMismatch`, which also rejects a bool tensor holding bytes other than 0 and 1.
    Strides of dimensions of size 1, and of empty tensors, are not compared: any stride
    addresses the same elements.
    """

    def fail(attr: str, expected: object, actual: object) -> InputMismatch:
        if producer:
            return OutputMismatch(producer, name, attr, expected, actual)
        return InputMismatch(name, attr, expected, actual)

    if not isinstance(value, torch.Tensor):
        raise fail("type", "torch.Tensor", type(value).__name__)
    if tuple(value.shape) != tuple(size):
        raise fail("size", tuple(size), tuple(value.shape))
    if value.dtype != dtype:
        raise fail("dtype", dtype, value.dtype)
    got = value.stride()
    empty = 0 in tuple(size)  # no element is addressed: AOTAutograd's empty tangents vary
    if not empty and any(n != 1 and a != b for n, a, b in zip(size, got, stride, strict=True)):
        raise fail("stride", tuple(stride), tuple(got))
    if producer and dtype == torch.bool and value.numel():
        top = int(value.view(torch.uint8).max())
        if top > 1:
            raise fail("bool byte value", "0 or 1", top)


def check_arity(inputs: Sequence[object], expected: int) -> None:
    """Raise `InputMismatch` unless exactly `expected` inputs were passed."""
    if len(inputs) != expected:
        raise InputMismatch("<inputs>", "count", expected, len(inputs))


class InputGuard(Protocol):
    """`check(*tensors)`: True only if the tensors match the ones the guard was made from."""

    def check(self, *tensors: object) -> bool: ...


@final
class _Unchecked:
    """The guard before the first call: never passes, so the first call asserts in full."""

    __slots__ = ()

    def check(self, *tensors: object) -> bool:
        return False


UNCHECKED: Final[InputGuard] = _Unchecked()
_GUARDS: Any = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
_TENSOR_GUARDS: Any = getattr(_GUARDS, "TensorGuards", None)


def input_guards(*tensors: torch.Tensor) -> InputGuard:
    """A one-call C check that later inputs match these tensors (which passed `assert_input`).

    Dynamo's `TensorGuards` compares dtype, device and dispatch keys, requires_grad, sizes and
    strides exactly: tens of ns per tensor against ~1 µs for `assert_input`. It is stricter than
    `assert_input` (every stride, requires_grad), so a call it rejects asserts in full and learns
    a new guard from those inputs. `UNCHECKED` where torch does not have it.
    """
    if _TENSOR_GUARDS is None:
        return UNCHECKED
    first: dict[int, int] = {}
    for i, t in enumerate(tensors):
        first.setdefault(id(t), i)
    guard: InputGuard = _TENSOR_GUARDS(
        *(tensors[i] for i in first.values()), dynamic_dims_sizes=None, dynamic_dims_strides=None
    )
    if len(first) == len(tensors):
        return guard
    repeats = tuple((i, first[id(t)]) for i, t in enumerate(tensors) if first[id(t)] != i)
    return _RepeatsGuard(guard, tuple(first.values()), repeats)


@final
class _RepeatsGuard:
    """For inputs that pass one tensor more than once (a backward graph's saved tensors may):
    `TensorGuards` rejects a tensor given twice, so it checks the distinct ones, and every repeat
    must be the very object it repeated before."""

    __slots__ = ("_distinct", "_guard", "_repeats")

    def __init__(
        self, guard: InputGuard, distinct: tuple[int, ...], repeats: tuple[tuple[int, int], ...]
    ) -> None:
        self._guard, self._distinct, self._repeats = guard, distinct, repeats

    def check(self, *tensors: object) -> bool:
        for i, j in self._repeats:
            if tensors[i] is not tensors[j]:
                return False
        return self._guard.check(*[tensors[i] for i in self._distinct])


Allocator = Callable[[tuple[int, ...], tuple[int, ...], torch.dtype], torch.Tensor]


def _direct_allocator(device: str) -> Allocator:
    """torch's direct allocator for `device` (a third of `torch.empty_strided`'s cost: no argument
    parsing or dispatch), or `torch.empty_strided` where torch does not have it."""
    direct: Allocator | None = getattr(_GUARDS, f"_empty_strided_{device}", None)
    if direct is not None:
        return direct

    def allocate(size: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty_strided(size, stride, dtype=dtype, device=device)

    return allocate


def _reinterpreter() -> Callable[[torch.Tensor, tuple[int, ...], tuple[int, ...], int], torch.Tensor]:
    """torch's direct view maker (base, size, stride, offset added to the base's): about 0.4 us
    less per view than `Tensor.as_strided`, which a training step's wrapper calls a hundred times
    or more (every matmul operand's transpose); `as_strided` where torch does not have it."""
    direct = getattr(_GUARDS, "_reinterpret_tensor", None)
    if direct is not None:
        return direct  # type: ignore[no-any-return]

    def view(base: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...],
             offset: int) -> torch.Tensor:
        return base.as_strided(size, stride, base.storage_offset() + offset)

    return view


reinterpret_tensor = _reinterpreter()
"""A view of a tensor's storage: `reinterpret_tensor(base, size, stride, offset)`, the offset
counted from the base's own."""

empty_strided_cpu: Allocator = _direct_allocator("cpu")
"""An uninitialised CPU tensor."""
empty_strided_cuda: Allocator = _direct_allocator("cuda")
"""An uninitialised tensor on the current CUDA device (a generated `call` first makes its
program's device the current one: `cuda_device`)."""


def cuda_device() -> int:
    """The index of the current CUDA device (one C call where torch has it)."""
    get = getattr(torch._C, "_cuda_getDevice", None)
    return int(get()) if get is not None else torch.cuda.current_device()


cuda_device_scope = torch.cuda.device
"""`with cuda_device_scope(index):` runs a generated `call` with its program's device current."""


def resolve_op(qualified: str) -> Any:
    """`torch.ops.<namespace>.<op>.<overload>` for a name such as "aten.mm.default"; the core's
    own library ops as their Python functions (a call without the dispatcher's few microseconds:
    `polyduct::restride` follows most library calls of a channels-last network)."""
    direct = library.DIRECT.get(qualified)
    if direct is not None:
        return direct
    target: Any = torch.ops
    for part in qualified.split("."):
        target = getattr(target, part)
    return target
