"""AOT packages of compiled Triton kernels, with the GPU simulated: a launch here (its compile and
torch's static launcher stand-ins) is packaged, and a fresh import of the module launches the
packaged cubin with no compile; other shape classes and specialisations are refused."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from kernels import cuda_module

from polyduct.errors import PackageError
from polyduct.kernel import KernelSource
from polyduct_triton import package

LAUNCHED: list[tuple[Any, ...]] = []


class FakeLauncher:
    """torch's static CUDA launcher as the runtime and the package use it."""

    def __init__(self, compiled: Any) -> None:
        self.name, self.arg_tys, self.shared = "copy_kernel", "OOi", 0
        self.cubin_path, self.function = compiled._cubin_path, None

    def load_kernel(self, device: int) -> None:
        self.function = (device, Path(self.cubin_path).read_text())
        self.cubin_path = None

    def run(self, *args: Any) -> None:
        LAUNCHED.append((self.function, self.name, self.arg_tys, args))


def _simulate_gpu(module: Any, monkeypatch: pytest.MonkeyPatch, cubin: Path) -> None:
    names = list(module._kernel.arg_names)
    constexpr = {"rnumel", "XBLOCK", "RBLOCK", "IDX64", "PERSISTENT"}  # rnumel == 1 here
    signature = {n: "constexpr" if n in constexpr else "i32" for n in names}
    compiled = SimpleNamespace(metadata_group={"k.cubin": str(cubin)},
                               src=SimpleNamespace(fn=module._kernel, signature=signature))
    monkeypatch.setattr(module, "_device", lambda: 0)
    monkeypatch.setattr(module, "_stream", lambda device: 7)
    monkeypatch.setattr(module, "warmup", lambda *job: compiled)
    monkeypatch.setattr(module, "_torch_launcher_class", lambda: FakeLauncher)


def test_a_compiled_launch_is_packaged_and_launches_with_no_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = cuda_module(tmp_path, "packaged_copy")
    if not module.DIRECT:
        pytest.skip("direct launches need triton >= 3.4")
    cubin = tmp_path / "k.cubin"
    cubin.write_text("cubin bytes")
    _simulate_gpu(module, monkeypatch, cubin)
    a, o = torch.randn(8), torch.empty(7)
    module.launch(a[:7], o)
    monkeypatch.setattr(package, "_target", lambda: {"capability": [9, 0], "device": "H100"})
    src = KernelSource("packaged_copy", "triton", Path(module.__file__).read_text())
    files = package.package_kernels([(src, module)])
    assert [n for n in files if n.endswith(".cubin")] == [n for n in files if "/" in n]
    cubin.unlink()  # Triton's cache is gone: the package holds the cubin
    root = tmp_path / "unpacked"
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    monkeypatch.setattr(package, "_check_target", lambda target: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    launch = package.load_packaged_kernels([src], root)["packaged_copy"]
    loaded = launch.__globals__
    loaded["_stream"] = lambda device: 7
    loaded["warmup"] = _no_compile
    LAUNCHED.clear()
    launch(a[:7], o)
    (function, name, arg_tys, args) = LAUNCHED[0]
    assert (function, name, arg_tys) == ((0, "cubin bytes"), "copy_kernel", "OOi")
    assert args[:4] == (1, 1, 1, 7) and args[4].data_ptr() == a.data_ptr() and args[6] == 7
    with pytest.raises(PackageError, match="no compiled code for launch"):
        launch(a[1:], o)  # misaligned: another specialisation
    with pytest.raises(PackageError, match=r"packaged_copy.*did not run when the package"):
        loaded["PACKAGED"].config((1 << 20, 1, False), 1 << 20, 1)


def _no_compile(*job: Any) -> Any:
    raise AssertionError("a packaged kernel compiled")
