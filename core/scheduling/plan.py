"""Turns scheduled groups into `KernelSpec`s: buffer roles, removed intermediates, size args."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import sympy

from polyduct.indexing import expanded, free_symbols, product, symbol_text
from polyduct.ir import ExternNode, IRGraph, StorageView
from polyduct.kernel import KernelBuffer, KernelSpec, Role
from polyduct.scheduling.fusion import Group, Item, stages
from polyduct.scheduling.kernel_key import KernelKeys
from polyduct.wrapper.ir import Ref
from polyduct.wrapper.runtime import resolve_op

_INDEX_PREFIXES = ("x", "r", "indirect")


@dataclass
class KernelPlan:
    """A group turned into a `KernelSpec`, plus the buffers it allocates (written, not removed)."""

    spec: KernelSpec
    outputs: tuple[str, ...]
    reads: tuple[str, ...]
    reuses: tuple[tuple[str, str], ...] = ()  # (output, dying input whose storage it takes)


@dataclass
class Planned:
    """The schedule as kernel plans and extern nodes, in program order."""

    items: list[KernelPlan | ExternNode]


def extern_reads(node: ExternNode) -> set[str]:
    """Buffers an extern call reads (its argument views' bases included)."""
    names: set[str] = set()
    _refs(node.args, names)
    _refs(tuple(v for _, v in node.kwargs), names)
    view_names = {name for name, _ in node.views}
    names -= view_names
    names.update(view.buffer for _, view in node.views)
    return names


def _refs(values: Sequence[Any], into: set[str]) -> None:
    for v in values:
        if isinstance(v, Ref):
            into.add(v.name)
        elif isinstance(v, (tuple, dict)):
            _refs(tuple(v.values()) if isinstance(v, dict) else v, into)


def _readers(items: Sequence[Item], graph: IRGraph) -> dict[str, set[int]]:
    readers: dict[str, set[int]] = {}
    for i, item in enumerate(items):
        if isinstance(item, ExternNode):
            names = extern_reads(item)
        else:
            names = {n for m in item.members for n, _ in m.access.loads}
        for n in names:
            readers.setdefault(n, set()).add(i)
    for out in graph.outputs:
        if isinstance(out, StorageView):
            readers.setdefault(out.buffer, set()).add(-1)
    return readers


def plan(graph: IRGraph, items: Sequence[Item], inplace: bool = True) -> Planned:
    """KernelSpecs for every group (named `kernel0`, `kernel1`, ... in order); `inplace`: an
    output may take a dying input's storage (the kernel backend's `Capabilities.inplace`).

    A kernel structurally identical to an earlier one (`kernel_key`: the same source but for
    names) takes the earlier one's name, so it is generated and compiled once and called twice.
    """
    readers = _readers(items, graph)
    fresh = _fresh_extern_results(items)
    out: list[KernelPlan | ExternNode] = []
    existing = set(graph.inputs)  # buffers holding data before the item at hand
    keys = KernelKeys()
    count = 0
    for i, item in enumerate(items):
        if isinstance(item, ExternNode):
            out.append(item)
            existing.update(item.outputs)
            continue
        kernel = _plan_group(graph, item, f"kernel{count}", i, readers, existing, fresh, inplace)
        if not any(b.role in ("out", "inout") for b in kernel.spec.buffers):
            continue  # its results are overwritten before anything reads them (`v.fill_(0)`)
        existing.update(b.name for b in kernel.spec.buffers)
        twin = keys.twin(kernel.spec)
        if twin is None:
            count += 1
        else:
            kernel = replace(kernel, spec=replace(kernel.spec, name=twin))
        out.append(kernel)
    return Planned(out)


def _plan_group(
    graph: IRGraph,
    group: Group,
    name: str,
    pos: int,
    readers: dict[str, set[int]],
    existing: set[str],
    fresh: set[str],
    inplace_ok: bool,
) -> KernelPlan:
    """The plan of one group; `inplace_ok`: an output may take a dying input's storage."""
    written = list(dict.fromkeys(b for m in group.members for b in m.node.outputs))
    external = {
        b for b in written if readers.get(b, set()) - {pos} or graph.buffers[b].kind != "computed"
    }
    renames: dict[str, str] = {}
    copies: list[tuple[str, Any]] = []
    for m in group.members:
        for buf, acc in m.node.accumulators.items():
            renames[buf] = acc
            if buf in external:
                copies.append((buf, (acc, graph.buffers[buf].layout, m.x)))
    removed = {b for b in written if b not in external and b not in renames}
    candidates = (set(written) - removed - set(renames)) | {buf for buf, _ in copies}
    inplace = (
        _inplace(graph, group, pos, readers, candidates, existing, copies, fresh)
        if inplace_ok else {}
    )
    kernel_stages = stages(group, renames | inplace, removed, copies)
    buffers = _buffers(graph, group, renames, removed, copies, existing, inplace)
    ranges = group.outer or (sympy.Integer(1),)
    spec = KernelSpec(
        name=name,
        ranges=ranges,
        reduction_ranges=group.red,
        stages=kernel_stages,
        buffers=buffers,
        size_args=_size_args(group, ranges, buffers),
        device=_device(graph, buffers),
    )
    outputs = tuple(b.name for b in buffers if b.role == "out")
    reads = tuple(b.name for b in buffers if b.role in ("in", "inout"))
    reuses = tuple((out, dying) for dying, out in inplace.items())
    return KernelPlan(spec, outputs, reads, reuses)


def _inplace(
    graph: IRGraph,
    group: Group,
    pos: int,
    readers: dict[str, set[int]],
    outputs: set[str],
    existing: set[str],
    copies: list[tuple[str, Any]],
    fresh: set[str],
) -> dict[str, str]:
    """Dying input -> output that takes over its storage (ARCHITECTURE.md §3, issue 4).

    For an input computed by an earlier kernel of this graph or returned new by a library call
    (`fresh`: never a graph input or output, a viewed buffer, or what an aliasing or mutating
    library call returned), read only by this kernel, only at the very index the output
    is stored at, with the output's exact layout, and never after the output's first store (a
    later load would see the output's data). Pointwise and reduction kernels alike: a reduction's
    epilogue (`inner` or `outer` stage) or its result (copied out after every stage) may take the
    storage, since each outer point touches only its own elements and stages run in order.
    Scan and sort kernels are left alone.
    """
    if any(m.kind in ("scan", "sort") or m.replicated for m in group.members):
        return {}  # a prologue loads its inputs again after its own stores
    written = {n for m in group.members for n in m.node.outputs}  # kernel-internal, never dying
    stored, first_store = _access_at(group, "stores")
    loaded, last_load = _access_at(group, "loads")
    end = len(group.members)  # the copy stage runs after every member
    for buf, (_, layout, coords) in copies:
        stored.setdefault(buf, set()).add(expanded(layout.index(coords)))
        first_store.setdefault(buf, end)
    pairs: dict[str, str] = {}
    for out in sorted(outputs):
        at = stored.get(out, set())
        if out in existing or len(at) != 1 or graph.buffers[out].kind != "computed":
            continue
        for dying in loaded:
            info = graph.buffers.get(dying)
            ok = (
                info is not None
                and (info.kind == "computed" or dying in fresh)
                and dying not in written
                and dying not in pairs
                and readers.get(dying) == {pos}
                and info.layout == graph.buffers[out].layout
                and loaded[dying] == at
                and last_load[dying] <= first_store[out]
            )
            if ok:
                pairs[dying] = out
                break
    return pairs


def _fresh_extern_results(items: Sequence[Item]) -> set[str]:
    """Buffers bound to a library call's single result that is a new tensor (the softmax
    gradient can then be written over the `bmm` result it reads, not into fresh memory)."""
    return {
        name
        for item in items
        if isinstance(item, ExternNode) and not item.tuple_result and returns_new(item.op)
        for name in item.outputs
    }


# memo of a pure function of the op's schema (fixed in the process): not process state
@functools.cache
def returns_new(op: str) -> bool:
    """Whether aten overload `op` (e.g. "aten.bmm.default") returns new tensors: its schema
    mutates nothing and no result aliases an argument. Unknown ops: False."""
    try:
        schema = resolve_op(op)._schema
    except (AttributeError, RuntimeError):
        return False
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


def _access_at(group: Group, kind: str) -> tuple[dict[str, set[Any]], dict[str, int]]:
    """Per buffer: the indices `group` loads / stores it at, and the member that does so
    (the last loading member for loads, the first storing one for stores), in load order."""
    at: dict[str, set[Any]] = {}
    where: dict[str, int] = {}
    for i, m in enumerate(group.members):
        for name, index in getattr(m.access, kind):
            at.setdefault(name, set()).add(expanded(index))
            if kind == "loads" or name not in where:
                where[name] = i
    return at, where


def _device(graph: IRGraph, buffers: Sequence[KernelBuffer]) -> str:
    for b in buffers:
        if b.name in graph.buffers:
            return graph.buffers[b.name].layout.device
    return "cpu"


def _buffers(
    graph: IRGraph,
    group: Group,
    renames: dict[str, str],
    removed: set[str],
    copies: list[tuple[str, Any]],
    existing: set[str],
    inplace: dict[str, str],
) -> tuple[KernelBuffer, ...]:
    loads: list[str] = []
    stores: list[str] = []
    for m in group.members:
        for n, _ in m.access.loads:
            # A load of what an earlier member stored reads this kernel's own output: it
            # neither makes the buffer an input nor `inout` (which needs it allocated before).
            if n in renames or n in removed or (n in stores and n not in existing):
                continue
            n = inplace.get(n, n)  # a dying input is read through the output taking its place
            if n not in loads:
                loads.append(n)
        for n, _ in m.access.stores:
            if n not in removed and n not in stores:
                stores.append(n)
    stores.extend(buf for buf, _ in copies if buf not in stores)
    order = loads + [n for n in stores if n not in loads]
    result: list[KernelBuffer] = []
    for n in order:
        layout = graph.buffers[n].layout
        # a buffer written earlier (a scatter's copy, a graph input) keeps its data: inout
        updated = n in stores and (n in loads or n in existing)
        role: Role = "inout" if updated else ("in" if n in loads else "out")
        result.append(KernelBuffer(n, layout.dtype, role, layout.extent()))
    for m in group.members:
        for buf, acc in m.node.accumulators.items():
            dtype = m.node.acc_dtypes.get(buf, graph.buffers[buf].layout.dtype)
            result.append(KernelBuffer(acc, dtype, "local", product(list(group.outer))))
    return tuple(result)


def _size_args(
    group: Group, ranges: Sequence[Any], buffers: Sequence[KernelBuffer]
) -> tuple[sympy.Symbol, ...]:
    exprs: list[Any] = [*ranges, *group.red, *(b.numel for b in buffers)]
    for m in group.members:
        exprs.extend(idx for _, idx in m.access.loads)
        exprs.extend(idx for _, idx in m.access.stores)
        exprs.extend(m.access.exprs)
    symbols: set[sympy.Symbol] = set()
    for e in exprs:
        if not isinstance(e, sympy.Basic):
            e = sympy.sympify(e)
        symbols |= free_symbols(e)
    keep = [s for s in symbols if not symbol_text(s).startswith(_INDEX_PREFIXES)]
    return tuple(sorted(keep, key=symbol_text))
