"""Wrapper IR line-type completeness: every line type is exercised, a refusing wrapper is named."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from polyduct.conformance.batch import _cpu, _to_device
from polyduct.conformance.runner import Selection, run_backend
from polyduct.conformance.wrappers import WHOLE, check_wrapper, covered_line_types
from polyduct.errors import WrapperError
from polyduct.plugins import load
from polyduct.wrapper import KernelLoader
from polyduct.wrapper.ir import LINE_TYPES, Comment, Reuse, WrapperProgram
from polyduct.wrapper.python import PythonWrapper


class NoReuseWrapper(PythonWrapper):  # type: ignore[misc]  # final for users, subclassed here
    """The Python wrapper, except that it refuses `Reuse` lines."""

    def build(self, program: WrapperProgram, load_kernels: KernelLoader) -> Any:
        for line in program.lines:
            if isinstance(line, Reuse):
                raise WrapperError("no-reuse", line, "Reuse is not supported")
        return super().build(program, load_kernels)


class DropCommentWrapper(PythonWrapper):  # type: ignore[misc]
    """Raises NotImplementedError on comments (as an unfinished `match` arm would)."""

    def build(self, program: WrapperProgram, load_kernels: KernelLoader) -> Any:
        if any(isinstance(line, Comment) for line in program.lines):
            raise NotImplementedError("Comment")
        return super().build(program, load_kernels)


class WrongOutputsWrapper(PythonWrapper):  # type: ignore[misc]
    """Builds fine but returns the outputs reversed: a silent wrong result, not an exception."""

    def build(self, program: WrapperProgram, load_kernels: KernelLoader) -> Any:
        fn = super().build(program, load_kernels)
        return lambda *args: list(reversed(fn(*args)))


def _reference() -> Any:
    return load().kernel_backend("reference")


def test_checks_cover_every_line_type() -> None:
    assert covered_line_types() == {t.__name__ for t in LINE_TYPES}


@pytest.mark.parametrize("name", ["python", "fx"])
def test_installed_wrappers_handle_every_line_type(name: str) -> None:
    plugins = load()
    if name not in plugins.wrapper_backends.names():
        pytest.skip(f"wrapper {name!r} not installed")
    assert check_wrapper(plugins.wrapper_backend(name), _reference()) == {}


def test_wrapper_refusing_reuse_is_reported_by_line_type() -> None:
    missing = check_wrapper(NoReuseWrapper(), _reference())
    assert list(missing) == ["Reuse"]
    assert "WrapperError" in missing["Reuse"] and "Reuse is not supported" in missing["Reuse"]


def test_not_implemented_line_type_is_named() -> None:
    missing = check_wrapper(DropCommentWrapper(), _reference())
    assert list(missing) == ["Comment"]
    assert missing["Comment"].startswith("NotImplementedError")


def test_wrong_values_are_reported() -> None:
    missing = check_wrapper(WrongOutputsWrapper(), _reference())
    assert "GraphOutputs" in missing and "output 0" in missing["GraphOutputs"]
    assert WHOLE not in missing  # per-type findings explain it already


def test_static_section_names_the_wrapper_and_line_type() -> None:
    findings = {"no-reuse": check_wrapper(NoReuseWrapper(), _reference()), "python": {}}
    report = run_backend(
        "reference",
        _reference(),
        None,
        Selection(ops="^add$", dtypes=("float32",)),
        wrapper_missing=findings,
    )
    assert report.static is not None and report.static.failures == 1
    text = "\n".join(report.static.lines())
    assert "wrapper 'no-reuse' does not handle Reuse: WrapperError" in text
    assert "wrapper 'python': all 13 Wrapper IR line types ok" in text
    assert report.counts()["failed"] == 1 and report.counts()["passed"] == 1


def test_device_move_keeps_size_strides_and_values() -> None:
    base = torch.arange(60.0).reshape(6, 10)
    view = base[1::2, 3:9:2]
    moved = _to_device(view, "cpu")
    assert moved is view
    on_meta = _to_device(view, "meta")  # another device: layout kept, values copied as a span
    assert on_meta.shape == view.shape and on_meta.stride() == view.stride()
    assert on_meta.storage_offset() == 0
    out = _cpu(view.t())
    assert out.stride() == view.t().stride() and torch.equal(out, view.t())
