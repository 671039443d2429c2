"""The CUDA path, without a GPU: pipelines cross-compiled for a CUDA target, keys and refusals.

Compiling a pipeline for `host-cuda-cuda_capability_80` needs no GPU: the object file holds the
host code and the PTX of its GPU kernels. The lowered statement shows where each loop runs; a
loop Halide runs on the host (a `for` without a GPU loop type) would need host memory, which
CUDA tensors do not have, so none may remain.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import halide as hl
import numpy as np
import pytest
import sympy
import torch
from test_kernels import F32, S0, _gather_spec, _unary_spec, buf

from polyduct.cache import import_module_file
from polyduct.errors import InvalidOption
from polyduct.kernel import KernelSpec, Stage
from polyduct_halide.backend import HalideBackend, HalideOptions

CUDA = "host-cuda-cuda_capability_80"


def _on_cuda(spec: KernelSpec) -> KernelSpec:
    return dataclasses.replace(spec, device="cuda")


def _compile(spec: KernelSpec, tmp_path: Path, schedule: str = "default") -> tuple[str, bytes]:
    """Cross-compile `spec` for CUDA: the lowered statement and the object file's bytes."""
    options = HalideOptions(schedule=schedule, target=CUDA)
    source = HalideBackend(options).codegen(spec).source
    path = tmp_path / f"{spec.name}.py"
    path.write_text(source)
    module = import_module_file(path, f"cuda_target_{spec.name}_{schedule}")
    target = options.halide_target("cuda").with_feature(hl.TargetFeature.NoRuntime)
    pipeline, arguments = module.build(target, schedule)
    stmt, obj = tmp_path / "k.stmt", tmp_path / "k.o"
    files = {hl.OutputFileType.stmt: str(stmt), hl.OutputFileType.object: str(obj)}
    pipeline.compile_to(files, arguments, "kernel", target)
    return stmt.read_text(errors="replace"), obj.read_bytes()


def _host_code(stmt: str) -> str:
    """The lowered statement without the PTX of its GPU kernels (what runs on the host)."""
    head, _, rest = stmt.partition("buffer cuda_gpu_source_kernels = {")
    return head + rest.partition("\n}\n")[2]


def _assert_all_on_gpu(stmt: str) -> None:
    host = _host_code(stmt)
    assert "halide_cuda_run(" in host
    assert re.findall(r"^\s*(?:for|parallel|vectorized|serial) \(.*$", host, re.MULTILINE) == []
    # nothing needs the host memory CUDA tensors do not have: no copies back, no element read
    # (bounds inference can read a data-dependent index that is the same for every point)
    assert "halide_copy_to_host" not in host and "halide_error_host_is_null" not in host
    assert re.findall(r"\b(?:in|out|in_out)_ptr\d+\[", host) == []


def _scan_spec() -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        def combine(left: tuple[Any, ...], right: tuple[Any, ...]) -> tuple[Any, ...]:
            return (ops.add(left[0], right[0]),)

        (c,) = ops.scan((F32,), combine, (ops.load("a", x[0] * 8 + r[0]),))
        ops.store("c", x[0] * 8 + r[0], c)

    return KernelSpec(
        "cs", (3,), (8,), (Stage("scan", body),), (buf("a", "in", 24), buf("c", "out", 24))
    )


def _sum_spec() -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        red = ops.reduction(F32, F32, "sum", ops.load("a", x[0] * S0 + r[0]))
        ops.store_reduction("out", x[0], red)

    return KernelSpec(
        "rowsum",
        (5,),
        (S0,),
        (Stage("reduction", body),),
        (buf("a", "in", 5 * S0), buf("out", "out", 5)),
        (S0,),
    )


def _sort_spec() -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        v = ops.load("a", x[0] * 8 + r[0])
        (sv,) = ops.sort((F32,), (v,), True, False)
        ops.store("sv", x[0] * 8 + r[0], sv)

    return KernelSpec(
        "st", (3,), (8,), (Stage("sort", body),), (buf("a", "in", 24), buf("sv", "out", 24))
    )


SPECS = {
    "pointwise": lambda: _unary_spec("pw_cuda"),
    "reduction": _sum_spec,
    "scan": _scan_spec,
    "sort": _sort_spec,
    "gather": _gather_spec,
}


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_default_schedule_runs_every_loop_on_the_gpu(kind: str, tmp_path: Path) -> None:
    stmt, obj = _compile(_on_cuda(SPECS[kind]()), tmp_path)
    assert b".target sm_80" in obj and b".entry" in obj  # PTX kernels inside the object
    _assert_all_on_gpu(stmt)


