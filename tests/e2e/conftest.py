"""e2e suite options: which kernel / wrapper backends to run (all installed by default)."""

from __future__ import annotations

import os

import pytest

from polyduct import plugins


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyduct-e2e")
    group.addoption("--polyduct-e2e-kernels", action="append", default=[], help="kernel backend(s)")
    group.addoption(
        "--polyduct-e2e-wrapper", action="append", default=[], help="wrapper backend(s)"
    )


def _names(config: pytest.Config, option: str, env: str, default: list[str]) -> list[str]:
    names = config.getoption(option, default=None) or []
    if not names and os.environ.get(env):
        names = [n.strip() for n in os.environ[env].split(",") if n.strip()]
    return names or default


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernels" in metafunc.fixturenames:
        names = _names(
            metafunc.config, "--polyduct-e2e-kernels", "POLYDUCT_TEST_KERNELS", ["reference"]
        )
        metafunc.parametrize("kernels", names, scope="module")
    if "wrapper" in metafunc.fixturenames:
        names = _names(
            metafunc.config, "--polyduct-e2e-wrapper", "POLYDUCT_TEST_WRAPPER", ["python"]
        )
        metafunc.parametrize("wrapper", names, scope="module")


@pytest.fixture
def backends(kernels: str, wrapper: str) -> tuple[str, str]:
    installed = plugins.load()
    for registry, name in (
        (installed.kernel_backends, kernels),
        (installed.wrapper_backends, wrapper),
    ):
        if name not in registry.names():
            pytest.skip(f"{name!r} is not installed")
    return kernels, wrapper
