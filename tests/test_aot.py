"""AOT packages: made here, loaded in a fresh process with no compiler on PATH; damage refused."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from polyduct.aot import compile_and_package, load_package
from polyduct.errors import InputMismatch, PackageError, PackagingUnsupported
from polyduct.package_format import MANIFEST

LOADER = """
import sys, torch
from polyduct.aot import load_package
prog = load_package(sys.argv[1])
inputs = torch.load(sys.argv[2])
outs = [prog(*inputs["args"], **inputs["kwargs"]) for _ in range(2)]
torch.save({"outs": outs, "dynamo": "torch._dynamo" in sys.modules}, sys.argv[3])
"""


class Net(nn.Module):
    """Parameters, a mutated buffer, a keyword input, a dict output and a constant output."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(24, 40)
        self.norm = nn.LayerNorm(40)
        self.register_buffer("steps", torch.zeros(40))

    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> dict[str, Any]:
        self.steps.add_(1.0)
        h = F.gelu(self.norm(self.proj(x))) * scale + self.steps
        return {"h": h, "stats": (h.softmax(-1).amax(-1), 7)}


def _inputs(seed: int, device: str = "cpu") -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 24, generator=g) * 3
    x[0, :3] = torch.tensor([0.0, -0.0, 1e4])  # edge values through layernorm and GELU
    scale = torch.rand((), generator=g) + 0.5
    return {"args": (x.to(device),), "kwargs": {"scale": scale.to(device)}}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    example = _inputs(0)
    ep = torch.export.export(Net(), example["args"], example["kwargs"])
    return compile_and_package(ep, tmp_path_factory.mktemp("aot") / "net.polyduct")


def _eager(inputs: dict[str, Any], calls: int, device: str = "cpu") -> list[Any]:
    torch.manual_seed(0)
    net = Net().to(device)
    return [net(*inputs["args"], **inputs["kwargs"]) for _ in range(calls)]


