"""Backend behaviour: registration, options, bounds errors, compile errors, the cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sympy
import torch
from helpers import backend, buf, compile_one, spec

from polyduct import plugins
from polyduct.errors import InvalidOption, KernelCompileError, KernelIndexError
from polyduct_cpp import CppOptions


def _gather_spec(name: str = "gather"):  # type: ignore[no-untyped-def]
    def body(ops, x, r):
        i = ops.indirect_indexing(ops.load("idx", x[0]), sympy.Integer(4))
        ops.store("out", x[0], ops.load("table", i))

    return spec(
        name,
        [3],
        [],
        [("outer", body)],
        [
            buf("table", torch.float32, "in", 4),
            buf("idx", torch.int64, "in", 3),
            buf("out", torch.float32, "out", 3),
        ],
    )


def test_registered_through_entry_point() -> None:
    installed = plugins.load()
    assert "cpp" in installed.kernel_backends.names()


def test_options_are_validated() -> None:
    with pytest.raises(InvalidOption, match="simd_lanes"):
        CppOptions(simd_lanes=3)
    with pytest.raises(InvalidOption, match="bogus"):
        CppOptions.from_mapping({"cpp": {"bogus": 1}})
    assert CppOptions.from_mapping({"cpp_opt_level": 2}).opt_level == 2
    assert CppOptions.from_mapping({"opt_level": 1}).opt_level == 1
    with pytest.raises(InvalidOption, match="opt_levle.*one of cpp, .*opt_level"):
        CppOptions.from_mapping({"opt_levle": 3})  # a misspelt option is never ignored


def test_out_of_bounds_index_raises_python_error(tmp_path: Path) -> None:
    k = compile_one(backend(tmp_path), _gather_spec())
    table, out = torch.arange(4.0), torch.empty(3)
    k(table, torch.tensor([0, -1, 3]), out)
    assert out.tolist() == [0.0, 3.0, 3.0]
    with pytest.raises(KernelIndexError, match=r"index 7 is out of bounds for buffer 'table'.*4"):
        k(table, torch.tensor([0, 7, 1]), out)


def test_compile_error_names_kernel_and_source(tmp_path: Path) -> None:
    be = backend(tmp_path, extra_flags=("-Din_ptr1=(",))
    with pytest.raises(KernelCompileError, match=r"kernel 'broken'.*cpp-failed") as info:
        compile_one(be, _gather_spec("broken"))
    assert Path(info.value.source_path).exists()


def test_warm_cache_hit_runs_no_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_one(backend(tmp_path), _gather_spec())

    def no_compiler(*args: object, **kwargs: object) -> None:
        raise AssertionError("the compiler ran on a warm cache")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    be = backend(tmp_path)
    k = compile_one(be, _gather_spec())
    out = torch.empty(3)
    k(torch.arange(4.0), torch.tensor([2, 1, 0]), out)
    assert out.tolist() == [2.0, 1.0, 0.0]
    assert be.cache.hits == 1 and be.cache.builds == 0


def test_codegen_is_deterministic(tmp_path: Path) -> None:
    be = backend(tmp_path)
    assert be.codegen(_gather_spec()).source == be.codegen(_gather_spec()).source
