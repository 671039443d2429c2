"""Only polyduct_triton/triton_shim.py touches Triton's undocumented attributes, and the shim
keys a kernel only where Triton has not keyed it yet."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from polyduct_triton import triton_shim

PACKAGE = Path(triton_shim.__file__).parent
SHIMMED = {"hash", "_cubin_path"}  # JITFunction.hash, CompiledKernel._cubin_path


def _touches(path: Path) -> list[str]:
    """`file:line attribute` of each use of a shimmed attribute (any context) in `path`, and of
    each `setattr` call."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        name = None
        if isinstance(node, ast.Attribute) and node.attr in SHIMMED:
            name = node.attr
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
            name = "setattr"
        if name is not None:
            found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_only_the_shim_touches_tritons_private_attributes() -> None:
    others = [p for p in sorted(PACKAGE.glob("*.py")) if p.name != "triton_shim.py"]
    assert len(others) > 10
    assert [hit for p in others for hit in _touches(p)] == []
    assert _touches(PACKAGE / "triton_shim.py")  # the check sees what it looks for


def test_the_shim_keys_a_kernel_once_and_records_cubins() -> None:
    kernel = SimpleNamespace(hash=None)
    assert triton_shim.set_source_key(kernel, "abc") == triton_shim.SUPPORTED
    if triton_shim.SUPPORTED:
        assert kernel.hash == "abc"
        assert not triton_shim.set_source_key(kernel, "other") and kernel.hash == "abc"
    assert not triton_shim.set_source_key(SimpleNamespace(), "abc")  # no such attribute
    compiled = SimpleNamespace()
    triton_shim.set_cubin_path(compiled, "/c/k.cubin")
    assert triton_shim.cubin_path(compiled) == "/c/k.cubin"
