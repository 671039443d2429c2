"""AOT packages of Triton kernels: configs under the CPU interpreter; cubins on CUDA, loaded in a
fresh process with no compiler on PATH and an empty Triton cache; damage and another GPU refused."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from test_aot import Net, _eager, _inputs, _rewrite, _run_fresh
from torch import nn

from polyduct.aot import compile_and_package, load_package
from polyduct.errors import PackageError, PackagingUnsupported
from polyduct.package_format import MANIFEST

pytest.importorskip("polyduct_triton")
INDEX = "kernels/triton/kernels.json"
interpreted = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1" or torch.cuda.is_available(),
    reason="Triton on CPU tensors needs TRITON_INTERPRET=1 (set before triton imports)",
)
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="cubins need a CUDA device")


def _package(tmp_path: Path, device: str, name: str = "net.polyduct") -> Path:
    torch.manual_seed(0)
    example = _inputs(0, device)
    ep = torch.export.export(Net().to(device), example["args"], example["kwargs"])
    return compile_and_package(ep, tmp_path / name, {"kernels": "triton"})


def _index(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        index: dict[str, Any] = json.loads(archive.read(INDEX))
    return index


@interpreted
def test_interpreted_kernels_package_their_configs_and_run_fresh(tmp_path: Path) -> None:
    path = _package(tmp_path, "cpu")
    index = _index(path)
    kernels = [k for k in index if not k.startswith("$")]
    assert kernels and all(index[k]["configs"] for k in kernels), index
    assert "$target" not in index and not any(index[k]["variants"] for k in kernels)
    inputs = _inputs(1)
    torch.testing.assert_close(_run_fresh(path, inputs, tmp_path)["outs"], _eager(inputs, 2))


@interpreted
def test_a_shape_class_that_did_not_run_when_packaged_is_refused(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8))
    batch = torch.export.Dim("batch", min=2, max=4096)
    ep = torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes=({0: batch},))
    prog = load_package(compile_and_package(ep, tmp_path / "dyn.polyduct", {"kernels": "triton"}))
    x = torch.randn(3, 8)  # 24 elements: the shape class of the example's 32
    torch.testing.assert_close(prog(x), model(x))
    with pytest.raises(PackageError, match=r"triton kernel '\w+'.*did not run when the package"):
        prog(torch.randn(300, 8))


@interpreted
def test_a_program_exported_without_example_inputs_is_refused(tmp_path: Path) -> None:
    ep = torch.export.export(nn.GELU(), (torch.randn(4, 8),))
    ep._example_inputs = None  # as a program loaded by torch.export.load may be
    with pytest.raises(PackagingUnsupported, match="no kernel of the program ran.*example inputs"):
        compile_and_package(ep, tmp_path / "g.polyduct", {"kernels": "triton"})


@pytest.fixture(scope="module")
def cuda_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _package(tmp_path_factory.mktemp("aot-cuda"), "cuda")


@cuda
def test_cubins_load_and_run_in_a_fresh_process_with_no_compiler(
    cuda_package: Path, tmp_path: Path
) -> None:
    index = _index(cuda_package)
    assert index["$target"]["capability"] == list(torch.cuda.get_device_capability())
    assert any(info["variants"] for k, info in index.items() if not k.startswith("$"))
    inputs = _inputs(1, "cuda")
    got = _run_fresh(cuda_package, inputs, tmp_path)
    torch.testing.assert_close(got["outs"], _eager(inputs, 2, "cuda"), atol=1e-4, rtol=1e-4)


@cuda
def test_cubins_load_in_this_process_too(cuda_package: Path) -> None:
    prog = load_package(cuda_package)
    torch.manual_seed(0)
    net = Net().to("cuda")  # its buffer counts calls, as the package's does
    for seed in (2, 3):
        inputs = _inputs(seed, "cuda")
        got = prog(*inputs["args"], **inputs["kwargs"])
        torch.testing.assert_close(got, net(*inputs["args"], **inputs["kwargs"]), atol=1e-4, rtol=1e-4)


def _flip_cubin(name: str, data: bytes) -> bytes:
    if not name.endswith(".cubin"):
        return data
    return data[:100] + bytes([data[100] ^ 1]) + data[101:]


def _other_capability(name: str, data: bytes) -> bytes:
    if name == INDEX:
        index = json.loads(data)
        index["$target"]["capability"] = [1, 0]
        return json.dumps(index).encode()
    return data


def _resign(path: Path) -> Path:
    """The package with its manifest's digests recomputed (an edit that is not damage)."""
    with zipfile.ZipFile(path) as archive:
        digests = {n: hashlib.sha256(archive.read(n)).hexdigest() for n in archive.namelist()}

    def edit(name: str, data: bytes) -> bytes:
        if name != MANIFEST:
            return data
        manifest = json.loads(data)
        manifest["files"] = {n: digests[n] for n in manifest["files"]}
        return json.dumps(manifest).encode()

    return _rewrite(path, path.with_suffix(".signed"), edit)


@cuda
def test_a_damaged_cubin_is_refused(cuda_package: Path, tmp_path: Path) -> None:
    bad = _rewrite(cuda_package, tmp_path / "bad.polyduct", _flip_cubin)
    with pytest.raises(PackageError, match=r"member 'kernels/triton/.*\.cubin' does not match"):
        load_package(bad)


@cuda
def test_cubins_for_another_gpu_are_refused(cuda_package: Path, tmp_path: Path) -> None:
    other = _resign(_rewrite(cuda_package, tmp_path / "other.polyduct", _other_capability))
    with pytest.raises(PackageError, match=r"compute capability \[1, 0\].*this device"):
        load_package(other)
