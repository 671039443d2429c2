"""Scoped overrides: per-program and per-graph changes to how an op or a graph is implemented.

A `Scope` is a plain frozen object passed in compile options (`options={"overrides": scope}`); it is
never global state and never changes a registry. Lookup order for an op is graph scope -> program
scope -> plugin override sets (in the order named by the program) -> core defaults (no override).

An op is named by its aten overload packet or overload (`aten._softmax`, `aten._softmax.default`,
`aten.softmax.int`) or by an op-set op (`exp`), which matches every kernel that contains that op.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from polyduct.errors import UnknownName
from polyduct.ops import OP_NAMES


@dataclass(frozen=True)
class OpOverride:
    """What one op should become, for one program or graph.

    - `kernels`: run the kernels that contain this op on this kernel backend.
    - `extern`: run the op as a library call instead of lowering it: `True` for the aten op itself,
      or a callable with the aten op's signature.
    - `fuse=False`: realise the op's inputs and output, so no kernel fuses across it.
    - `lowering`: a user lowering with the signature of the frontend's lowerings.
    """

    op: str
    kernels: str | None = None
    extern: bool | Callable[..., Any] = False
    fuse: bool = True
    lowering: Callable[..., Any] | None = None


@dataclass(frozen=True)
class GraphOverride:
    """Backends for one whole graph, named by position (0, 1, ...) or name (`forward`, `backward`)."""

    graph: int | str
    kernels: str | None = None
    wrapper: str | None = None


@dataclass(frozen=True)
class Scope:
    """Overrides for one compiled program; `per_graph` holds scopes that apply to one graph only."""

    ops: tuple[OpOverride, ...] = ()
    graphs: tuple[GraphOverride, ...] = ()
    per_graph: Mapping[int | str, Scope] = field(default_factory=dict)
    sets: tuple[str, ...] = ()  # plugin override sets to consult after this scope

    def cache_key(self) -> str:
        """A stable digest of everything in the scope (callables by qualified name)."""
        return hashlib.sha256(_describe(self).encode()).hexdigest()


def _describe(value: object) -> str:
    if callable(value) and not isinstance(value, type):
        return f"<fn {getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}>"
    if isinstance(value, Scope):
        per_graph = sorted((str(k), _describe(v)) for k, v in value.per_graph.items())
        return f"Scope({_describe(value.ops)},{_describe(value.graphs)},{per_graph},{value.sets})"
    if isinstance(value, tuple):
        return "(" + ",".join(_describe(v) for v in value) + ")"
    if isinstance(value, OpOverride | GraphOverride):
        return (
            f"{type(value).__name__}("
            + ",".join(
                f"{name}={_describe(getattr(value, name))}" for name in value.__dataclass_fields__
            )
            + ")"
        )
    return repr(value)


def _packet(name: str) -> str:
    """`aten._softmax.default` -> `_softmax`; `aten.softmax` -> `softmax`; `exp` -> `exp`."""
    parts = name.split(".")
    if parts[0] == "aten":
        parts = parts[1:]
    return parts[0] if parts else name


def matches(override_op: str, aten_op: str) -> bool:
    """Whether an override named `override_op` applies to the aten overload `aten_op`."""
    if override_op.count(".") >= 2 or (not override_op.startswith("aten.") and "." in override_op):
        return override_op == aten_op
    return _packet(override_op) == _packet(aten_op)


@dataclass(frozen=True)
class Resolver:
    """The chain consulted while compiling one graph."""

    chain: tuple[Scope, ...]

    def for_aten(self, aten_op: str) -> OpOverride | None:
        """The first override in the chain for aten overload `aten_op`, if any."""
        for scope in self.chain:
            for override in scope.ops:
                if override.op.startswith("aten.") and matches(override.op, aten_op):
                    return override
        return None

    def for_ops(self, op_names: Iterable[str]) -> OpOverride | None:
        """The first override naming one of the op-set ops a kernel contains, if any."""
        present = set(op_names)
        for scope in self.chain:
            for override in scope.ops:
                if override.op in present:
                    return override
        return None


def resolve(
    program: Scope | None,
    graph_index: int,
    graph_name: str,
    plugin_sets: Mapping[str, Scope],
) -> tuple[Resolver, GraphOverride | None]:
    """The resolver and whole-graph override for graph `graph_index` (named `graph_name`)."""
    if program is None:
        return Resolver(()), None
    chain: list[Scope] = []
    for key in (graph_index, graph_name):
        if key in program.per_graph:
            chain.append(program.per_graph[key])
    chain.append(program)
    chain.extend(plugin_sets[name] for name in program.sets)
    graph_override = next(
        (g for s in chain for g in s.graphs if g.graph in (graph_index, graph_name)), None
    )
    return Resolver(tuple(chain)), graph_override


GRAPH_NAMES = ("forward", "backward", "inference")


def validate(
    scope: Scope,
    kernel_backends: Iterable[str],
    wrapper_backends: Iterable[str],
    plugin_sets: Iterable[str],
) -> None:
    """Reject unknown ops, backends, graphs and sets at compile time, listing the known names."""
    kernels, wrappers, sets = set(kernel_backends), set(wrapper_backends), set(plugin_sets)
    for name in scope.sets:
        if name not in sets:
            raise UnknownName("override set", name, sets)
    for override in scope.ops:
        _check_op(override.op)
        if override.kernels is not None and override.kernels not in kernels:
            raise UnknownName("kernel backend", override.kernels, kernels)
    for graph in scope.graphs:
        if isinstance(graph.graph, str) and graph.graph not in GRAPH_NAMES:
            raise UnknownName("graph", graph.graph, GRAPH_NAMES, "graph names")
        if graph.kernels is not None and graph.kernels not in kernels:
            raise UnknownName("kernel backend", graph.kernels, kernels)
        if graph.wrapper is not None and graph.wrapper not in wrappers:
            raise UnknownName("wrapper backend", graph.wrapper, wrappers)
    for key, sub in scope.per_graph.items():
        if isinstance(key, str) and key not in GRAPH_NAMES:
            raise UnknownName("graph", key, GRAPH_NAMES, "graph names")
        validate(sub, kernels, wrappers, sets)


def _check_op(name: str) -> None:
    if not name.startswith("aten."):
        if name not in OP_NAMES:
            raise UnknownName("op (op-set op or aten.<op>)", name, OP_NAMES, "op-set ops")
        return
    packet = _packet(name)
    if not hasattr(torch.ops.aten, packet):
        raise UnknownName(
            "aten op", name, [f"aten.{p}" for p in _close_aten_names(packet)], "close matches"
        )
    parts = name.split(".")
    if len(parts) == 3 and parts[2] not in getattr(torch.ops.aten, packet).overloads():
        known = [f"aten.{packet}.{o}" for o in getattr(torch.ops.aten, packet).overloads()]
        raise UnknownName("aten overload", name, known, "overloads")


def _close_aten_names(packet: str) -> list[str]:
    import difflib

    return difflib.get_close_matches(packet, dir(torch.ops.aten), n=8)
