#!/usr/bin/env bash
# The model suite on a CUDA machine (torch 2.11 / triton 3.6 there; transformers is installed on it),
# from the repository root: correctness of polyduct-triton on every model (forward, training step,
# dynamic shapes, export) in float32 and bfloat16, several models at a time; then the timing phase
# against eager and Inductor, one model at a time on a quiet GPU. Results in $OUT.
set -uo pipefail
OUT=${OUT:-out/gpu-models}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 POLYDUCT_CACHE_DIR=/tmp/polyduct-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton -e plugins/fx 2>&1 | tail -3
LIMIT=${POLYDUCT_GPU_MODELS_LIMIT:-240}
JOBS=${POLYDUCT_GPU_MODELS_JOBS:-8}
for dtype in ${POLYDUCT_GPU_MODELS_DTYPES:-float32 bfloat16}; do
    timeout "$LIMIT" python3 -m bench models --device cuda --dtype "$dtype" \
        --variants eager,polyduct-triton --phases forward,train,dynamic,export --skip-cold \
        --jobs "$JOBS" --timeout $((LIMIT - 20)) --no-report \
        --out "$OUT/models-cuda-$dtype-correctness.json" > "$OUT/correctness-$dtype.txt" 2>&1
    echo "correctness $dtype: exit $? $(tail -1 "$OUT/correctness-$dtype.txt")"
done
if [ -n "${POLYDUCT_GPU_MODELS_TIMING:-}" ]; then  # models to time, comma-separated
    for dtype in ${POLYDUCT_GPU_MODELS_TIMING_DTYPES:-float32 bfloat16}; do
        timeout "${POLYDUCT_GPU_MODELS_TIMING_LIMIT:-$LIMIT}" python3 -m bench models --device cuda --dtype "$dtype" \
            --models "$POLYDUCT_GPU_MODELS_TIMING" --variants eager,inductor,polyduct-triton \
            --phases timing --skip-cold --timeout $((LIMIT - 20)) --no-report \
            --out "$OUT/models-cuda-$dtype-timing.json" > "$OUT/timing-$dtype.txt" 2>&1
        echo "timing $dtype: exit $? $(tail -1 "$OUT/timing-$dtype.txt")"
    done
fi
if [ -n "${POLYDUCT_GPU_CHAIN:-}" ]; then  # one elementwise op chained, against Inductor
    timeout 150 python3 -m bench.gpu_chain --ops "$POLYDUCT_GPU_CHAIN" --json "$OUT/chain.json" \
        > "$OUT/chain.txt" 2>&1
    echo "chain: exit $?"; cat "$OUT/chain.txt" | grep -v Warning | tail -24
fi
