"""`polyduct.compile(exported)`: the torch.export entry. One `Compilation` (polyduct.pipeline)
for the program; its graph runs through the pipeline's passes; the result takes the user inputs
(lifted parameters, buffers and constants are passed for the caller) and writes mutated buffers
and inputs back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from polyduct.frontend.export_guards import SizeConditions, shape_env_of
from polyduct.pipeline import Compilation


def compile_exported(
    exported: torch.export.ExportedProgram, options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """Compile a `torch.export` program; the result takes the user inputs and returns outputs."""
    compilation = Compilation.create(options)
    # ops a scoped override keeps whole are not decomposed (as under torch.compile)
    ep = exported.run_decompositions(compilation.decompositions())
    sig = ep.graph_signature
    lifted: list[Any] = []
    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            lifted.append(None)
        elif spec.target in ep.state_dict:
            lifted.append(ep.state_dict[spec.target])
        else:
            lifted.append(ep.constants[spec.target])
    compiled = compilation.compile_graph(ep.graph_module)
    mutated = [
        (i, sig.buffers_to_mutate[spec.arg.name])
        for i, spec in enumerate(sig.output_specs)
        if spec.kind == OutputKind.BUFFER_MUTATION
    ]
    user_names = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    inputs_mutated = [
        (i, user_names.index(sig.user_inputs_to_mutate[spec.arg.name]))
        for i, spec in enumerate(sig.output_specs)
        if spec.kind == OutputKind.USER_INPUT_MUTATION
    ]
    user_out = [i for i, spec in enumerate(sig.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
    in_spec, out_spec = exported.call_spec.in_spec, exported.call_spec.out_spec
    specialised = _specialised_inputs(ep, user_names)
    conditions = SizeConditions(shape_env_of(ep.graph), ep.graph, user_names)

    def run(*args: Any, **kwargs: Any) -> Any:
        user_inputs = _flat_inputs(in_spec, args, kwargs)
        for pos, want in specialised.items():
            if user_inputs[pos] != want:
                raise ValueError(
                    f"user input {pos} ({user_names[pos]!r}) was {want!r} when exported, and the "
                    f"program is specialised to it; got {user_inputs[pos]!r}"
                )
        conditions.check(user_inputs)
        it = iter(user_inputs)
        outs = compiled(*[next(it) if v is None else v for v in lifted])
        for i, target in mutated:
            ep.state_dict[target].copy_(outs[i])
        for i, pos in inputs_mutated:  # x.add_(y) on a user input: write the result back
            user_inputs[pos].copy_(outs[i])
        results = [outs[i] for i in user_out]
        if out_spec is not None:
            return pytree.tree_unflatten(results, out_spec)
        return results[0] if len(results) == 1 else tuple(results)

    run.compiled = compiled  # type: ignore[attr-defined]
    return run


def _specialised_inputs(ep: torch.export.ExportedProgram, user_names: list[str]) -> dict[int, Any]:
    """Positions and values of the user inputs that were plain Python values when exported (a
    flag such as `interpolate_pos_encoding=True`): the graph does not read them."""
    vals = {n.name: n.meta.get("val") for n in ep.graph_module.graph.find_nodes(op="placeholder")}
    symbolic = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)
    return {
        pos: vals[name]
        for pos, name in enumerate(user_names)
        if name in vals and not isinstance(vals[name], symbolic)
    }


def _flat_inputs(in_spec: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The user inputs of an exported program, flattened as it was exported: called with the
    positional and keyword arguments `torch.export` saw (keywords in any order)."""
    if in_spec is None:
        if kwargs:
            raise TypeError(
                f"this exported program takes no keyword arguments, got {sorted(kwargs)}"
            )
        return list(args)
    want_args, want_kwargs = pytree.tree_unflatten(list(range(in_spec.num_leaves)), in_spec)
    if set(kwargs) != set(want_kwargs) or len(args) != len(want_args):
        raise TypeError(
            f"the exported program takes {len(want_args)} positional and keyword arguments "
            f"{sorted(want_kwargs)}; got {len(args)} positional and {sorted(kwargs)}"
        )
    flat, spec = pytree.tree_flatten((tuple(args), {k: kwargs[k] for k in want_kwargs}))
    if spec != in_spec:
        raise TypeError(f"inputs are not structured as the exported program's: {spec} != {in_spec}")
    return flat
