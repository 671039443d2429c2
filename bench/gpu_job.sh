#!/usr/bin/env bash
# The GPU job, run on a CUDA machine from the repository root: install the core and the Triton and
# FX plugins into the machine's Python; run the Triton conformance suite on CUDA tensors (split into
# parallel processes by category and dtype, as compiling is CPU-bound) and the frontend's e2e suite
# with kernels=triton on CUDA; every 16-bit input of the exp family (bench/gpu_exhaustive.py);
# then bench/gpu.py (correctness checks and the benchmark against eager and Inductor) on a quiet
# GPU. Results in $OUT. POLYDUCT_GPU_COLD=1 runs the cold first-call
# table (`bench.gpu --cold`) instead; POLYDUCT_GPU_NO_BENCH=1 stops before bench/gpu.py.
set -uo pipefail
OUT=${OUT:-out/gpu}
LIMIT=${POLYDUCT_GPU_CONFORMANCE_LIMIT:-300}
mkdir -p "$OUT/conformance"
export PYTHONUNBUFFERED=1 POLYDUCT_CACHE_DIR=/tmp/polyduct-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton -e plugins/fx 2>&1 | tail -3
if [ -n "${POLYDUCT_GPU_COLD:-}" ]; then  # only the cold first-call table: about 8 minutes
    # (dynamo-aot, the Dynamo + AOTAutograd floor, only when named in POLYDUCT_GPU_COLD_VARIANTS:
    # compile seconds are read inside each first call)
    # POLYDUCT_GPU_COLD_PROFILE=1 adds cProfile summaries (and the profiler's overhead to times)
    python3 -m bench.gpu --cold ${POLYDUCT_GPU_COLD_PROFILE:+--profile} --out "$OUT/cold" \
        --cold-variants ${POLYDUCT_GPU_COLD_VARIANTS:-inductor polyduct polyduct-notune} \
        --cold-repeats "${POLYDUCT_GPU_COLD_REPEATS:-1}" \
        2>&1 | tail -12
    exit
fi

slice() {  # name, then conformance arguments
    local name=$1; shift
    # 27 processes at once: no compile workers each (their one-kernel graphs gain nothing)
    POLYDUCT_TRITON_COMPILE_WORKERS=0 timeout "$LIMIT" \
        python3 -m polyduct conformance --backend triton --device cuda \
        --json "$OUT/conformance/$name.json" "$@" > "$OUT/conformance/$name.txt" 2>&1
    echo "$name: exit $? $(tail -1 "$OUT/conformance/$name.txt")"
}
# POLYDUCT_GPU_CATEGORIES="reduction scan" runs only those categories (default: all, math split)
CATEGORIES=${POLYDUCT_GPU_CATEGORIES:-comparison bitwise dtype memory indexing reduction scan random other graph}
if [ -z "${POLYDUCT_GPU_CATEGORIES:-}" ]; then
    for dtype in float16 bfloat16 float32 float64; do  # math by dtype and initial: 16 slices
        for initial in abc defgh ilm nprstz; do
            slice "math-$dtype-$initial" --category math --dtypes "$dtype" --ops "^[$initial]" &
        done
    done
    slice math-int --category math --dtypes int8,int16,int32,int64,uint8,bool &
fi
for category in $CATEGORIES; do
    slice "$category" --category "$category" &
done
if [ -n "${POLYDUCT_GPU_E2E:-}" ]; then
    (POLYDUCT_TEST_DEVICE=cuda POLYDUCT_TEST_KERNELS=triton timeout "$LIMIT" \
        python3 -m pytest -q -p no:cacheprovider ${POLYDUCT_GPU_E2E_ARGS:-tests/e2e} \
        > "$OUT/e2e_cuda.txt" 2>&1
     echo "e2e: exit $? $(tail -1 "$OUT/e2e_cuda.txt")") &
    # why a dynamic-shape graph recompiles, if it does (Dynamo's recompile reasons)
    (TORCH_LOGS=recompiles POLYDUCT_TEST_DEVICE=cuda POLYDUCT_TEST_KERNELS=triton timeout "$LIMIT" \
        python3 -m pytest -s -q -p no:cacheprovider tests/e2e/test_training.py -k dynamic \
        > "$OUT/e2e_cuda_recompiles.txt" 2>&1) &
fi
wait
grep -h "^FAILED" "$OUT"/conformance/*.txt | sort | tee "$OUT/conformance_failed.txt" | head -60
tar -C "$OUT" -czf "$OUT/conformance.tgz" conformance && rm -rf "$OUT/conformance"
# every bfloat16 and float16 input of the exp family, against eager (beside Inductor's)
python3 -m bench.gpu_exhaustive --out "$OUT" > "$OUT/exhaustive.txt" 2>&1
echo "exhaustive: exit $? $(grep -c '"mismatches": 0,' "$OUT/exhaustive.txt") rows without mismatches"
[ -n "${POLYDUCT_GPU_NO_BENCH:-}" ] && exit  # the conformance and e2e checks only
python3 -m bench.gpu --out "$OUT" 2>&1 | tail -40
