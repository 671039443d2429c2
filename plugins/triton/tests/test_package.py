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
    """torch's static CUDA launcher object, as the runtime makes and uses it."""

    def __init__(self, compiled: Any) -> None:
        self.name, self.arg_tys, self.shared, self.num_warps = "copy_kernel", "OOi", 64, 2
        self.has_global_scratch = True  # Triton's scratch argument: a null pointer

    def load_kernel(self, device: int) -> None:
        pass

    def run(self, *args: Any) -> None:
        LAUNCHED.append(("packaging run", *args))


class FakeCLauncher:
    """torch's `_StaticCudaLauncher` C functions."""

    @staticmethod
    def _load_kernel(path: str, name: str, shared: int, device: int) -> tuple[Any, ...]:
        return ("module", (device, name, shared, Path(path).read_text()), 30, 0)

    @staticmethod
    def _launch_kernel(function: Any, *args: Any) -> None:
        LAUNCHED.append((function, *args))


def _simulate_gpu(module: Any, monkeypatch: pytest.MonkeyPatch, cubin: Path) -> None:
    names = list(module._kernel.arg_names)
    constexpr = {"rnumel", "XBLOCK", "RBLOCK", "IDX64", "PERSISTENT"}  # rnumel == 1 here
    signature = {n: "constexpr" if n in constexpr else "i32" for n in names}
    compiled = SimpleNamespace(metadata_group={"k.cubin": str(cubin)},
                               src=SimpleNamespace(fn=module._kernel, signature=signature))
    monkeypatch.setattr(module.RUNTIME, "_device", lambda: 0)
    monkeypatch.setattr(module.RUNTIME, "_stream", lambda device: 7)
    monkeypatch.setattr(module.RUNTIME, "warmup", lambda *job: compiled)
    monkeypatch.setattr(module.RUNTIME, "_torch_launcher_class", lambda: FakeLauncher)


def test_a_compiled_launch_is_packaged_and_launches_with_no_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = cuda_module(tmp_path, "packaged_copy")
    if not module.RUNTIME.direct:
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
    monkeypatch.setattr(package, "_c_launcher", lambda: FakeCLauncher)
    launch = package.load_packaged_kernels([src], root)["packaged_copy"]
    loaded = launch.__globals__
    loaded["RUNTIME"]._stream = lambda device: 7
    loaded["RUNTIME"].warmup = _no_compile
    assert [(x[:5], x[-1]) for x in LAUNCHED] == [(("packaging run", 1, 1, 1, 7), 7)]
    LAUNCHED.clear()
    launch(a[:7], o)
    function, *grid, warps, shared, arg_tys, args, stream = LAUNCHED[0]
    assert function == (0, "copy_kernel", 64, "cubin bytes")
    assert (grid, warps, shared, arg_tys, stream) == ([1, 1, 1], 2, 64, "OOiO", 7)
    assert args[0].data_ptr() == a.data_ptr() and args[1:] == (o, 7, None)
    with pytest.raises(PackageError, match="no compiled code for launch"):
        launch(a[1:], o)  # misaligned: another specialisation
    with pytest.raises(PackageError, match=r"packaged_copy.*did not run when the package"):
        loaded["RUNTIME"].packaged.config((1 << 20, 1, False), 1 << 20, 1)


def _no_compile(*job: Any) -> Any:
    raise AssertionError("a packaged kernel compiled")


def test_a_package_of_another_flags_layout_is_refused(tmp_path: Path) -> None:
    """A package whose kernels report failed index checks in another layout (made before word
    0 existed) would assert on a launch that went well: it is refused, asking for a new one."""
    (tmp_path / package.INDEX).write_text('{"k": {"configs": [], "variants": {}}}')
    with pytest.raises(PackageError, match="older polyduct-triton.*package the program again"):
        package.load_packaged_kernels([], tmp_path)
