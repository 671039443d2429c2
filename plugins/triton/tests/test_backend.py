"""Registration, options, cache and error reporting of the Triton backend."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from kernels import backend, buf, copy_spec, cuda_module, cuda_source, spec

from polyduct import plugins
from polyduct.cache import Cache, import_module_file
from polyduct.errors import InvalidOption, KernelCompileError
from polyduct.kernel import KernelSource, check_complete
from polyduct.ops import OP_NAMES
from polyduct_triton import TritonBackend, TritonOptions
from polyduct_triton.ops import TritonOps


def test_entry_point_registers_backend() -> None:
    registry = plugins.load().kernel_backends
    assert "triton" in registry.names()
    entry = registry.get("triton")
    assert entry.backend_cls is TritonBackend
    made = entry.factory({"interpret": True})
    assert isinstance(made, TritonBackend) and made.options.interpret


def test_every_op_has_an_implementation() -> None:
    check_complete(TritonBackend)
    assert TritonBackend.ops_cls is TritonOps
    assert set(OP_NAMES) - set(TritonBackend.caps.unsupported) <= set(dir(TritonOps))


def test_options_are_validated() -> None:
    with pytest.raises(InvalidOption):
        TritonOptions.from_mapping({"block": 3})
    with pytest.raises(InvalidOption):
        TritonOptions(interpret="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="autotune"):
        TritonOptions.from_mapping({"autotune": "no"})
    assert not TritonOptions.from_mapping({"autotune": False}).autotune


@pytest.mark.parametrize("autotune", [True, False])
def test_autotune_option_decides_whether_large_problems_benchmark(
    tmp_path: Path, autotune: bool
) -> None:
    """The CUDA launcher of a 2**22-element pointwise kernel benchmarks its candidates unless
    `autotune=False`, which takes the heuristic config and compiles nothing else."""
    module = cuda_module(tmp_path, f"tune_{autotune}", autotune)
    tuned: list[Any] = []
    module.RUNTIME._tune = lambda configs, *rest: tuned.append(configs) or configs[-1]
    cuda_tensor = SimpleNamespace(device=torch.device("cuda", 0))
    chosen = module.RUNTIME._pick([cuda_tensor], (), 1 << 22, 0, False, None)
    candidates = module.RUNTIME.configs(1 << 22, 0)
    assert len(candidates) > 1
    assert chosen == (candidates[-1] if autotune else candidates[0])
    assert tuned == ([candidates] if autotune else [])


@pytest.mark.parametrize(("dtype", "per_thread", "light"), [
    (torch.float64, 1, 1), (torch.float32, 2, 2), (torch.bfloat16, 2, 8), (torch.int8, 2, 8),
])
def test_pointwise_configs_follow_the_element_width(
    tmp_path: Path, dtype: torch.dtype, per_thread: int, light: int
) -> None:
    """On GPUs a pointwise thread holds 8 bytes of the kernel's widest type, or of 32-bit values
    where that is narrower (elements per thread drive Triton's compile time, not the kernel's
    speed), 16 bytes in a short (LIGHT) kernel of 16-bit types; candidates: half the block, then
    half the elements per thread; small problems take a smaller block."""
    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.abs(ops.load("a", x[0])))

    a = torch.zeros(7, dtype=dtype)
    s = spec(f"w{per_thread}", [7], [], [("outer", body)], [buf("a", a, "in"), buf("o", a, "out")])
    source = cuda_source(tmp_path, s)
    module = import_module_file(_write(tmp_path, source), f"width_{per_thread}")
    runtime = module.RUNTIME
    assert runtime.facts.light  # a one-line body
    for expect in (light, per_thread):
        configs = module.RUNTIME.configs(1 << 26, 0)
        assert [xb // (32 * warps) for xb, _, warps in configs] == (
            [expect, expect] + ([expect // 2] if expect > 1 else []))
        assert module.RUNTIME.configs(64, 0) == [(64, 1, 2)]
        runtime.facts = dataclasses.replace(runtime.facts, light=False)


def test_persistent_rows_hold_32_bytes_per_thread(tmp_path: Path) -> None:
    """A persistent 4096-element row runs at 16 warps in float32, 8 in bfloat16 (heuristic
    first). bfloat16 also tries 16 warps and two rows per program; float32 tries the row looped
    in halves, unless a reduction merges per block (welford), which then tunes nothing."""
    module = cuda_module(tmp_path, "rows")
    runtime = module.RUNTIME
    runtime.facts = dataclasses.replace(runtime.facts, kind="reduction")
    for itemsize, merges, configs in (
        (2, False, [(1, 4096, 8), (1, 4096, 16), (2, 4096, 16)]),
        (2, True, [(1, 4096, 8), (1, 4096, 16), (2, 4096, 16)]),
        (4, False, [(1, 4096, 16), (1, 2048, 16)]),
        (4, True, [(1, 4096, 16)]),
    ):
        runtime.facts = dataclasses.replace(runtime.facts, itemsize=itemsize, block_merges=merges)
        assert module.RUNTIME.configs(16384, 4096) == configs, (itemsize, merges)


@pytest.mark.parametrize(("reduction", "merges"), [("sum", False), ("max", False),
                                                   ("welford_reduce", True), ("argmax", True)])
def test_block_merges_names_reductions_that_merge_per_block(
    tmp_path: Path, reduction: str, merges: bool
) -> None:
    def body(ops: Any, x: Any, r: Any) -> None:
        v = ops.reduction(torch.float32, torch.float32, reduction, ops.load("a", x[0] * 64 + r[0]))
        ops.store_reduction("o", x[0], v[0] if isinstance(v, tuple) else v)

    dtype = torch.int64 if reduction == "argmax" else torch.float32
    s = spec(f"merges_{reduction}", [8], [64], [("reduction", body)],
             [buf("a", torch.float32, "in", 512), buf("o", dtype, "out", 8)])
    source = cuda_source(tmp_path, s)
    assert f"block_merges={merges}" in source


def test_kernel_is_keyed_by_its_module_digest(tmp_path: Path) -> None:
    """A CUDA module's kernel carries the digest of the source above its launcher as Triton's
    cache key (no AST walk at the first launch); another kernel body gets another key."""
    def body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.neg(ops.load("a", x[0])))

    t = torch.randn(7)
    be = TritonBackend(TritonOptions(cache=Cache(tmp_path)))
    paths = []
    for s in (copy_spec("digest_a"),
              spec("digest_b", [7], [], [("outer", body)], [buf("a", t, "in"), buf("o", t, "out")])):
        text = be.codegen(dataclasses.replace(s, device="cuda")).source
        above = text[:text.index("STATIC_SIZES = ")]
        assert f'KERNEL_DIGEST = "{hashlib.sha256(above.encode()).hexdigest()}"' in text
        paths.append(tmp_path / f"{s.name}.py")
        paths[-1].write_text(text)
    out = _imported_under_real_jit(paths, "print(m._kernel.hash == m.KERNEL_DIGEST, m._kernel.hash)")
    assert out[0] == out[2] == "True" and out[1] != out[3]


def test_jit_finds_each_functions_source_lines_as_inspect_does(tmp_path: Path) -> None:
    """`launcher.jit` gives Triton a generated function's source lines without the tokenizer:
    for kernels and their prelude helpers (exp, the NaN-propagating max combine), under Triton's
    real JIT, the lines and first line number are inspect's."""
    def exp_body(ops: Any, x: Any, r: Any) -> None:
        ops.store("o", x[0], ops.exp(ops.load("a", x[0])))

    def max_body(ops: Any, x: Any, r: Any) -> None:
        ops.store_reduction("o", x[0], ops.reduction(
            torch.float32, torch.float32, "max", ops.load("a", x[0] * 64 + r[0])))

    paths = []
    for s in (spec("lines_exp", [7], [], [("outer", exp_body)],
                   [buf("a", torch.float32, "in", 7), buf("o", torch.float32, "out", 7)]),
              spec("lines_max", [8], [64], [("reduction", max_body)],
                   [buf("a", torch.float32, "in", 512), buf("o", torch.float32, "out", 8)])):
        paths.append(tmp_path / f"{s.name}.py")
        paths[-1].write_text(cuda_source(tmp_path, s))
    out = _imported_under_real_jit(paths, (
        "fns = [f for f in vars(m).values() if isinstance(f, triton.JITFunction)]; "
        "print(len(fns), all((f.raw_src, f.starting_line_number) == "
        "inspect.getsourcelines(f.fn) for f in fns))"))
    assert out[1] == out[3] == "True" and int(out[0]) >= 2 and int(out[2]) >= 2, out