@pytest.mark.parametrize("schedule", ["Anderson2021", "Li2018", "Mullapudi2016"])
def test_gpu_autoschedulers_schedule_for_the_gpu(schedule: str, tmp_path: Path) -> None:
    stmt, obj = _compile(_on_cuda(_unary_spec("auto")), tmp_path, schedule)
    assert b".entry" in obj
    _assert_all_on_gpu(stmt)


def test_bounds_checks_are_left_out_of_gpu_kernels(tmp_path: Path) -> None:
    # Halide refuses a requirement inside a GPU kernel; CUDA kernels clamp indices instead.
    stmt, _ = _compile(_on_cuda(_gather_spec()), tmp_path)
    assert "halide_error_requirement_failed" not in stmt
    cpu = HalideBackend().codegen(_gather_spec()).source
    assert "_rt.require(target, " in cpu


def test_cpu_only_and_gpu_only_schedules_are_refused_with_the_device() -> None:
    with pytest.raises(InvalidOption, match=r"Anderson2021.*cpu.*GPU targets only"):
        HalideBackend(HalideOptions(schedule="Anderson2021")).codegen(_unary_spec("a"))
    for schedule in ("Adams2019", "none"):
        with pytest.raises(InvalidOption, match=rf"halide.*{schedule}.*cuda"):
            backend = HalideBackend(HalideOptions(schedule=schedule))
            backend.codegen(_on_cuda(_unary_spec("b")))


def test_cache_key_differs_by_device_target_and_schedule() -> None:
    spec = _unary_spec("key")
    cuda_spec = _on_cuda(spec)
    cpu = HalideBackend()
    gpu = HalideBackend(HalideOptions(target=CUDA))
    src_cpu, src_gpu = cpu.codegen(spec), gpu.codegen(cuda_spec)
    assert 'DEVICE = "cpu"' in src_cpu.source and 'DEVICE = "cuda"' in src_gpu.source
    key_cpu = cpu._key(src_cpu, cpu.options.halide_target("cpu"), "cpu")
    key_gpu = gpu._key(src_gpu, gpu.options.halide_target("cuda"), "cuda")
    assert key_cpu["source"] != key_gpu["source"]
    assert "cuda_capability_80" in key_gpu["target"] and "cuda" not in key_cpu["target"]
    other = HalideBackend(HalideOptions(target="host-cuda-cuda_capability_86"))
    assert other.options.halide_target("cuda") != gpu.options.halide_target("cuda")
    li = HalideBackend(HalideOptions(schedule="Li2018", target=CUDA)).codegen(cuda_spec)
    assert li.source != src_gpu.source and 'SCHEDULE = "Li2018"' in li.source


def test_cuda_kernel_library_and_runtime_build_and_load_without_a_gpu() -> None:
    from polyduct_halide import aot

    backend = HalideBackend(HalideOptions(target=CUDA))
    kernel = backend.load([backend.codegen(_on_cuda(_sum_spec()))])["rowsum"]
    assert callable(kernel)
    runtime = aot.runtime(backend.options.halide_target("cuda"))
    # the CUDA runtime, linked with the context/stream glue, its hooks installed
    assert runtime.device_interface != 0
    assert hasattr(runtime.lib, "polyduct_cuda_acquire_context")


def _bucketize_spec(dtype: torch.dtype) -> KernelSpec:
    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        start = ops.index_expr(sympy.Integer(0), torch.int64)
        found = ops.bucketize(ops.load("v", x[0]), ("bnd", 4, 4, 1), start, torch.int64, False)
        ops.store("out", x[0], found)

    name = f"bucketize_{str(dtype).removeprefix('torch.')}"
    buffers = (
        buf("v", "in", 5, dtype),
        buf("bnd", "in", 4, dtype),
        buf("out", "out", 5, torch.int64),
    )
    return KernelSpec(name, (5,), (), (Stage("outer", body),), buffers)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.uint8, torch.int32])
def test_bucketize_never_reads_its_boundaries_on_the_host(
    dtype: torch.dtype, tmp_path: Path
) -> None:
    # The search's first probe is the same for every point; on a narrow type Halide's bounds
    # inference read it on the host to size the boundaries buffer (SIGSEGV on a CUDA tensor).
    stmt, _ = _compile(_on_cuda(_bucketize_spec(dtype)), tmp_path)
    _assert_all_on_gpu(stmt)


