"""Static completeness: ops a handler lacks, public names that are not ops, wrapper line types."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from polyduct.ops import OP_NAMES, missing_ops
from polyduct.wrapper.ir import LINE_TYPES


@dataclass
class StaticReport:
    """What a kernel backend's handler class (and the wrappers) leave out or add."""

    ops_cls: str
    missing: list[str] = field(default_factory=list)  # neither defined nor declared unsupported
    unsupported: dict[str, str] = field(default_factory=dict)  # declared in caps, with reasons
    extra: list[str] = field(default_factory=list)  # public callables that are not ops
    wrapper_missing: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # wrapper -> line -> why

    @property
    def failures(self) -> int:
        wrappers = sum(len(v) for v in self.wrapper_missing.values())
        return len(self.missing) + len(self.extra) + wrappers

    def lines(self, verbose: bool = True) -> list[str]:
        """The findings; without `verbose`, declared-unsupported ops are named on one line."""
        defined = len(OP_NAMES) - len(self.missing) - len(self.unsupported)
        head = f"static: {defined}/{len(OP_NAMES)} ops defined by {self.ops_cls}, "
        out = [head + f"{len(self.unsupported)} declared unsupported"]
        if self.missing:
            out.append(f"  MISSING ops ({len(self.missing)}): {', '.join(self.missing)}")
        if self.extra:
            out.append(f"  public names that are not ops: {', '.join(self.extra)}")
        if verbose:
            out += [f"  unsupported {op}: {why}" for op, why in sorted(self.unsupported.items())]
        elif self.unsupported:
            out.append(f"  unsupported: {', '.join(sorted(self.unsupported))} (-v: reasons)")
        for wrapper, lines in sorted(self.wrapper_missing.items()):
            if not lines:
                out.append(f"  wrapper {wrapper!r}: all {len(LINE_TYPES)} Wrapper IR line types ok")
            for line, why in sorted(lines.items()):
                out.append(f"  wrapper {wrapper!r} does not handle {line}: {why}")
        return out


def _extra_public(ops_cls: type) -> list[str]:
    extra = []
    for name, value in inspect.getmembers(ops_cls):
        if name.startswith("_") or name in OP_NAMES:
            continue
        if callable(value) and not isinstance(value, type):
            extra.append(name)
    return sorted(extra)


def check_static(ops_cls: type, unsupported: dict[str, str]) -> StaticReport:
    """Completeness of `ops_cls` against the protocol, honouring declared-unsupported ops."""
    missing = [op for op in missing_ops(ops_cls) if op not in unsupported]
    return StaticReport(
        ops_cls=ops_cls.__name__,
        missing=missing,
        unsupported=dict(unsupported),
        extra=_extra_public(ops_cls),
    )
