"""AOT packages of Triton kernels: each kernel's chosen configs and, on CUDA, its compiled cubins.

`package_kernels` reads what the program's kernel modules did in this process (the AOT packager
runs the program on the exported example inputs first): the config each shape class launched,
chosen by tuning where it tuned, and, for compiled kernels, every (config, specialisation) of
those configs it launched: the cubin and the launch metadata torch's static CUDA launcher needs
(kernel name, argument types, warps, shared memory). `load_packaged_kernels` imports each kernel
module from its source (Triton is imported, nothing is compiled) and sets its runtime's `packaged` to a
`PackagedKernels`, which the module's runtime asks for configs and launch functions instead of
tuning and compiling. Cubins are loaded and launched by torch's static CUDA launcher (its C
functions: not the Python class, whose module imports Inductor and Dynamo): no compiler, and not
Triton's driver, which is itself a C compile. Interpreted kernels (CPU tensors) package their
configs only. A launch of a shape class or specialisation that did not run when the package was
made is refused, naming the kernel.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final, final

import torch
import triton

from polyduct.cache import import_module_file
from polyduct.errors import PackageError, PackagingUnsupported
from polyduct.kernel import KernelFn, KernelSource
from polyduct_triton import triton_shim

INDEX: Final = "kernels.json"
# The layout of the index-check flags the packaged launchers and kernels share
# (`kernel_runtime.flag_slot`): 2 is word 0, which a failed check clears, then 3 words per check.
FLAGS_LAYOUT: Final = 2


def package_kernels(modules: Sequence[tuple[KernelSource, ModuleType]]) -> dict[str, bytes]:
    """The files `load_packaged_kernels` needs, by relative path, from each kernel's module as
    the program left it after running here."""
    files: dict[str, bytes] = {}
    index: dict[str, Any] = {}
    for src, module in modules:
        if not (module.INTERPRET or module.RUNTIME.direct):
            raise PackagingUnsupported(
                "triton", f"Triton {triton.__version__} launches kernels through its JIT only"
            )
        chosen = {cfg for cfg in module.RUNTIME.best.values()}
        variants = {}
        for (_, key), launch in sorted(module.RUNTIME.compiled.items(), key=repr):
            if key[0] in chosen and repr(key) not in variants:
                variants[repr(key)] = _variant(src.name, key, launch, files)
        configs = sorted([list(k[1:]), list(cfg)] for k, cfg in module.RUNTIME.best.items())
        index[src.name] = {"configs": configs, "variants": variants}
    if modules and not any(info["configs"] for info in index.values()):
        raise PackagingUnsupported(
            "triton",
            f"no kernel of the program ran (kernel {modules[0][0].name!r}): Triton kernels are "
            "compiled and tuned at their first launch, so a package needs an exported program "
            "with example inputs (torch.export.export(model, args))",
        )
    if any(info["variants"] for info in index.values()):
        index["$target"] = _target()
    index["$flags"] = FLAGS_LAYOUT
    files[INDEX] = json.dumps(index, sort_keys=True).encode()
    return files


def _variant(kernel: str, key: Any, launch: Any, files: dict[str, bytes]) -> dict[str, Any]:
    """One compiled launch's packaged form; its cubin goes into `files`."""
    described = getattr(launch, "kernel", None)
    if getattr(launch, "via", "") != "torch" or described is None:
        raise PackagingUnsupported(
            "triton",
            f"kernel {kernel!r} launches {key!r} through Triton's own launcher "
            f"({getattr(launch, 'via', '?')}), which loads only where a C compiler is",
        )
    cubin = Path(triton_shim.cubin_path(launch.compiled)).read_bytes()
    name = f"{kernel}/{hashlib.sha256(cubin).hexdigest()[:16]}.cubin"
    files[name] = cubin
    # what torch's launcher object passes to its C functions; Triton's scratch arguments (a
    # kernel needing scratch memory is refused by torch's launcher) are passed as null pointers
    scratch = ("has_global_scratch", "has_profile_scratch")
    return {
        "cubin": name,
        "function": str(described.name),
        "shared": int(described.shared),
        "num_warps": int(described.num_warps),
        "arg_tys": str(described.arg_tys),
        "scratch": sum(bool(getattr(described, flag, False)) for flag in scratch),
        "runtime": [int(i) for i in launch.runtime],
    }


def _target() -> dict[str, Any]:
    return {
        "capability": list(torch.cuda.get_device_capability()),
        "device": torch.cuda.get_device_name(),
        "triton": triton.__version__,
    }


