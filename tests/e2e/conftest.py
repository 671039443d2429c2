"""e2e suite options: kernel / wrapper backends to run, and the device inputs and modules live on.

`--polyduct-e2e-kernels` / `POLYDUCT_TEST_KERNELS` (default `reference`), `--polyduct-e2e-wrapper`
/ `POLYDUCT_TEST_WRAPPER` (default `python`), `--polyduct-e2e-device` / `POLYDUCT_TEST_DEVICE`
(default `cpu`; `cuda` or `cuda:N` runs every test on CUDA tensors: tests take the `device`
fixture and build their inputs and modules there, and the few that cannot run on CUDA skip with a
reason through `skip_on_cuda`).
"""

from __future__ import annotations

import os

import pytest
import torch

from polyduct import plugins

from . import helpers

DEVICE_ENV = "POLYDUCT_TEST_DEVICE"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyduct-e2e")
    group.addoption("--polyduct-e2e-kernels", action="append", default=[], help="kernel backend(s)")
    group.addoption(
        "--polyduct-e2e-wrapper", action="append", default=[], help="wrapper backend(s)"
    )
    group.addoption(
        "--polyduct-e2e-device",
        default=None,
        help=f"device of every input and module: cpu (default) or cuda[:N]; env {DEVICE_ENV}",
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


def pytest_configure(config: pytest.Config) -> None:
    # a bad device name stops the run at once, not in every test
    device = torch.device(suite_device(config))
    if device.type == "cuda" and device.index is not None:
        # buffers the compiled code allocates name the device type only: make it the current one
        torch.cuda.set_device(device)
    helpers.SUITE_DEVICE = str(device)


def suite_device(config: pytest.Config) -> str:
    """The device the suite runs on: option, then environment, then `cpu`."""
    name = config.getoption("--polyduct-e2e-device", None) or os.environ.get(DEVICE_ENV) or "cpu"
    try:
        kind = torch.device(name).type
    except RuntimeError:
        kind = ""
    if kind not in ("cpu", "cuda"):
        raise pytest.UsageError(f"--polyduct-e2e-device={name!r}: expected cpu or cuda[:N]")
    if kind == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--polyduct-e2e-device={name!r} but torch sees no CUDA device")
    return name


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """Where a test builds its inputs and modules (`torch.device` string)."""
    return suite_device(pytestconfig)
