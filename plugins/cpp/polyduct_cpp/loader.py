"""Load compiled kernels with ctypes: one foreign call per kernel call, no per-call array building.

A kernel's last C argument is a 4-word error slot ([code, site, index, size]) that the kernel fills
on a failed bounds check or device assertion; the call raises the matching `polyduct.errors` class.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

from polyduct.errors import KernelAssertError, KernelIndexError

_INDEX_ERROR: Final = 1
_ASSERT_ERROR: Final = 2
_LAUNCHER_MAX_ARGS: Final = 40


class CppKernel:
    """A compiled kernel following `kernel(*tensors, *sizes)`."""

    __slots__ = ("_err", "_err_addr", "_fn", "_ntensors", "name", "sites")

    def __init__(
        self, name: str, fn: Any, ntensors: int, nsizes: int, sites: Sequence[str]
    ) -> None:
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * ntensors + [ctypes.c_int64] * nsizes + [ctypes.c_void_p]
        self.name, self.sites = name, tuple(sites)
        self._fn, self._ntensors = fn, ntensors
        self._err = (ctypes.c_int64 * 4)()
        self._err_addr = ctypes.addressof(self._err)

    def __call__(self, *args: Any) -> None:
        n = self._ntensors
        self._fn(*[t.data_ptr() for t in args[:n]], *args[n:], self._err_addr)
        if self._err[0]:
            self._raise()

    def _raise(self) -> None:
        code, site, index, size = (int(v) for v in self._err)
        for i in range(4):
            self._err[i] = 0
        raise_kernel_error(self.name, self.sites, code, site, index, size)

    def __repr__(self) -> str:
        return f"<cpp kernel {self.name}>"


def raise_kernel_error(
    kernel: str, sites: Sequence[str], code: int, site: int, index: int, size: int
) -> None:
    """Raise the error a kernel reported in its error slot."""
    what = sites[site] if 0 <= site < len(sites) else "?"
    if code == _ASSERT_ERROR:
        raise KernelAssertError(kernel, "cpp", what)
    raise KernelIndexError(kernel, what, index, size)


class ErrorReporter:
    """Called by the launcher extension with a kernel's error slot; raises the matching error."""

    __slots__ = ("kernel", "sites")

    def __init__(self, kernel: str, sites: Sequence[str]) -> None:
        self.kernel, self.sites = kernel, tuple(sites)

    def __call__(self, code: int, site: int, index: int, size: int) -> None:
        raise_kernel_error(self.kernel, self.sites, code, site, index, size)


def make_kernel(
    name: str,
    fn: Any,
    ntensors: int,
    nsizes: int,
    sites: Sequence[str],
    launcher: ModuleType | None,
) -> Any:
    """The fastest callable for `fn`: the launcher's C type when available, else ctypes."""
    if launcher is not None and ntensors + nsizes < _LAUNCHER_MAX_ARGS:
        address = ctypes.cast(fn, ctypes.c_void_p).value
        return launcher.Kernel(address, ntensors, nsizes, ErrorReporter(name, sites))
    return CppKernel(name, fn, ntensors, nsizes, sites)
