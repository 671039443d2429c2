"""Process state: what polyduct keeps for the life of a process, in one object.

One `ProcessState` per process (`current()`), as pluggy keeps a program's plugins in one
`PluginManager`. It holds named slots: the core's (loaded plugin sets, the kernel cache of each
root, the remote-cache clients) and any a plugin declares for itself (its loaded libraries and
kernels, its compile pool). A module declares a slot once, at import:

    LIBRARIES = state.Slot("polyduct_cpp.libraries", dict[str, ctypes.CDLL])

and reads the current process's value with `LIBRARIES.get()`, made by the factory on first use.
`reset()` starts a fresh `ProcessState` (closing the old one's slots that say how), so the next
compile loads plugins, libraries and kernels again: tests use it to observe a cold process.
Objects made before a reset keep working; they just are no longer shared with later compiles.

What is not here, on purpose: memoised pure functions (`functools.cache` next to the function,
with a comment saying why), and registrations the process cannot undo (custom ops registered with
torch, logs registered with torch's logging, libraries loaded `RTLD_GLOBAL`), which stay where they
are made, each with a comment.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Slot(Generic[T]):
    """A named piece of process state: `factory()` makes its value for each `ProcessState`;
    `close(value)`, if given, runs when a reset discards it."""

    name: str
    factory: Callable[[], T]
    close: Callable[[T], None] | None = None

    def get(self) -> T:
        """This slot's value in the current process state."""
        return current().get(self)


class ProcessState:
    """The slots' values of one process; a slot's value is made on first use (thread-safe)."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[Slot[Any], Any]] = {}
        self._lock = threading.RLock()

    def get(self, slot: Slot[T]) -> T:
        found = self._values.get(slot.name)  # the common case takes no lock
        if found is not None and found[0] is slot:
            return cast("T", found[1])
        with self._lock:
            found = self._values.get(slot.name)
            if found is None:
                found = (slot, slot.factory())
                self._values[slot.name] = found
            elif found[0].factory != slot.factory:
                raise ValueError(f"two process-state slots are named {slot.name!r}")
            return cast("T", found[1])

    def names(self) -> tuple[str, ...]:
        """The slots that hold a value, in the order they were first used."""
        with self._lock:
            return tuple(self._values)

    def close(self) -> None:
        """Run every slot's `close` (its pools stop, its files close); the values are dropped."""
        with self._lock:
            values, self._values = list(self._values.values()), {}
        for slot, value in reversed(values):
            if slot.close is not None:
                slot.close(value)


_CURRENT = [ProcessState()]  # the one mutable holder: `reset` swaps its element
_SWAP = threading.Lock()


def current() -> ProcessState:
    """This process's state."""
    return _CURRENT[0]


def reset() -> ProcessState:
    """Discard this process's state (closing what its slots close) and start a fresh one: later
    compiles load plugins, libraries and kernels as a new process would. Returns the new state."""
    with _SWAP:
        old, _CURRENT[0] = _CURRENT[0], ProcessState()
    old.close()
    return _CURRENT[0]


@contextlib.contextmanager
def isolated() -> Iterator[ProcessState]:
    """A fresh process state for the block, the previous one back after it (tests: a cold
    process without losing the warm one)."""
    with _SWAP:
        previous, _CURRENT[0] = _CURRENT[0], ProcessState()
    try:
        yield _CURRENT[0]
    finally:
        with _SWAP:
            fresh, _CURRENT[0] = _CURRENT[0], previous
        fresh.close()