def _imported_under_real_jit(paths: list[Path], statement: str) -> list[str]:
    """The words `statement` prints for each module of `paths` (bound to `m`), imported in a
    process under Triton's real JIT (without the interpreter)."""
    script = ("import inspect, sys, triton; from pathlib import Path\n"
              "from polyduct.cache import import_module_file\n"
              "for i, p in enumerate(sys.argv[1:]):\n"
              "    m = import_module_file(Path(p), f'm{i}')\n"
              f"    {statement}\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", script, *map(str, paths)], env=env,
                          capture_output=True, text=True, timeout=300, check=True).stdout.split()


def _write(directory: Path, text: str) -> Path:
    path = directory / "kernel_under_test.py"
    path.write_text(text)
    return path


def test_deterministic_source_and_warm_cache(tmp_path: Path) -> None:
    be = backend(tmp_path)
    s = copy_spec("copy")
    src = be.codegen(s)
    assert src.source == backend(tmp_path).codegen(copy_spec("copy")).source
    fn = be.load([src])["copy"]
    a, o = torch.tensor([-1.0, 2.0, -0.0, 3.0, -4.0, 5.0, -6.0]), torch.empty(7)
    fn(a, o)
    assert torch.equal(o, a.abs())
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    be.load([src])  # warm hit: nothing new is written
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == files


