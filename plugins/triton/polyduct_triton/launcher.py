"""The Python launcher of a generated kernel: sizes -> config -> grid -> launch -> checks.

The launcher takes `(*tensors, *sizes)` (the calling convention of `polyduct.kernel`), computes
xnumel/rnumel and the index width from the sizes, picks a config (a heuristic for small problems
and under the interpreter; for large problems on GPUs a short benchmark of at most 3 candidates
once per shape class, the others kept only where the heuristic's kernel takes 0.05 ms or more;
where compile workers build the candidates, launches run the heuristic config until they have
all compiled), computes its grid and launches (through torch's static CUDA launcher where it can).
Index-check failures recorded by the kernel are raised here as `KernelIndexError`, or on a GPU
by default asserted on the device (`KernelRuntime.check`).

`render_launcher` writes a module's facts, its `KernelRuntime` and its `_shape`, `jobs` and
`launch`; the runtime they call (kernel_runtime.py) is an ordinary module every kernel imports.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any

import sympy
import torch
import triton

from polyduct.codegen import string_literal
from polyduct.indexing import PythonIndexPrinter, product
from polyduct.kernel import KernelSpec
from polyduct_triton.context import KernelContext
from polyduct_triton.kernel_runtime import LAUNCH_LOCK, flag_slot

HEAVY_LINES = 400  # past it a kernel is HEAVY: one element per thread
LIGHT_LINES = 48  # up to it a kernel is LIGHT: 16-bit types take 16 bytes per pointwise thread


def jit(fn: Any) -> Any:
    """`triton.jit` for the functions of a generated module, which finds their source lines
    without tokenizing them: Triton reads a function's lines with `inspect.getsourcelines`,
    which runs Python's tokenizer over the function (2-3 ms for a kernel on a 2-core CPU, most
    of a module's import, paid in the process and in each compile worker: row_sum's module
    imported in 4.2 ms with it, 1.4 ms without). In a generated module a function ends before
    the next line that starts at column 0 with code, which gives inspect's lines (all 376
    functions of the conformance kernels; a test checks kernels and prelude helpers).
    `inspect.getsourcelines` is swapped only while Triton wraps `fn`, and answers as before for
    any other object."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno - 1  # the decorator's line, as inspect counts
    end = first
    while end < len(lines) and not lines[end].startswith("def "):
        end += 1  # past the decorators
    end += 1
    while end < len(lines) and (lines[end][:1] in (" ", "\t", "\n", "#")):
        end += 1
    while end > first + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # trailing blank lines, and comments at column 0, are not the function's
    found = (lines[first:end], first + 1)

    def getsourcelines(obj: Any) -> tuple[list[str], int]:
        return found if obj is fn else original(obj)

    with LAUNCH_LOCK:  # the swap is process-wide: one thread at a time
        original = inspect.getsourcelines
        inspect.getsourcelines = getsourcelines
        try:
            return triton.jit(fn)
        finally:
            inspect.getsourcelines = original


def _py(ctx: KernelContext, expr: sympy.Expr) -> str:
    return str(PythonIndexPrinter().doprint(sympy.sympify(expr).xreplace(ctx.rename)))


def _arg(dtype: torch.dtype, name: str, interpret: bool) -> str:
    # Under the interpreter bfloat16 travels as int16 bits and kernels convert exactly (see
    # prelude._bf16_bits: numpy's own conversion flushes subnormals); compiled kernels load and
    # store bfloat16 natively (one hardware conversion instead of ~10 integer ops per element).
    return f"{name}.view(torch.int16)" if dtype == torch.bfloat16 and interpret else name


# Kernels calling only these ops compile with FP contraction (a*b+c as one fma, as Inductor and
# CUDA's own kernels do): none of them relies on a product being rounded on its own. Any other op
# (pow's double-double, exact fmod/remainder, mul_rn, the special functions' error-free
# transforms) keeps the whole kernel uncontracted, with the interpreter's roundings.
CONTRACTIBLE = frozenset({
    "load", "store", "store_reduction", "reduction", "index_expr", "constant", "to_dtype",
    "to_dtype_bitcast", "indirect_indexing", "check_bounds", "masked", "where", "identity",
    "add", "sub", "mul", "neg", "abs", "relu", "maximum", "minimum", "truediv", "reciprocal",
    "square", "sigmoid", "exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt",
    "erf", "expm1", "log1p", "floor", "ceil", "trunc",  # libdevice's or exact when compiled
    "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not", "isnan",
})


