"""The conformance suite as a pytest plugin: `pytest --polyduct-backend=NAME`.

It is active wherever polyduct is installed (a `pytest11` entry point); naming it as well, with
`pytest_plugins = ["polyduct.conformance.plugin"]` in a `conftest.py` or with
`pytest -p polyduct.conformance.plugin`, is harmless. Each op x dtype cell of each
selected backend becomes one test item (`conformance[backend-op-dtype]`), plus one static
completeness item per backend. A backend's whole suite runs once, batched, when its first item
runs; the items then report their cells, so pytest is as fast as `polyduct conformance`.
"""

from __future__ import annotations

from typing import Any

import pytest

from polyduct.conformance.backends import resolve_backend
from polyduct.conformance.cli import wrapper_findings
from polyduct.conformance.probe import dtype_name
from polyduct.conformance.report import failure_text
from polyduct.conformance.runner import BackendReport, Selection, all_probes, run_backend

_REPORTS = pytest.StashKey[dict[str, BackendReport]]()
_WRAPPERS = pytest.StashKey[dict[str, dict[str, str]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyduct", "polyduct conformance suite")
    group.addoption(
        "--polyduct-backend",
        action="append",
        default=[],
        help="kernel backend to run the conformance suite on ('all': every one)",
    )
    group.addoption(
        "--polyduct-wrapper",
        default="python",
        help="wrapper backend running the kernels ('none': direct load)",
    )
    group.addoption("--polyduct-device", default="cpu", help="device kernels and the oracle run on")
    group.addoption("--polyduct-ops", default=None, help="regex selecting op names")
    group.addoption("--polyduct-dtypes", default="", help="comma-separated dtype names")
    group.addoption("--polyduct-category", action="append", default=[], help="op category")


def _selection(config: pytest.Config) -> Selection:
    dtypes = tuple(d for d in str(config.getoption("--polyduct-dtypes")).split(",") if d)
    return Selection(
        ops=config.getoption("--polyduct-ops"),
        dtypes=dtypes,
        categories=tuple(config.getoption("--polyduct-category")),
    )


def _backend_names(config: pytest.Config) -> list[str]:
    names: list[str] = list(config.getoption("--polyduct-backend"))
    if "all" in names:
        from polyduct.plugins import load

        names = [n for n in names if n != "all"] + load().kernel_backends.names()
    return names


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPORTS] = {}


def _wrapper_findings(config: pytest.Config) -> dict[str, dict[str, str]]:
    """Wrapper IR line-type findings of the installed wrappers, computed once per session."""
    if _WRAPPERS not in config.stash:
        config.stash[_WRAPPERS] = wrapper_findings()
    return config.stash[_WRAPPERS]


class ConformanceFailure(Exception):
    """Raised by a conformance item whose cell failed; carries the report text."""


class ConformanceItem(pytest.Item):
    """One op x dtype cell (or `static`) of one backend."""

    def __init__(self, *, backend: str, op: str, dtype: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend, self.op, self.dtype = backend, op, dtype

    def _report(self) -> BackendReport:
        reports = self.config.stash[_REPORTS]
        if self.backend not in reports:
            name, backend = resolve_backend(self.backend)
            wrapper_name = str(self.config.getoption("--polyduct-wrapper"))
            wrapper = None
            if wrapper_name != "none":
                from polyduct.plugins import load

                wrapper = load().wrapper_backend(wrapper_name)
            reports[self.backend] = run_backend(
                name,
                backend,
                wrapper,
                _selection(self.config),
                device=str(self.config.getoption("--polyduct-device")),
                wrapper_missing=_wrapper_findings(self.config),
            )
        return reports[self.backend]

    def runtest(self) -> None:
        report = self._report()
        if self.op == "static":
            if report.static is not None and report.static.failures:
                raise ConformanceFailure("\n".join(report.static.lines()))
            return
        cell = report.cells.get((self.op, self.dtype))
        if cell is None or cell.status == "skipped":
            pytest.skip(cell.reason if cell else "not run (selection stopped early)")
        if cell.status == "failed":
            text = "\n\n".join(failure_text(r) for r in cell.results if r.status == "failed")
            raise ConformanceFailure(f"{self.backend}: {self.op} on {self.dtype}\n{text}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "polyduct-conformance", None, f"{self.backend}: {self.op}[{self.dtype}]"


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    names = _backend_names(config)
    if not names:
        return
    from polyduct.conformance.cli import selection_problem

    if problem := selection_problem(_selection(config)):
        raise pytest.UsageError(f"polyduct conformance: {problem}")
    cells = sorted({(p.op, dtype_name(p.dtype)) for p in all_probes(_selection(config))})
    for backend in names:
        items.append(
            ConformanceItem.from_parent(
                session,
                name=f"conformance[{backend}-static]",
                backend=backend,
                op="static",
                dtype="",
            )
        )
        for op, dtype in cells:
            items.append(
                ConformanceItem.from_parent(
                    session,
                    name=f"conformance[{backend}-{op}-{dtype}]",
                    backend=backend,
                    op=op,
                    dtype=dtype,
                )
            )
