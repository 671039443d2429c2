#!/usr/bin/env bash
# The Halide backend's GPU job, run on a CUDA machine from the repository root (see
# docs/backends/halide.md, "CUDA"). The halide wheel is too big to carry as it is: the job expects
# the wheel for the machine's python3 repacked as .gpu/halide-cpXY.tar.xz (the package and its
# dist-info, without the static libraries, cmake files and tools), unpacks it onto PYTHONPATH, installs the core and the Halide and FX plugins,
# then runs: a smoke test, the Halide conformance suite on CUDA tensors (parallel slices by
# category), and the frontend's e2e suite with kernels=halide on CUDA. Results in $OUT.
#   POLYDUCT_GPU_CATEGORIES="reduction scan"  only those conformance categories
#   POLYDUCT_GPU_E2E=0                        no e2e suite
set -uo pipefail
OUT=${OUT:-out/gpu-halide}
LIMIT=${POLYDUCT_GPU_LIMIT:-420}
mkdir -p "$OUT/conformance"
python3 --version | tee "$OUT/python.txt"
WHEEL=.gpu/halide-cp$(python3 -c 'import sys; print("%d%d" % sys.version_info[:2])').tar.xz
if [ ! -f "$WHEEL" ]; then
    echo "no $WHEEL: repack the halide wheel for this python3" | tee -a "$OUT/python.txt"
    exit 2
fi
SITE=/tmp/polyduct-halide-site
mkdir -p "$SITE" && tar -C "$SITE" -xJf "$WHEEL"
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export POLYDUCT_CACHE_DIR=/tmp/polyduct-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/halide -e plugins/fx 2>&1 | tail -3
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv | tee "$OUT/gpu.txt"
timeout 120 python3 plugins/halide/gpu_smoke.py 2>&1 | tee "$OUT/smoke.txt" | tail -20

slice() {  # name, then conformance arguments
    local name=$1; shift
    timeout "$LIMIT" python3 -X faulthandler -m polyduct conformance --backend halide --device cuda \
        --json "$OUT/conformance/$name.json" "$@" > "$OUT/conformance/$name.txt" 2>&1
    echo "$name: exit $? $(tail -1 "$OUT/conformance/$name.txt")"
}
CATEGORIES=${POLYDUCT_GPU_CATEGORIES:-comparison bitwise dtype memory indexing reduction scan random other graph}
if [ -z "${POLYDUCT_GPU_CATEGORIES:-}" ]; then
    for dtype in float16 bfloat16 float32 float64; do  # math by dtype: the slow compiles
        slice "math-$dtype" --category math --dtypes "$dtype" &
    done
    slice math-int --category math --dtypes int8,int16,int32,int64,uint8,bool &
fi
for category in $CATEGORIES; do
    slice "$category" --category "$category" &
done
if [ "${POLYDUCT_GPU_E2E:-1}" != 0 ]; then
    (POLYDUCT_TEST_DEVICE=cuda POLYDUCT_TEST_KERNELS=halide timeout "$LIMIT" \
        python3 -m pytest -q -p no:cacheprovider ${POLYDUCT_GPU_E2E_ARGS:-tests/e2e} \
        > "$OUT/e2e_cuda.txt" 2>&1
     echo "e2e: exit $? $(tail -1 "$OUT/e2e_cuda.txt")") &
fi
wait
grep -h "^FAILED\|^ERROR" "$OUT"/conformance/*.txt | sort > "$OUT/conformance_failed.txt"
head -40 "$OUT/conformance_failed.txt"
# one archive: the device tool brings back a limited number of files
tar -C "$OUT" -czf "$OUT/conformance.tgz" conformance && rm -rf "$OUT/conformance"
grep -h "^FAILED\|^ERROR" "$OUT/e2e_cuda.txt" 2>/dev/null | head -30
