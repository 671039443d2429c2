"""Probes for the elementwise rows of the case table: random + edge inputs, two layouts each."""

from __future__ import annotations

from typing import Any

import torch

from polyduct.conformance.inputs import FLOATS, INTS, SHAPE, as_layout, generate, seed_of
from polyduct.conformance.probe import (
    ORACLE_DEVICE,
    OpBody,
    OutSpec,
    Probe,
    access,
    dtype_name,
    out_like,
)
from polyduct.conformance.table import OpCase, Out

LAYOUTS = {"contiguous": ("contiguous",), "strided": ("transposed", "sliced")}


def resolve(out: Out, dtype: torch.dtype, params: tuple[Any, ...]) -> torch.dtype:
    """The concrete dtype of an output or argument spelled `out` in the table."""
    if out == "same":
        return dtype
    if out == "bool":
        return torch.bool
    if out == "param":
        param = params[0]
        assert isinstance(param, torch.dtype)
        return param
    assert isinstance(out, torch.dtype)
    return out


def reference(
    case: OpCase, args: list[torch.Tensor], params: tuple[Any, ...]
) -> tuple[torch.Tensor, ...]:
    """torch eager on the case's tensors; float16/bfloat16 compute in float32 (docs/conventions.md).

    torch's own half kernels are sometimes less accurate than float32-then-round (ndtr, erf on
    subnormals), and the op set promises float32 compute, so the oracle rounds a float32 result.
    A case may name another `upcast` dtype, or None to keep the narrow dtype (nextafter).
    """
    device = ORACLE_DEVICE.get()
    narrow = (torch.float16, torch.bfloat16)
    wide = case.upcast
    upcast = [a.to(wide) if wide is not None and a.dtype in narrow else a for a in args]
    result = case.ref(*(a.to(device) for a in upcast), *params)
    results = result if isinstance(result, tuple) else (result,)
    return tuple(r.cpu() for r in results)


def _inputs(case: OpCase, dtype: torch.dtype, params: tuple[Any, ...]) -> list[torch.Tensor]:
    gens = case.int_gens if case.int_gens is not None and dtype in INTS else case.gens
    arg_dtypes = case.arg_dtypes or ("same",) * len(gens)
    values = []
    for i, (gen, spelled) in enumerate(zip(gens, arg_dtypes, strict=True)):
        cross = i + 1 if len(gens) >= 2 and i < 2 else 0
        arg_dtype = resolve(spelled, dtype, params)
        seed = seed_of(case.op, dtype_name(dtype), i, params)
        values.append(generate(gen, arg_dtype, SHAPE, seed, cross))
    return values


def elementwise_probes(case: OpCase, dtype: torch.dtype) -> list[Probe]:
    """Every variant of `case` on `dtype`: each parameter tuple, contiguous and strided layouts."""
    probes = []
    for params in case.params:
        values = _inputs(case, dtype, params)
        expected = reference(case, values, params)
        outs = [resolve(o, dtype, params) for o in case.outs]
        want = {f"o{k}": e.to(d) for k, (e, d) in enumerate(zip(expected, outs, strict=True))}
        suffix = "".join(f",{dtype_name(p) if isinstance(p, torch.dtype) else p}" for p in params)
        for variant, layouts in LAYOUTS.items():
            inputs = {
                f"a{i}": as_layout(v, layouts[i % len(layouts)]) for i, v in enumerate(values)
            }
            out_layout = "transposed" if variant == "strided" else "contiguous"
            outputs: dict[str, OutSpec] = {
                f"o{k}": out_like(SHAPE, d, out_layout) for k, d in enumerate(outs)
            }
            body = OpBody(
                op=case.op,
                args=tuple(access(n, t) for n, t in inputs.items()),
                outs=tuple(access(n, o) for n, o in outputs.items()),
                params=params,
            )
            probes.append(
                Probe(
                    op=case.op,
                    dtype=dtype,
                    category=case.category,
                    variant=variant + suffix,
                    ranges=SHAPE,
                    stages=(("outer", body),),
                    inputs=inputs,
                    outputs=outputs,
                    expected=want,
                    tol=case.tolerance(dtype),
                )
            )
    return probes


def is_float(dtype: torch.dtype) -> bool:
    return dtype in FLOATS
