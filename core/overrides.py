"""Scoped overrides: per-program and per-graph changes to how an op or a graph is implemented.

A `Scope` is a plain frozen object passed in compile options (`options={"overrides": scope}`); it is
never global state and never changes a registry. Lookup order for an op is graph scope -> program
scope -> plugin override sets (in the order named by the program) -> core defaults (no override).

An op is named by its aten overload packet or overload (`aten._softmax`, `aten._softmax.default`,
`aten.softmax.int`) or by an op-set op (`exp`), which matches every kernel that contains that op.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from polyduct.codegen import identifier
from polyduct.errors import InvalidOption, UnknownName
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

    def kernel_backend(self, aten_ops: Iterable[str], op_names: Iterable[str]) -> str | None:
        """The backend for a kernel built from `aten_ops` holding op-set ops `op_names`.

        The first override in the chain (graph scope first) that names one of them and sets
        `kernels` decides; None when no override picks a backend.
        """
        origins, present = tuple(aten_ops), set(op_names)
        for scope in self.chain:
            for override in scope.ops:
                if override.kernels is None:
                    continue
                if override.op.startswith("aten."):
                    if any(matches(override.op, op) for op in origins):
                        return override.kernels
                elif override.op in present:
                    return override.kernels
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


def kept_whole(program: Scope | None, plugin_sets: Mapping[str, Scope]) -> tuple[str, ...]:
    """Aten ops some scope runs as an extern or user lowering: they must not be decomposed.

    Decomposition happens once for all graphs of a program, so a per-graph override keeps the op
    whole in every graph (graphs without that override lower or call it as usual).
    """
    if program is None:
        return ()
    scopes = [program, *program.per_graph.values(), *(plugin_sets[n] for n in program.sets)]
    return tuple(
        o.op
        for s in scopes
        for o in s.ops
        if o.op.startswith("aten.") and (o.extern is not False or o.lowering is not None)
    )


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
        whole = override.extern is not False or override.lowering is not None or not override.fuse
        if whole and not override.op.startswith("aten."):
            raise UnknownName(
                "aten op (extern, lowering and fuse apply to aten ops)", override.op, ()
            )
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


def scope_from_set(name: str, overrides: Mapping[str, Any]) -> Scope:
    """The `Scope` of a plugin's `OverrideSetSpec(name, overrides)`.

    `overrides` maps an op name to an `OpOverride`, a mapping of its fields, or a kernel backend
    name (short for `OpOverride(op, kernels=NAME)`); key `"graphs"` holds `GraphOverride`s.
    """
    ops: list[OpOverride] = []
    graphs: tuple[GraphOverride, ...] = ()
    for op, value in overrides.items():
        if op == "graphs":
            graphs = tuple(value)
        elif isinstance(value, OpOverride):
            ops.append(value if value.op == op else OpOverride(**{**_fields(value), "op": op}))
        elif isinstance(value, str):
            ops.append(OpOverride(op, kernels=value))
        elif isinstance(value, Mapping):
            known = [f.name for f in dataclasses.fields(OpOverride) if f.name != "op"]
            for key in sorted(set(value) - set(known)):
                raise InvalidOption(
                    f"override set {name!r}",
                    f"{op}.{key}",
                    value[key],
                    "one of " + ", ".join(known),
                )
            ops.append(OpOverride(op, **value))
        else:
            raise TypeError(f"override set {name!r}: {op!r} -> {type(value).__name__} is invalid")
    return Scope(ops=tuple(ops), graphs=graphs)


def _fields(value: OpOverride) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


EXTERN_NAMESPACE = "polyduct_scoped"
# Mirrors torch's op registry, which the process cannot undo (a dropped library would unregister
# ops that compiled programs call): kept out of `polyduct.state`, so a reset keeps it.
_EXTERNS: dict[tuple[str, int], tuple[str, Any, Callable[..., Any]]] = {}


def extern_op(aten_op: str, fn: Callable[..., Any]) -> str:
    """Register `fn` as custom op `polyduct_scoped::<name>` with `aten_op`'s schema.

    Wrappers resolve extern calls through `torch.ops`, so a user function becomes an op there;
    its fake (meta) implementation is the aten op's. The op name comes from the aten op and the
    function's qualified name, so generated code is deterministic. Returns `ns.name.default`.
    """
    key = (aten_op, id(fn))
    if key in _EXTERNS:
        return _EXTERNS[key][0]
    parts = aten_op.split(".")
    overload = getattr(getattr(torch.ops.aten, parts[1]), parts[2] if len(parts) > 2 else "default")
    taken = {entry[0] for entry in _EXTERNS.values()}
    base = identifier(f"{parts[1]}_{overload._overloadname}_{getattr(fn, '__qualname__', 'fn')}")
    base, n = base.strip("_") or "fn", 0
    name = base
    while f"{EXTERN_NAMESPACE}.{name}.default" in taken:
        n += 1
        name = f"{base}_{n}"
    schema = str(overload._schema)
    lib = torch.library.Library(EXTERN_NAMESPACE, "FRAGMENT")
    lib.define(name + schema[schema.index("(") :])
    lib.impl(name, fn, "CompositeExplicitAutograd")

    def fake(*args: Any, **kwargs: Any) -> Any:
        return overload(*args, **kwargs)

    torch.library.register_fake(f"{EXTERN_NAMESPACE}::{name}", fake, lib=lib)
    qualified = f"{EXTERN_NAMESPACE}.{name}.default"
    _EXTERNS[key] = (qualified, lib, fn)  # keeps the library (and so the op) alive
    return qualified