def _float64_spec(op: str) -> KernelSpec:
    """out = op(a, b[, c]) in float64; `mul_rn` is followed by an add (what LLVM would fuse)."""
    names = "abc" if op in ("fma", "mul_rn") else "ab"

    def body(ops: Any, x: Sequence[sympy.Expr], r: Sequence[sympy.Expr]) -> None:
        a, b, *c = (ops.load(name, x[0]) for name in names)
        value = ops.add(ops.mul_rn(a, b), *c) if op == "mul_rn" else getattr(ops, op)(a, b, *c)
        ops.store("out", x[0], value)

    f64 = torch.float64
    buffers = (*(buf(name, "in", 16, f64) for name in names), buf("out", "out", 16, f64))
    return KernelSpec(f"f64_{op}", (16,), (), (Stage("outer", body),), buffers)


def _ptx(stmt: str) -> str:
    """The PTX of the lowered statement's GPU kernels (every kernel: each ends in a `}` line)."""
    source = stmt.partition("buffer cuda_gpu_source_kernels = {")[2]
    return source.partition("halide_cuda_initialize_kernels")[0]


@pytest.mark.parametrize("op", ["fmod", "mod", "remainder", "mul_rn"])
def test_float64_error_free_products_are_not_fused_on_the_gpu(op: str, tmp_path: Path) -> None:
    # LLVM's NVPTX backend contracts a*b + c into fma.rn.f64 despite StrictFloat; the exact fmod
    # (and mul_rn's contract) needs every product rounded on its own: none of them may be fused.
    ptx = _ptx(_compile(_on_cuda(_float64_spec(op)), tmp_path)[0])
    assert "fma.rn.f64" not in ptx
    assert "mul.f64" in ptx and "xor.b64" in ptx  # products, made opaque by the run-time zero


def test_float64_fma_fuses_only_its_plain_fallback_on_the_gpu(tmp_path: Path) -> None:
    # The exact fma splits x and y (Dekker) and adds their products: each must be rounded on its
    # own. Only the plain x*y + z of out-of-range inputs may become one hardware fma.
    ptx = _ptx(_compile(_on_cuda(_float64_spec("fma")), tmp_path)[0])
    loaded = set(re.findall(r"ld\.global\S*\s+(%\w+),", ptx))
    fused = re.findall(r"fma\.rn\.f64\s+%\w+, (%\w+), (%\w+), (%\w+);", ptx)
    assert len(loaded) == 3 and fused  # (the regexes see the PTX: the check is not empty)
    assert all(set(operands) <= loaded for operands in fused)


def test_host_targets_get_no_run_time_zero() -> None:
    # the CPU code is left exactly as it was: StrictFloat keeps its products apart
    from polyduct_halide import runtime

    out = runtime.output("out", hl.Float(64))
    assert runtime.nofuse(hl.get_host_target(), [out]) is None
    assert runtime.nofuse(hl.Target(CUDA), [out]) is not None


def test_opaque_products_keep_their_values_on_the_host() -> None:
    # The GPU kernels' arithmetic, run on the host: XOR-ing the products with an output's min
    # (0) changes no bit of fma, fmod or mul_rn (float32 and float64).
    from polyduct_halide import hlmath

    rng = np.random.default_rng(0)
    data = [rng.standard_normal(64) * 10.0 ** rng.integers(-8, 8, 64) for _ in range(3)]
    x, y, z = (hl.Buffer(d) for d in data)
    i = hl.Var("i")
    plain, opaque = hl.Func("plain"), hl.Func("opaque")

    def values(nofuse: Any) -> hl.Tuple:
        a, b, c = x[i], y[i], z[i]
        f32 = hl.cast(hl.Float(32), a) * 3.0
        rn32 = hl.cast(hl.Float(64), hlmath.mul_rn(f32, hl.cast(hl.Float(32), b), True, nofuse))
        fma, fmod = hlmath.fma(a, b, c, nofuse), hlmath.fmod(a, b, nofuse)
        return hl.Tuple([fma, fmod, hlmath.mul_rn(a, b, True, nofuse), rn32])

    plain[i] = values(None)
    opaque[i] = values(plain.output_buffers()[0].dim(0).min())
    target = hl.get_host_target().with_feature(hl.TargetFeature.StrictFloat)
    got = hl.Pipeline([plain, opaque]).realize([64], target)
    for want, have in zip(got[:4], got[4:], strict=True):
        assert np.array_equal(np.asarray(want).view(np.int64), np.asarray(have).view(np.int64))
