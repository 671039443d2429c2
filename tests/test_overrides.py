"""Scoped overrides (docs/overrides.md) through torch.compile: per-op kernel backends, externs,
fusion barriers, user lowerings, per-graph backends, validation and cache keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from polyduct import plugins as plugin_mod
from polyduct.errors import UnknownName
from polyduct.frontend.options import FrontendOptions
from polyduct.kernel_choice import kernel_contents
from polyduct.lowering.table import core_lowerings
from polyduct.overrides import GraphOverride, OpOverride, Scope, scope_from_set
from polyduct.pipeline import CompiledGraph
from polyduct.wrapper.ir import ExternCall

WRAPPERS = ("python", "fx")


def _compile(
    fn: Callable[..., Any], scope: Scope | None, wrapper: str = "python"
) -> tuple[Callable[..., Any], list[CompiledGraph]]:
    torch._dynamo.reset()
    graphs: list[CompiledGraph] = []
    opts: dict[str, Any] = {"kernels": "reference", "wrapper": wrapper, "observer": graphs.append}
    if scope is not None:
        opts["overrides"] = scope
    return torch.compile(fn, backend="polyduct", options=opts), graphs


def _model(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * 2, dim=-1) + torch.sin(x).relu()


def _inputs() -> torch.Tensor:
    x = torch.randn(6, 33)
    x[0, 0], x[1, 3], x[2, 5] = float("inf"), float("-inf"), -0.0
    x[3, 1] = float("nan")
    return x


def _backends(graph: CompiledGraph) -> dict[str, str]:
    return {name: src.backend for name, src in graph.sources.items()}


def _externs(graph: CompiledGraph) -> list[str]:
    return [line.op for line in graph.program.lines if isinstance(line, ExternCall)]


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_softmax_on_another_backend_only_in_scope(wrapper: str) -> None:
    x = _inputs()
    plain, plain_graphs = _compile(_model, None, wrapper)
    torch.testing.assert_close(plain(x), _model(x), equal_nan=True)
    scope = Scope(ops=(OpOverride("aten._softmax", kernels="cpp"),))
    scoped, scoped_graphs = _compile(_model, scope, wrapper)
    torch.testing.assert_close(scoped(x), _model(x), equal_nan=True)
    assert set(_backends(plain_graphs[0]).values()) == {"reference"}
    backends = _backends(scoped_graphs[0])
    assert "cpp" in backends.values()
    for spec in scoped_graphs[0].specs:  # exactly the kernels computing softmax moved
        origins, _ = kernel_contents(spec)
        assert (backends[spec.name] == "cpp") == ("aten._softmax.default" in origins)
    plain_code = [s.source for s in plain_graphs[0].sources.values()]
    scoped_code = [s.source for s in scoped_graphs[0].sources.values()]
    assert plain_code != scoped_code


def test_global_registry_unchanged_after_scoped_compile() -> None:
    plugins = plugin_mod.load()
    before = (
        plugins.kernel_backends.names(),
        plugins.wrapper_backends.names(),
        plugins.lowerings.names(),
        plugins.override_sets.names(),
        sorted(core_lowerings()),
    )
    scope = Scope(
        ops=(
            OpOverride("aten._softmax", kernels="cpp"),
            OpOverride("aten.sin", lowering=core_lowerings()["aten.cos.default"]),
        )
    )
    scoped, _ = _compile(_model, scope)
    scoped(_inputs())
    after = (
        plugins.kernel_backends.names(),
        plugins.wrapper_backends.names(),
        plugins.lowerings.names(),
        plugins.override_sets.names(),
        sorted(core_lowerings()),
    )
    assert before == after
    plain, graphs = _compile(_model, None)  # a later unscoped compile is unaffected
    x = _inputs()
    torch.testing.assert_close(plain(x), _model(x), equal_nan=True)
    assert set(_backends(graphs[0]).values()) == {"reference"}


@pytest.mark.parametrize("key", ["backward", 1])
def test_graph_override_applies_to_backward_only(key: str | int) -> None:
    scope = Scope(graphs=(GraphOverride(key, kernels="cpp", wrapper="fx"),))
    compiled, graphs = _compile(_model, scope)
    x = torch.randn(6, 33, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = compiled(x)
    out.sum().backward()
    ref = _model(x_ref)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, x_ref.grad)
    names = [(g.graph_name, g.graph_index) for g in graphs]
    assert names == [("forward", 0), ("backward", 1)]
    assert set(_backends(graphs[0]).values()) == {"reference"}
    assert set(_backends(graphs[1]).values()) == {"cpp"}
    assert "polyduct_fx" not in graphs[0].source
    assert graphs[1].source != graphs[0].source


def test_per_graph_scope_op_override() -> None:
    scope = Scope(per_graph={"backward": Scope(ops=(OpOverride("exp", kernels="cpp"),))})
    compiled, graphs = _compile(_model, scope)
    x = torch.randn(4, 9, requires_grad=True)
    compiled(x).sum().backward()
    assert set(_backends(graphs[0]).values()) == {"reference"}
    for spec in graphs[1].specs:
        _, ops = kernel_contents(spec)
        assert (_backends(graphs[1])[spec.name] == "cpp") == ("exp" in ops)


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_extern_aten(wrapper: str) -> None:
    compiled, graphs = _compile(
        _model, Scope(ops=(OpOverride("aten._softmax", extern=True),)), wrapper
    )
    x = _inputs()
    torch.testing.assert_close(compiled(x), _model(x), equal_nan=True)
    assert "aten._softmax.default" in _externs(graphs[0])
    assert "aten._softmax.default" in graphs[0].report.ops()


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_extern_user_function(wrapper: str) -> None:
    calls: list[tuple[int, ...]] = []

    def my_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
        calls.append(tuple(x.shape))
        shifted = x - x.amax(dim, keepdim=True)
        return shifted.exp() / shifted.exp().sum(dim, keepdim=True)

    scope = Scope(ops=(OpOverride("aten._softmax.default", extern=my_softmax),))
    compiled, graphs = _compile(_model, scope, wrapper)
    x = torch.randn(5, 17)
    torch.testing.assert_close(compiled(x), _model(x))
    assert calls and calls[-1] == (5, 17)
    externs = _externs(graphs[0])
    assert any(op.startswith("polyduct_scoped.softmax_default_") for op in externs), externs


def test_fuse_false_keeps_op_in_its_own_kernels() -> None:
    x = _inputs()
    plain, plain_graphs = _compile(_model, None)
    plain(x)
    scope = Scope(ops=(OpOverride("aten._softmax", fuse=False),))
    scoped, graphs = _compile(_model, scope)
    torch.testing.assert_close(scoped(x), _model(x), equal_nan=True)
    assert graphs[0].kernel_count > plain_graphs[0].kernel_count
    for spec in graphs[0].specs:  # no kernel mixes softmax with the sin/relu/add around it
        _, ops = kernel_contents(spec)
        assert not ({"sin", "relu"} & ops and "exp" in ops)


def test_user_lowering() -> None:
    cos = core_lowerings()["aten.cos.default"]
    used: list[str] = []

    def lowering(ctx: Any, x: Any) -> Any:
        used.append(ctx.node.name)
        return cos(ctx, x)

    scope = Scope(ops=(OpOverride("aten.sin.default", lowering=lowering),))
    compiled, _ = _compile(_model, scope)
    x = torch.randn(3, 8)
    want = torch.softmax(x * 2, dim=-1) + torch.cos(x).relu()
    torch.testing.assert_close(compiled(x), want)
    assert used


@pytest.mark.parametrize(
    ("scope", "needle"),
    [
        (Scope(ops=(OpOverride("aten.softmaxx", kernels="cpp"),)), "aten.softmax"),
        (Scope(ops=(OpOverride("expp", kernels="cpp"),)), "exp"),
        (Scope(ops=(OpOverride("aten._softmax", kernels="nope"),)), "reference"),
        (Scope(graphs=(GraphOverride("backwards", kernels="cpp"),)), "backward"),
        (Scope(graphs=(GraphOverride(0, wrapper="nope"),)), "python"),
        (Scope(ops=(OpOverride("aten.add.Tensorr", kernels="cpp"),)), "aten.add.Tensor"),
        (Scope(sets=("no-such-set",)), "override set"),
    ],
)
def test_unknown_names_rejected_at_compile_time(scope: Scope, needle: str) -> None:
    compiled, _ = _compile(_model, scope)
    with pytest.raises(Exception) as info:
        compiled(torch.randn(2, 3))
    error = info.value
    while not isinstance(error, UnknownName):  # dynamo wraps backend errors
        inner = getattr(error, "inner_exception", None) or error.__cause__
        if inner is None:
            break
        error = inner
    assert isinstance(error, UnknownName), info.value
    assert needle in str(error)


def test_scope_is_validated_and_part_of_cache_key() -> None:
    with pytest.raises(Exception, match="Scope"):
        FrontendOptions.from_mapping({"overrides": {"aten._softmax": "cpp"}})
    plain = FrontendOptions.from_mapping({}, environ={})
    a = FrontendOptions.from_mapping(
        {"overrides": Scope(ops=(OpOverride("aten._softmax", kernels="cpp"),))}, environ={}
    )
    b = FrontendOptions.from_mapping(
        {"overrides": Scope(ops=(OpOverride("aten._softmax", kernels="cpp"),))}, environ={}
    )
    assert a.cache_key() == b.cache_key() != plain.cache_key()


def test_scope_from_plugin_set() -> None:
    scope = scope_from_set(
        "demo",
        {
            "aten._softmax": "cpp",
            "exp": {"kernels": "reference"},
            "aten.sin": OpOverride("x", fuse=False),
            "graphs": (GraphOverride("backward", wrapper="fx"),),
        },
    )
    assert scope.ops == (
        OpOverride("aten._softmax", kernels="cpp"),
        OpOverride("exp", kernels="reference"),
        OpOverride("aten.sin", fuse=False),
    )
    assert scope.graphs == (GraphOverride("backward", wrapper="fx"),)
    with pytest.raises(TypeError, match="demo"):
        scope_from_set("demo", {"exp": 3})