def load_packaged_kernels(
    sources: Sequence[KernelSource], files: Path, launcher: str = "auto",
    index_errors: str = "assert",
) -> dict[str, KernelFn]:
    """The kernels of `sources` from the packaged files under `files` (no compiler); `launcher`
    and `index_errors` are the backend's options of those names."""
    index = json.loads((files / INDEX).read_text())
    if index.pop("$flags", 1) != FLAGS_LAYOUT:
        raise PackageError(
            "kernels/triton",
            "made by an older polyduct-triton, whose kernels report failed index checks in "
            "another layout: package the program again",
        )
    target = index.get("$target")
    if target is not None:
        _check_target(target)
    kernels: dict[str, KernelFn] = {}
    for src in sources:
        path = files / f"{src.name}.py"
        path.write_text(src.source)
        digest = hashlib.sha256(src.source.encode()).hexdigest()[:24]
        module = import_module_file(path, f"polyduct_triton_packaged_{digest}")
        packaged = PackagedKernels(src.name, index[src.name], files)
        if packaged.variants:
            device = torch.cuda.current_device()
            for text in packaged.variants:
                key = ast.literal_eval(text)
                module.RUNTIME.compiled[device, key] = packaged.launch(key, device)
        module.RUNTIME.packaged = packaged
        module.RUNTIME.launcher = launcher
        module.RUNTIME.index_errors = index_errors
        kernels[src.name] = module.launch
    return kernels


def _check_target(target: Mapping[str, Any]) -> None:
    if not torch.cuda.is_available():
        raise PackageError("kernels/triton", "holds CUDA kernels, and CUDA is not available here")
    here = list(torch.cuda.get_device_capability())
    if here != list(target["capability"]):
        raise PackageError(
            "kernels/triton",
            f"cubins made for compute capability {target['capability']} ({target['device']}); "
            f"this device ({torch.cuda.get_device_name()}) is {here}",
        )


@final
class PackagedKernels:
    """One kernel module's packaged configs and compiled launches, as its runtime asks for them
    (`config` in place of tuning, `launch` in place of compiling)."""

    def __init__(self, name: str, info: Mapping[str, Any], files: Path) -> None:
        self.name = name
        self.configs = {
            (int(x), int(r), bool(i)): tuple(int(v) for v in cfg)
            for (x, r, i), cfg in info["configs"]
        }
        self.variants = dict(info["variants"])
        self._cubins = {k: (files / v["cubin"]).read_bytes() for k, v in self.variants.items()}

    def config(self, shape_class: tuple[int, int, bool], xnumel: int, rnumel: int) -> Any:
        """The config packaged for `shape_class` (pow2 xnumel, pow2 rnumel, 64-bit indices)."""
        cfg = self.configs.get(tuple(shape_class))  # type: ignore[arg-type]
        if cfg is None:
            raise PackageError(
                f"triton kernel {self.name!r}",
                f"a launch of {xnumel} x {rnumel} elements (shape class {shape_class}) did not "
                f"run when the package was made (it has {sorted(self.configs)}): package the "
                "program with example inputs of these sizes",
            )
        return cfg

    def launch(self, key: Any, device: int) -> Any:
        """The launch function of `key` (config, 64-bit indices, persistent, specialisation) on
        `device`: its cubin loaded into the device through torch's static launcher."""
        variant = self.variants.get(repr(key))
        if variant is None:
            raise PackageError(
                f"triton kernel {self.name!r}",
                f"no compiled code for launch {key!r} (an argument aligned or sized unlike at "
                "packaging: Triton specialises on 16-byte alignment and on sizes of 1 or a "
                "multiple of 16)",
            )
        c_launcher = _c_launcher()
        function = _load(c_launcher, variant, self._cubins[repr(key)], device)
        runtime, extra = list(variant["runtime"]), (None,) * int(variant["scratch"])
        arg_tys = str(variant["arg_tys"]) + "O" * len(extra)
        warps, shared, run = int(variant["num_warps"]), int(variant["shared"]), c_launcher._launch_kernel

        def launch(grid0: int, stream: int, args: Sequence[Any]) -> None:
            run(function, grid0, 1, 1, warps, shared, arg_tys, (*[args[i] for i in runtime], *extra),
                stream)

        launch.via = "package"  # type: ignore[attr-defined]
        return launch


def _c_launcher() -> Any:
    """torch's static CUDA launcher: `_load_kernel` and `_launch_kernel`, built into torch."""
    return torch._C._StaticCudaLauncher


def _load(c_launcher: Any, variant: Mapping[str, Any], cubin: bytes, device: int) -> Any:
    """The handle of one packaged cubin's kernel, loaded into `device`."""
    fd, tmp = tempfile.mkstemp(suffix=".cubin")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        loaded = c_launcher._load_kernel(tmp, variant["function"], int(variant["shared"]), device)
    finally:
        os.unlink(tmp)
    # (module, function, registers, spills); older torch: (function, registers, spills)
    return loaded[-3]
