"""`Registry[T]`: a typed name -> item table that remembers which distribution added each item.

A registry refuses silent overwrites (`DuplicateName` names both distributions); a name that two
distributions claim is withdrawn for both (`refuse`, then `ContestedName` on use). It answers an
unknown name with `UnknownName` listing the installed ones. Nothing registers itself on import:
`polyduct.plugins` fills registries from the items plugin hooks return.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, final

from polyduct.errors import ContestedName, DuplicateName, UnknownName

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a registered item came from: a distribution and its version."""

    distribution: str
    version: str

    def __str__(self) -> str:
        return f"{self.distribution} {self.version}"


@final
class Registry(Generic[T]):
    """Items of one kind (`kind` names it in errors: "kernel backend", "lowering"...) by name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._origins: dict[str, Origin] = {}
        self._contested: dict[str, list[Origin]] = {}

    def add(self, name: str, item: T, origin: Origin) -> None:
        """Register `item` as `name`; a second registration of `name` raises `DuplicateName`."""
        if name in self._contested:
            first = self._contested[name][0]
            raise DuplicateName(self.kind, name, str(first), str(origin))
        if name in self._items:
            raise DuplicateName(self.kind, name, str(self._origins[name]), str(origin))
        self._items[name] = item
        self._origins[name] = origin

    def refuse(self, name: str, origin: Origin) -> ContestedName:
        """Withdraw `name`, which `origin` claims as well as its holder: every claimant is refused,
        and `get(name)` raises the `ContestedName` returned here."""
        claimants = self._contested.setdefault(name, [])
        if name in self._items:
            del self._items[name]
            claimants.append(self._origins.pop(name))
        if origin not in claimants:
            claimants.append(origin)
        return ContestedName(self.kind, name, [str(c) for c in claimants])

    def contested(self) -> list[str]:
        """Names withdrawn because several distributions claimed them, sorted."""
        return sorted(self._contested)

    def claimants(self, name: str) -> list[Origin]:
        """Every distribution that claimed the withdrawn name `name` (empty if it is not)."""
        return list(self._contested.get(name, ()))

    def get(self, name: str) -> T:
        """The item called `name`; `UnknownName` (listing installed names) if there is none, and
        `ContestedName` if several distributions claim it."""
        if name in self._contested:
            claimants = [str(c) for c in self._contested[name]]
            raise ContestedName(self.kind, name, claimants)
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(self.kind, name, self._items) from None

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def origin(self, name: str) -> Origin:
        """The distribution (and version) that registered `name`."""
        self.get(name)
        return self._origins[name]

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, item) pairs sorted by name."""
        return [(name, self._items[name]) for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()!r})"
