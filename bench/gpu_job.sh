#!/usr/bin/env bash
# The GPU job, run on a CUDA machine from the repository root: install the core and the Triton and
# FX plugins into the machine's Python, run the Triton conformance suite on CUDA tensors, then
# bench/gpu.py (correctness checks and the benchmark against eager and Inductor). Results in $OUT.
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 POLYDUCT_CACHE_DIR=/tmp/polyduct-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton -e plugins/fx 2>&1 | tail -3
python3 -m polyduct conformance --backend triton --device cuda \
    --json "$OUT/conformance_cuda.json" 2>&1 | tee "$OUT/conformance_cuda.txt" | tail -30
python3 -m bench.gpu --out "$OUT" 2>&1 | tail -40