def _run_fresh(package: Path, inputs: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Load and call the package twice in a fresh process with no compiler on PATH (and an empty
    Triton cache, which would otherwise hold the C launchers Triton builds with one)."""
    torch.save(inputs, tmp_path / "in.pt")
    drop = ("PATH", "POLYDUCT_CACHE_DIR", "CC", "CXX", "TRITON_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=str(tmp_path / "empty"), POLYDUCT_CACHE_DIR=str(tmp_path / "cache"))
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton-cache"))
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(package), str(tmp_path / "in.pt"), str(tmp_path / "o")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = torch.load(tmp_path / "o")
    assert not got["dynamo"], "loading a package imported Dynamo"
    assert not (tmp_path / "cache").exists(), "loading a package compiled into the cache"
    assert not (tmp_path / "triton-cache").exists(), "loading a package ran Triton's compiler"
    return got


def test_a_fresh_process_with_no_compiler_runs_the_package(package: Path, tmp_path: Path) -> None:
    inputs = _inputs(1)
    got = _run_fresh(package, inputs, tmp_path)
    torch.testing.assert_close(got["outs"], _eager(inputs, 2))
    assert got["outs"][1]["stats"][1] == 7


def test_halide_kernels_package_too(tmp_path: Path) -> None:
    pytest.importorskip("polyduct_halide")
    torch.manual_seed(0)
    example = _inputs(0)
    ep = torch.export.export(Net(), example["args"], example["kwargs"])
    path = compile_and_package(ep, tmp_path / "net.polyduct", {"kernels": "halide"})
    with zipfile.ZipFile(path) as archive:
        assert "kernels/halide/kernels.json" in archive.namelist()
    inputs = _inputs(3)
    got = _run_fresh(path, inputs, tmp_path)
    torch.testing.assert_close(got["outs"], _eager(inputs, 2), atol=1e-5, rtol=1e-5)


def test_keywords_in_any_order_and_a_wrong_structure_is_refused(package: Path) -> None:
    prog = load_package(package)
    inputs = _inputs(2)
    torch.testing.assert_close(prog(*inputs["args"], **inputs["kwargs"]), _eager(inputs, 1)[0])
    with pytest.raises(TypeError, match=r"expected keyword arguments \['scale'\], got \[\]"):
        prog(*inputs["args"])
    with pytest.raises(TypeError, match="inputs are structured as"):
        prog(*inputs["args"], inputs["args"][0], **inputs["kwargs"])


def _rewrite(src: Path, dst: Path, edit: Any) -> Path:
    """Copy the package with member contents changed by `edit(name, data) -> data`."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for name in old.namelist():
            new.writestr(name, edit(name, old.read(name)))
    return dst


def _manifest_edit(key: str, value: Any) -> Any:
    def edit(name: str, data: bytes) -> bytes:
        if name != MANIFEST:
            return data
        manifest = json.loads(data)
        section, _, field = key.rpartition(".")
        (manifest[section] if section else manifest)[field] = value
        return json.dumps(manifest).encode()

    return edit


def _flip_library_byte(name: str, data: bytes) -> bytes:
    if not name.endswith("kernels.so"):
        return data
    mid = len(data) // 2
    return data[:mid] + bytes([data[mid] ^ 1]) + data[mid + 1 :]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncated-end", "damaged or truncated"),
        ("truncated-1/3", "damaged"),
        ("truncated-2/3", "damaged"),
        ("flipped", "member 'kernels/cpp/kernels.so' does not match its SHA-256"),
        ("version", "format version 99; this polyduct reads version 1"),
        ("torch", "made for torch '2.0.0', this is torch"),
        ("not-a-package", "damaged or truncated"),
    ],
)
def test_a_damaged_or_foreign_package_is_refused(
    package: Path, tmp_path: Path, damage: str, message: str
) -> None:
    bad = tmp_path / "bad.polyduct"
    data = package.read_bytes()
    if damage.startswith("truncated"):
        cut = {"end": len(data) - 10, "1/3": len(data) // 3, "2/3": len(data) * 2 // 3}
        bad.write_bytes(data[: cut[damage.removeprefix("truncated-")]])
    elif damage == "not-a-package":
        bad.write_bytes(b"#!/bin/sh\n" + bytes(100))
    elif damage == "flipped":
        _rewrite(package, bad, _flip_library_byte)
    elif damage == "version":
        _rewrite(package, bad, _manifest_edit("version", 99))
    else:
        _rewrite(package, bad, _manifest_edit("runtime.torch", "2.0.0"))
    with pytest.raises(PackageError, match=message):
        load_package(bad)


def test_the_package_holds_the_wrapper_kernels_and_tensors(package: Path) -> None:
    with zipfile.ZipFile(package) as archive:
        manifest = json.loads(archive.read(MANIFEST))
        stored = torch.load(io.BytesIO(archive.read("tensors.pt")), weights_only=True)
    files = set(manifest["files"])
    assert {"kernels/cpp/kernels.so", "tensors.pt", "wrapper.py"} <= files
    assert set(stored["stored"]) == {
        "proj.weight",
        "proj.bias",
        "norm.weight",
        "norm.bias",
        "steps",
    }
    assert manifest["program"]["kernel_backends"] == {
        "cpp": {"options": {}, "distribution": "polyduct-cpp"}
    }


def test_a_backend_that_cannot_load_prebuilt_kernels_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("polyduct_halide")
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    ep = torch.export.export(model, (torch.randn(2, 4),))
    options = {"kernels": "halide", "kernel_options": {"aot": False}}  # JIT: in memory only
    with pytest.raises(PackagingUnsupported, match="kernel backend 'halide'.*cannot load prebuilt"):
        compile_and_package(ep, tmp_path / "t.polyduct", options)
    assert not (tmp_path / "t.polyduct").exists()


def test_dynamic_dimensions_stay_dynamic(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8))
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes=({0: batch},))
    prog = load_package(compile_and_package(ep, tmp_path / "dyn.polyduct"))
    for n in (3, 17):
        x = torch.randn(n, 8)
        torch.testing.assert_close(prog(x), model(x))
    with pytest.raises(InputMismatch, match="expected"):
        prog(torch.randn(5, 9))


class _Branching(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))


def test_a_program_with_subgraphs_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """A higher-order op's subgraphs run in eager (Python code): no package can hold them."""
    from polyduct.errors import InvalidOption

    exported = torch.export.export(_Branching(), (torch.randn(3, 4),))
    with pytest.raises(InvalidOption, match="higher-order op"):
        compile_and_package(exported, tmp_path / "cond.pdx")
    assert not (tmp_path / "cond.pdx").exists()
