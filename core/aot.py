"""AOT packages: a `torch.export` program compiled into one file that loads with no compiler.

`compile_and_package(exported, path)` compiles the program as `polyduct.compile` does and writes
one file (`package_format.py`) holding the Python wrapper module, every kernel backend's compiled
files (`KernelBackend.package`: the C++ shared library and launcher extension for cpp), the
program's parameters, buffers and constants, and a manifest with the SHA-256 of each member.
`load_package(path)` checks the package and returns an `AotProgram` taking the exported program's
user inputs (positional and keyword, as at export) and returning its outputs in their structure.
Loading needs torch and the installed polyduct plugins: no compiler, no Dynamo, no network.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, final

import torch
from torch.utils import _pytree as pytree

from polyduct import plugins as plugin_mod
from polyduct.cache import import_module_file
from polyduct.environment import snapshot
from polyduct.errors import InvalidOption, PackageError
from polyduct.kernel import KernelFn, KernelSource
from polyduct.package_format import read_package, runtime_facts, write_package
from polyduct.wrapper import KernelLoader
from polyduct.wrapper.ir import KernelDefinition

WRAPPER: Final = "wrapper.py"
TENSORS: Final = "tensors.pt"
KERNELS: Final = "kernels"
USER: Final = ""  # an input slot filled by the next user input (else: a stored tensor's name)


def compile_and_package(
    exported: torch.export.ExportedProgram,
    path: str | Path,
    options: Mapping[str, Any] | None = None,
) -> Path:
    """Compile `exported` and write its package to `path` (replaced atomically); returns it."""
    from polyduct import compile as compile_exported
    from polyduct.frontend.options import FrontendOptions

    opts = FrontendOptions.from_mapping(options)
    if opts.wrapper != "python":
        raise InvalidOption("polyduct.aot", "wrapper", opts.wrapper, "python (packaged wrapper)")
    compiled = compile_exported(exported, options).compiled  # type: ignore[attr-defined]
    if any(isinstance(a, torch.nn.Module) for a in compiled.attrs):
        raise InvalidOption(
            "polyduct.aot", "exported", "a higher-order op (torch.cond, flex_attention, ...)",
            "programs without subgraphs (they run in eager, and a package holds no Python code)",
        )
    signature, stored = _signature(exported)
    _run_once(compiled, exported, signature["inputs"], stored)
    members = {WRAPPER: compiled.source.encode()}
    backends = _package_kernels(list(compiled.sources.values()), opts, members)
    blob = io.BytesIO()
    torch.save({"stored": stored, "attrs": list(compiled.attrs)}, blob)
    members[TENSORS] = blob.getvalue()
    program = {
        "signature": signature,
        "constant_outputs": {str(k): v for k, v in compiled.constant_outputs.items()},
        "output_count": compiled.output_count,
        "kernel_backends": backends,
        "devices": sorted(_devices(exported)),
    }
    return write_package(Path(path), program, members)


def _run_once(
    compiled: Any, ep: torch.export.ExportedProgram, inputs: Sequence[str], stored: Any
) -> None:
    """Call the compiled graph once on copies of the exported example inputs and stored tensors
    (nothing changes): a kernel backend that compiles and tunes at a kernel's first launch
    (Triton) packages what that launch chose. Without example inputs the program is not run."""
    example = getattr(ep, "example_inputs", None)
    if example is None:
        return
    args, kwargs = example
    names = list(ep.call_spec.in_spec.child(1).context or [])
    user = iter(pytree.tree_leaves((tuple(args), {k: kwargs[k] for k in names})))
    graph_args = [_copy(next(user)) if n == USER else stored[n].clone() for n in inputs]
    compiled(*graph_args)


def _copy(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _package_kernels(
    sources: Sequence[KernelSource], opts: Any, members: dict[str, bytes]
) -> dict[str, dict[str, Any]]:
    """Each kernel backend's compiled files, into `members`; backend name -> its options and
    the distribution it comes from (the only plugins a load imports)."""
    plugins = plugin_mod.load()
    by_backend: dict[str, list[KernelSource]] = {}
    for src in sources:
        by_backend.setdefault(src.backend, []).append(src)
    used: dict[str, dict[str, Any]] = {}
    for name, group in sorted(by_backend.items()):
        # kernel_options belong to the program's kernel backend (pipeline.Compilation.kernel_options)
        chosen = name == opts.kernels or (opts.kernels == "auto" and len(by_backend) == 1)
        backend_opts = dict(opts.kernel_options) if chosen else {}
        files = plugins.kernel_backend(name, backend_opts).package(group)
        for rel, data in files.items():
            members[f"{KERNELS}/{name}/{rel}"] = data
        origin = plugins.kernel_backends.origin(name)
        used[name] = {"options": _plain(backend_opts), "distribution": origin.distribution}
    return used


def _plain(options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-representable options (objects such as a `Cache` are left to their defaults)."""
    kept = {}
    for key, value in options.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        kept[key] = value
    return kept


