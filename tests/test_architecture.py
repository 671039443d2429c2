"""The core's shape: an acyclic import graph, no plugin named, every environment variable in one
documented table, and the pipeline's passes addressable by name."""

from __future__ import annotations

import ast
import importlib
import logging
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

from polyduct import environment
from polyduct.errors import InvalidOption
from polyduct.hookspecs import KernelBackendSpec
from polyduct.kernel_choice import KernelChoice
from polyduct.pipeline import PASS_NAMES, Compilation
from polyduct.plugins import Plugins
from polyduct.reference.backend import ReferenceBackend
from polyduct.registry import Origin

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
PLUGIN_NAMES = ("cpp", "triton", "halide", "fx")


def _modules() -> dict[str, Path]:
    """polyduct module name -> file, for every module of the core package (dir `core/`)."""
    found = {}
    for path in CORE.rglob("*.py"):
        parts = list(path.relative_to(CORE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(["polyduct", *parts])] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of import nodes under `if TYPE_CHECKING:` (never run, so never part of a cycle)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def _imports(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """Modules of the package that `name` imports anywhere (function bodies included)."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
    # importing `a.b.c` runs the `__init__` of `a.b` first (unless `name` is inside `a.b` itself)
    parents = {".".join(m.split(".")[:i]) for m in found for i in range(2, m.count(".") + 1)}
    parents = {p for p in parents if not name.startswith(f"{p}.")}
    return ((found | parents) & set(modules)) - {name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            child = next((e for e in edges if e not in index or e in stack), None)
            if child is not None and child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
                continue
            if child is not None:
                low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = stack[stack.index(node) :]
                del stack[stack.index(node) :]
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_core_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "polyduct.lowering.decompositions" in graph["polyduct.pipeline"]
    assert cycles(graph) == [], "import cycles in the core (break them, not with lazy imports)"


def test_the_packages_show_the_pipeline() -> None:
    """Lowering, scheduling and the wrapper each in their own package; the frontend holds the two
    entries; the modules they replaced are gone (no aliases)."""
    graph = import_graph()
    for package in ("frontend", "lowering", "scheduling", "wrapper"):
        assert (CORE / package / "__init__.py").is_file()
    entries = {m for m in graph if m.startswith("polyduct.frontend.")}
    assert {"polyduct.frontend.dynamo", "polyduct.frontend.export"} <= entries
    assert not any(m.startswith(("polyduct.lowering", "polyduct.scheduling")) for m in entries)
    for gone in ("frontend.lowering", "frontend.scheduler", "wrapper_ir", "python_wrapper"):
        assert f"polyduct.{gone}" not in graph
        with pytest.raises(ImportError):
            importlib.import_module(f"polyduct.{gone}")
    # data flows one way: lowering never reaches into scheduling or wrapper generation
    assert not any(m.startswith("polyduct.scheduling") for m in _reach(graph, "polyduct.lowering"))


def _reach(graph: Mapping[str, set[str]], prefix: str) -> set[str]:
    """Modules imported, directly or not, by the modules whose name starts with `prefix`."""
    todo = [m for m in graph if m.startswith(prefix)]
    seen: set[str] = set()
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def test_the_core_names_no_plugin() -> None:
    names = "|".join(PLUGIN_NAMES)
    pattern = re.compile(rf"[\"']({names})[\"']")
    hits = {
        str(path.relative_to(ROOT)): pattern.findall(path.read_text())
        for path in CORE.rglob("*.py")
        if pattern.search(path.read_text())
    }
    assert not hits, f"the core names a plugin: {hits}"


def _plugins(**defaults: Mapping[str, int]) -> Plugins:
    plugins = Plugins()
    for name, declared in defaults.items():
        spec = KernelBackendSpec(name, ReferenceBackend, lambda _: ReferenceBackend(), "", declared)
        plugins.kernel_backends.add(name, spec, Origin(f"dist-{name}", "1"))
    return plugins


def test_auto_takes_the_declared_default_of_highest_priority() -> None:
    choice = KernelChoice(_plugins(a={"cpu": 5}, b={"cpu": 9, "cuda": 1}, c={}), "auto")
    assert choice.defaults("cpu") == ["b", "a"]
    assert choice.defaults("cuda") == ["b"]
    gm = torch.fx.symbolic_trace(torch.nn.ReLU())
    assert choice.for_graph(gm) == "b"
    assert KernelChoice(choice.plugins, "c").for_graph(gm) == "c"
    with pytest.raises(InvalidOption, match="no installed kernel backend is a default for cpu"):
        KernelChoice(_plugins(c={}), "auto").for_graph(gm)


def _documented() -> set[str]:
    text = (ROOT / "docs" / "environment.md").read_text()
    return set(re.findall(r"^\| `(POLYDUCT_[A-Z0-9_]+)`", text, flags=re.MULTILINE))


def test_every_environment_variable_is_in_the_table() -> None:
    sources = [*CORE.rglob("*.py"), *ROOT.glob("plugins/*/polyduct_*/**/*.py")]
    used = {
        m for path in sources for m in re.findall(r"POLYDUCT_[A-Z0-9_]*[A-Z0-9]", path.read_text())
    }
    assert set(environment.VARIABLES) <= used
    assert used == _documented(), "docs/environment.md's table and the code name other variables"


def _environ_reads(path: Path) -> list[str]:
    """Names read from `os.environ` / `os.getenv` in one file (a module constant resolved)."""
    tree = ast.parse(path.read_text())
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    read: list[str] = []
    for node in ast.walk(tree):
        key = None
        if (
            isinstance(node, ast.Call)
            and node.args
            and ast.unparse(node.func) in ("os.environ.get", "os.getenv", "environ.get")
        ):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
        if isinstance(key, ast.Constant):
            read.append(str(key.value))
        elif isinstance(key, ast.Name):
            read.append(str(constants.get(key.id, key.id)))
    return read


def test_only_the_entry_reads_the_environment() -> None:
    readers = {
        str(path.relative_to(ROOT)): names
        for path in [*CORE.rglob("*.py"), *ROOT.glob("plugins/*/polyduct_*/**/*.py")]
        if (names := [n for n in _environ_reads(path) if n.startswith("POLYDUCT_")])
    }
    assert readers == {}, "read POLYDUCT_* variables through polyduct.environment, at the entry"
    assert _environ_reads(CORE / "environment.py") == ["name"]


def _relu(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x),)


def test_a_pass_is_dumped_and_timed_by_name(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(InvalidOption, match="dump_after.*one of choose_backends, lower"):
        Compilation.create({"dump_after": "lowr"}, environ={})
    compilation = Compilation.create({"kernels": "reference", "dump_after": "schedule"}, {})
    gm = torch.fx.experimental.proxy_tensor.make_fx(_relu)(torch.randn(3))
    with caplog.at_level(logging.INFO, logger="polyduct"):
        compilation.compile_graph(gm)
    assert "inference graph 0 after schedule:\nkernel0: pointwise over (3,)" in caplog.text
    assert "after lower" not in caplog.text
    assert re.search(r"passes " + ", ".join(rf"{n} [\d.]+ ms" for n in PASS_NAMES), caplog.text)


def test_every_pass_can_be_dumped(caplog: pytest.LogCaptureFixture) -> None:
    env = {"POLYDUCT_DUMP_AFTER": ",".join(PASS_NAMES), "POLYDUCT_KERNELS": "reference"}
    gm = torch.fx.experimental.proxy_tensor.make_fx(_relu)(torch.randn(3))
    with caplog.at_level(logging.INFO, logger="polyduct"):
        Compilation.create({}, env).compile_graph(gm)
    dumps = re.findall(r"inference graph 0 after (\w+):\n(.+)", caplog.text)
    assert [name for name, _ in dumps] == list(PASS_NAMES)
    assert dict(dumps)["choose_backends"] == "kernels reference, wrapper python"
    assert "def call(" in caplog.text  # the build pass: the Python wrapper's module


def test_a_backend_takes_the_variables_it_declares_from_the_entry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gm = torch.fx.experimental.proxy_tensor.make_fx(_relu)(torch.randn(3))
    env = {"POLYDUCT_DUMP": "1", "POLYDUCT_KERNELS": "reference"}  # the python wrapper's `dump`
    Compilation.create({}, env).compile_graph(gm)
    assert "python wrapper module at" in capsys.readouterr().err
    Compilation.create({"wrapper_options": {"dump": False}}, env).compile_graph(gm)
    assert "python wrapper module at" not in capsys.readouterr().err  # the option wins
    Compilation.create({}, {"POLYDUCT_KERNELS": "reference"}).compile_graph(gm)
    assert "python wrapper module at" not in capsys.readouterr().err