def _static_jobs(spec: KernelSpec, ctx: KernelContext) -> list[str]:
    # The kernel's arguments as a first launch passes them, dtypes in place of tensors.
    if spec.size_args:
        return ["    return []"]
    dtypes = [str(b.dtype) for b in spec.args]
    err = ", torch.int64" if ctx.checks else ""  # the index-check flags
    return ["    xnumel, rnumel, idx64 = _SHAPE",
            f"    args = ({''.join(d + ', ' for d in dtypes)}xnumel, rnumel{err})",
            "    return RUNTIME.jobs(args, xnumel, rnumel, idx64)"]


def render_launcher(
    spec: KernelSpec, ctx: KernelContext, body_lines: int, digest: str, autotune: bool = True
) -> str:
    """Python source of the launcher (module constants, runtime helpers and `launch`).

    `body_lines` is the length of the kernel body: past HEAVY_LINES the kernel is HEAVY, up
    to LIGHT_LINES it is LIGHT.
    `digest` is the SHA-256 of the module's source above the launcher (the kernel and its
    helpers): the kernel's key in Triton's caches. Without `autotune` the launcher never
    benchmarks candidates.
    """
    tensors = [ctx.arg(b.name) for b in spec.args]
    sizes = [ctx.args[s.name] for s in spec.size_args]
    written = [i for i, b in enumerate(spec.args) if b.role in ("out", "inout")]
    numels = [_py(ctx, b.numel) for b in spec.args] + [_py(ctx, product(spec.ranges))]
    checked = ", ".join(string_literal(c.buffer) for c in ctx.checks)
    pairs = zip(spec.args, tensors, strict=True)
    asserts = ", ".join(
        f"{c.slot}: {string_literal(c.message)}" for c in ctx.checks if c.message is not None
    )
    shape = f"_shape({', '.join(sizes)})" if sizes else "_SHAPE"
    lines = [
        f"STATIC_SIZES = {not spec.size_args}",
        f"KERNEL_DIGEST = {string_literal(digest)}",
        "RUNTIME = KernelRuntime(_kernel, KernelFacts(",
        f"    name=NAME, path=__file__, interpret=INTERPRET, kind={string_literal(spec.kind)},",
        f"    heavy={body_lines > HEAVY_LINES}, light={body_lines <= LIGHT_LINES},",
        f"    itemsize={max((b.dtype.itemsize for b in spec.args), default=4)},",
        f"    block_merges={ctx.block_merges}, fp_fusion={ctx.ops_used <= CONTRACTIBLE},",
        f"    autotune={autotune}, digest=KERNEL_DIGEST, written=frozenset({written!r}),",
        f"    checked=({checked}{',' if ctx.checks else ''}), asserts={{{asserts}}},",
        "))",
        "_run = RUNTIME.run",
        "",
        "",
        f"def _shape({', '.join(sizes)}):",
        f"    xnumel = int({_py(ctx, product(spec.ranges))})",
        f"    rnumel = int({_py(ctx, product(spec.reduction_ranges))})",
        f"    return xnumel, rnumel, max([{', '.join(numels)}, xnumel * max(rnumel, 1)]) >= 2**31 - 1",
        *(["", "", "_SHAPE = _shape()  # static sizes: computed once"] if not sizes else []),
        "",
        "",
        "def jobs():",
        '    """What compile workers can build before the first launch: known when sizes are."""',
        *_static_jobs(spec, ctx),
        "",
        "",
        f"def launch({', '.join(tensors + sizes)}):",
        f"    xnumel, rnumel, idx64 = {shape}",
        "    if xnumel <= 0:",
        "        return",
        f"    tensors = ({', '.join(_arg(b.dtype, t, ctx.interpret) for b, t in pairs)}{',' if tensors else ''})",
        f"    sizes = ({', '.join(sizes)}{',' if sizes else ''})",
    ]
    if ctx.checks:
        like = tensors[0] if tensors else "None"
        lines.append(f"    err = RUNTIME.flags({like}, {flag_slot(len(ctx.checks))})")
    else:
        lines.append("    err = None")
    lines.append("    _run(tensors, sizes, xnumel, rnumel, idx64, err)")
    if ctx.checks:
        lines.append("    RUNTIME.check(err)")
    return "\n".join(lines)