def test_compile_error_names_kernel_and_source(tmp_path: Path) -> None:
    be = backend(tmp_path)
    good = be.codegen(copy_spec("broken"))
    bad = KernelSource("broken", "triton", good.source.replace("tl.abs(", "tl.no_such_fn("))
    fn = be.load([bad])["broken"]
    with pytest.raises(KernelCompileError) as info:
        fn(torch.randn(7), torch.empty(7))
    assert "broken" in str(info.value) and "kernel.py" in str(info.value)


def _unary_spec(name: str, op: str) -> Any:
    def body(ops: Any, x: Any, r: Any) -> None:
        a = ops.load("a", x[0])
        ops.store("o", x[0], ops.add(ops.mul(getattr(ops, op)(a, a), a), a))

    a = torch.randn(5)
    return spec(name, [5], [], [("outer", body)], [buf("a", a, "in"), buf("o", a, "out")])


@pytest.mark.parametrize(("op", "fused"), [("maximum", True), ("mul", True), ("pow", False),
                                           ("fmod", False), ("mul_rn", False)])
def test_fp_fusion_only_for_contraction_safe_ops(tmp_path: Path, op: str, fused: bool) -> None:
    """a*b+c may become one fma unless some op of the kernel needs its products rounded alone."""
    source = backend(tmp_path).codegen(
        dataclasses.replace(_unary_spec(f"k_{op}", op), device="cuda")).source
    assert f"fp_fusion={fused}" in source
    module = import_module_file(_write(tmp_path, source), f"k_{op}")
    compiled: list[dict[str, Any]] = []
    module._kernel.warmup = lambda *args, **options: compiled.append(options)
    module.RUNTIME.warmup((64, 1, 2), (torch.float32, torch.float32, 5, 1), 1, False, True)
    assert compiled[0]["enable_fp_fusion"] is fused  # what Triton compiles the kernel with


def test_modules_carry_only_the_prelude_helpers_their_kernel_calls(tmp_path: Path) -> None:
    from polyduct_triton.prelude import prelude_for

    # callees of callees come along, a combine function passed by name counts, prelude order
    text = prelude_for("y = _fpow(a, b)\nz = tl.reduce(x, 1, _prod_combine)")
    assert re.findall(r"def (\w+)\(", text) == [
        "_prod_combine", "_ipow", "_two_prod", "_log_dd", "_pow_dd", "_fpow"]
    assert prelude_for("y = a + b") == ""
    source = backend(tmp_path).codegen(copy_spec("copy")).source
    assert re.findall(r"def (_\w+)\(", source)[0] == "_kernel"  # abs needs no helper


def test_indirect_masks_come_in_name_order() -> None:
    """An index on two indirect values masks with both checks in name order: sympy's set of
    free symbols iterates in hash order, which changes from one process to the next."""
    import sympy

    from polyduct_triton.context import Check, KernelContext
    from polyduct_triton.ops import TritonOps

    ctx = KernelContext(copy_spec("masks"), interpret=True)
    ctx.indirect = {"tmp7": Check(0, "7"), "tmp3": Check(1, "7")}
    tmp3, tmp7, x0 = sympy.symbols("tmp3 tmp7 x0")
    assert TritonOps(ctx)._mask_for(7 * tmp7 + tmp3 + x0, "a") == "xmask & tmp3_ok & tmp7_ok"
    assert ctx.indirect["tmp3"].buffer == ctx.indirect["tmp7"].buffer == "a"


def test_cpu_kernels_without_the_interpreter_are_a_clear_error(tmp_path: Path) -> None:
    """Triton runs CPU tensors only in its interpreter. Without TRITON_INTERPRET=1 the kernel
    used to fail inside Triton ('0 active drivers', or on a GPU machine 'Pointer argument cannot
    be accessed from Triton'); it is refused naming the kernel and both ways out."""
    program = (
        "import torch, polyduct\n"
        "f = torch.compile(lambda x: x.sin() + 1, backend='polyduct', "
        "options={'kernels': 'triton'})\n"
        "f(torch.randn(5))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["POLYDUCT_CACHE_DIR"] = str(tmp_path)
    run = subprocess.run([sys.executable, "-c", program], env=env, check=False,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "KernelCompileError" in run.stderr and "'kernel0'" in run.stderr, run.stderr[-2000:]
    assert "TRITON_INTERPRET=1" in run.stderr and "kernels='cpp'" in run.stderr
