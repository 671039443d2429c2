"""Every distribution declares what its code imports, and ships its metadata and license."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "pyproject.toml": "core",
    "plugins/cpp/pyproject.toml": "plugins/cpp/polyduct_cpp",
    "plugins/fx/pyproject.toml": "plugins/fx/polyduct_fx",
    "plugins/halide/pyproject.toml": "plugins/halide/polyduct_halide",
    "plugins/triton/pyproject.toml": "plugins/triton/polyduct_triton",
}
OPTIONAL = {"pytest"}  # the conformance suite's pytest plugin: loaded only by pytest itself


def _toml(path: Path) -> dict:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib needs Python 3.11")
    import tomllib

    return tomllib.loads(path.read_text())


def _imports(package: Path) -> set[str]:
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")


@pytest.mark.parametrize("pyproject", sorted(PACKAGES))
def test_every_import_is_declared_with_a_range(pyproject: str) -> None:
    project = _toml(ROOT / pyproject)["project"]
    extras = [r for group in project.get("optional-dependencies", {}).values() for r in group]
    declared = {_name(r): r for r in [*project["dependencies"], *extras]}
    package = ROOT / PACKAGES[pyproject]
    own = {package.name, "polyduct"}
    missing = sorted(_imports(package) - own - OPTIONAL - set(declared))
    assert not missing, f"{pyproject}: imported but not declared: {missing}"
    unbounded = [r for r in declared.values() if not re.search(r"[<>=]", r)]
    assert not unbounded, f"{pyproject}: dependencies without a version range: {unbounded}"


@pytest.mark.parametrize("pyproject", sorted(PACKAGES))
def test_metadata_for_a_package_index(pyproject: str) -> None:
    project = _toml(ROOT / pyproject)["project"]
    assert project["license"] == {"text": "BSD-3-Clause"}
    assert (ROOT / pyproject).parent.joinpath(project["readme"]).is_file()
    assert any(c.startswith("License :: OSI Approved") for c in project["classifiers"])
    assert {"Homepage", "Source", "Documentation"} <= set(project["urls"])


def test_license_and_one_plugin_layout() -> None:
    assert "BSD 3-Clause License" in (ROOT / "LICENSE").read_text()
    assert "The polyduct authors" in (ROOT / "LICENSE").read_text()
    for plugin in sorted((ROOT / "plugins").iterdir()):
        package = plugin / f"polyduct_{plugin.name}"
        assert (package / "__init__.py").is_file(), f"{plugin}: not in the flat layout"
        assert (package / "py.typed").is_file()