def _signature(ep: torch.export.ExportedProgram) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """How user inputs and stored tensors fill the graph's inputs, and which outputs are the
    user's and which write back mutated buffers or inputs (as `polyduct.compile` runs it)."""
    from torch.export.graph_signature import InputKind, OutputKind

    # The functional form's signature (mutations as outputs), as `polyduct.compile` compiles it:
    # decompositions change the ops, never the signature, so none are asked for.
    sig = ep.run_decompositions({}).graph_signature
    inputs, stored = [], {}
    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(USER)
            continue
        value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
        if not isinstance(value, torch.Tensor):
            raise InvalidOption("polyduct.aot", "exported", spec.target, "tensor constants only")
        inputs.append(str(spec.target))
        stored[str(spec.target)] = value.detach()
    user_names = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    outs = sig.output_specs
    signature = {
        "inputs": inputs,
        "buffer_mutations": [
            [i, sig.buffers_to_mutate[s.arg.name]]
            for i, s in enumerate(outs)
            if s.kind == OutputKind.BUFFER_MUTATION
        ],
        "input_mutations": [
            [i, user_names.index(sig.user_inputs_to_mutate[s.arg.name])]
            for i, s in enumerate(outs)
            if s.kind == OutputKind.USER_INPUT_MUTATION
        ],
        "user_outputs": [i for i, s in enumerate(outs) if s.kind == OutputKind.USER_OUTPUT],
        "in_spec": pytree.treespec_dumps(ep.call_spec.in_spec),
        "out_spec": pytree.treespec_dumps(ep.call_spec.out_spec),
    }
    return signature, stored


def _devices(ep: torch.export.ExportedProgram) -> set[str]:
    found = {
        str(t.device.type)
        for t in [*ep.state_dict.values(), *ep.constants.values()]
        if isinstance(t, torch.Tensor)
    }
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" and isinstance(val, torch.Tensor):
            found.add(val.device.type)
    return found


@final
class AotProgram:
    """A loaded AOT package: call it with the exported program's user inputs."""

    def __init__(self, path: Path, manifest: Mapping[str, Any], call: Any, tensors: Any) -> None:
        self.path, self.manifest = path, manifest
        program = manifest["program"]
        sig = program["signature"]
        self._call = call
        self._stored: dict[str, torch.Tensor] = tensors["stored"]
        self._attrs: tuple[torch.Tensor, ...] = tuple(tensors["attrs"])
        self._inputs: list[str] = sig["inputs"]
        self._buffer_mutations = [(int(i), str(n)) for i, n in sig["buffer_mutations"]]
        self._input_mutations = [(int(i), int(p)) for i, p in sig["input_mutations"]]
        self._user_outputs: list[int] = sig["user_outputs"]
        self._in_spec = pytree.treespec_loads(sig["in_spec"])
        self._out_spec = pytree.treespec_loads(sig["out_spec"])
        self._constants = {int(k): v for k, v in program["constant_outputs"].items()}
        self._output_count: int = program["output_count"]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self._flatten(args, kwargs)
        it = iter(flat)
        graph_args = [next(it) if n == USER else self._stored[n] for n in self._inputs]
        outs = list(self._call(*graph_args, *self._attrs))
        if self._constants:
            slots = iter(outs)
            outs = [
                self._constants[i] if i in self._constants else next(slots)
                for i in range(self._output_count)
            ]
        for i, name in self._buffer_mutations:
            self._stored[name].copy_(outs[i])
        for i, pos in self._input_mutations:
            flat[pos].copy_(outs[i])
        return pytree.tree_unflatten([outs[i] for i in self._user_outputs], self._out_spec)

    def _flatten(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        """The user inputs in the order of the exported graph; kwargs in any order."""
        kw_spec = self._in_spec.child(1)
        names = list(kw_spec.context or [])
        if set(kwargs) != set(names):
            raise TypeError(
                f"{self.path}: expected keyword arguments {names}, got {sorted(kwargs)}"
            )
        flat, spec = pytree.tree_flatten((tuple(args), {k: kwargs[k] for k in names}))
        if spec != self._in_spec:
            raise TypeError(
                f"{self.path}: inputs are structured as {spec}, expected {self._in_spec}"
            )
        return flat


def load_package(path: str | Path) -> AotProgram:
    """The program in the package at `path`; `PackageError` names what is wrong with it."""
    path = Path(path)
    manifest, members = read_package(path, runtime_facts())
    program = manifest["program"]
    if "cuda" in program["devices"] and not torch.cuda.is_available():
        raise PackageError(path, "made for CUDA devices, and CUDA is not available here")
    tensors = torch.load(io.BytesIO(members[TENSORS]), weights_only=True)
    workdir = Path(tempfile.mkdtemp(prefix="polyduct-aot-"))
    try:
        for name, data in members.items():
            target = workdir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        digest = manifest["files"][WRAPPER][:24]
        module = import_module_file(workdir / WRAPPER, f"polyduct_aot_{digest}")
        loader = _packaged_loader(program["kernel_backends"], workdir / KERNELS)
        call = module.make_call(loader)
    except PackageError as e:  # a kernel backend's refusal, for the package as a whole
        raise PackageError(path, f"{e.path}: {e.reason}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # loaded libraries stay mapped
    return AotProgram(path, manifest, call, tensors)


def _packaged_loader(backends: Mapping[str, Mapping[str, Any]], root: Path) -> KernelLoader:
    """Kernel definitions -> callables, from each backend's packaged files under `root`."""
    strict = plugin_mod.PluginOptions.from_env().strict
    only = frozenset(str(b["distribution"]) for b in backends.values())
    plugins = plugin_mod.load(plugin_mod.PluginOptions(strict=strict, only=only))
    env = snapshot()  # loading a package is an entry: backends' declared variables are read here

    def load_kernels(defs: Sequence[KernelDefinition]) -> dict[str, KernelFn]:
        loaded: dict[str, KernelFn] = {}
        for name in sorted({d.backend for d in defs}):
            options = {**plugins.environment_options(name, env), **backends[name]["options"]}
            backend = plugins.kernel_backend(name, options)
            group = [KernelSource(d.name, d.backend, d.source) for d in defs if d.backend == name]
            loaded.update(backend.load_packaged(group, root / name))
        return loaded

    return load_kernels
