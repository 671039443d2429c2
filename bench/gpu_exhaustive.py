"""Every 16-bit input: polyduct-triton's and Inductor's bfloat16 and float16 exp-family ops against
eager, on a GPU.

Each op runs on all 65536 bit patterns of the dtype (NaN, +-inf, +-0, subnormals included),
compiled by polyduct-triton and by Inductor, and is compared element by element with eager:
mismatching elements, the largest distance in ulps of the dtype, and whether NaN, infinities and
zeros fall where eager has them. Checks that compiled kernels' cheaper exp for 16-bit floats
(`tl.exp`, docs/backends/triton.md) keeps the conformance tolerance (1 ulp) on every input.

    python -m bench.gpu_exhaustive [--out DIR] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench.variants import fresh
from polyduct.conformance.tolerance import ulp_distance

OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": torch.exp,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "tanh": torch.tanh,
    "expm1": torch.expm1,
    "elu": F.elu,
}


def every_value(dtype: torch.dtype, device: str) -> torch.Tensor:
    """All 65536 values of a 16-bit float dtype, in bit-pattern order."""
    bits = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16)
    return bits.view(dtype).to(device)


def compare(x: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> dict[str, Any]:
    """Mismatching elements, the worst ulp distance among numbers and its input, and whether
    NaN, infinities and zeros fall where eager has them."""
    numbers = ~want.isnan() & ~got.isnan()
    ulps = ulp_distance(got[numbers], want[numbers])
    special = numbers & (~torch.isfinite(want) | (want == 0))
    return {
        "mismatches": int((ulps > 0).sum()) + int((got.isnan() != want.isnan()).sum()),
        "max_ulp": float(ulps.max()),
        "worst_input": float(x[numbers][ulps.argmax()]),
        "nan_match": bool(torch.equal(got.isnan(), want.isnan())),
        "specials_match": bool(torch.equal(got[special], want[special])),
    }


def run(device: str) -> list[dict[str, Any]]:
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        x = every_value(dtype, device)
        for name, fn in OPS.items():
            want = fn(x)
            for variant in ("polyduct-triton", "inductor"):
                if variant == "inductor":
                    compiled = torch.compile(fresh(fn))
                else:
                    compiled = torch.compile(fresh(fn), backend="polyduct",
                                             options={"kernels": "triton"})
                row: dict[str, Any] = {"op": name, "dtype": str(dtype).removeprefix("torch."),
                                       "variant": variant}
                try:
                    row.update(compare(x, compiled(x), want))
                except Exception as exc:  # noqa: BLE001 - a failing variant is reported
                    row["error"] = f"{type(exc).__name__}: {exc}"[:500]
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/gpu"))
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    rows = run(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_exhaustive.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
