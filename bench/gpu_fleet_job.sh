#!/usr/bin/env bash
# The CUDA-graphs and AOT job, run from the repository root on a CUDA machine whose Python already
# has torch, triton and transformers (no network needed): install the core and the cpp, Triton and
# FX plugins, then
#   1. the CUDA tests: CUDA graphs (tests/test_cudagraphs.py), Triton AOT packages loaded in a
#      fresh process with no compiler on PATH (tests/test_aot_triton.py), and one compiled Triton
#      function called from 8 threads at once (tests/test_threads.py), in parallel;
#   2. bench/aot.py --device cuda: a Triton package's load and first-call time against
#      torch._inductor.aoti_load_package (aot_cuda.json);
#   3. bench/reduce_overhead.py: per-call time at batch 1 (MLP, GPT-2 and Llama decoder steps) of
#      eager, Inductor mode="reduce-overhead", polyduct, polyduct mode="reduce-overhead"
#      (reduce_overhead.json, written after each model).
# Every step runs under `timeout`, within a budget for the whole job (POLYDUCT_FLEET_BUDGET_S,
# default 450 s: the job ends within 8 minutes); a failing step does not stop the others, and each
# step's exit status is printed and written to $OUT/summary.txt. Logs, JUnit XML and JSON results
# are written to $OUT. POLYDUCT_FLEET_AOT_S caps step 2 (default 120 s; AOTInductor's packaging of
# the model can take longer); POLYDUCT_FLEET_NO_TIMING=1 skips step 3 (when the GPU is shared).
set -u -o pipefail
OUT=${OUT:-out/gpu-fleet}
BUDGET=${POLYDUCT_FLEET_BUDGET_S:-450}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 POLYDUCT_CACHE_DIR=${POLYDUCT_CACHE_DIR:-/tmp/polyduct-fleet-cache}
PY=${PYTHON:-python3}
START=$(date +%s)
: > "$OUT/summary.txt"

say() { echo "$*" | tee -a "$OUT/summary.txt"; }

limit() {  # the seconds a step may take: its cap, or what is left of the budget
    local left=$((BUDGET - ($(date +%s) - START)))
    echo $(( $1 < left ? $1 : left ))
}

step() {  # name, cap in seconds, command...: run it under timeout, logged to $OUT/<name>.log
    local name=$1 cap=$2 t
    shift 2
    t=$(limit "$cap")
    if [ "$t" -lt 10 ]; then
        say "$name: skipped (job budget of ${BUDGET}s spent)"
        return
    fi
    local began=$(date +%s)
    timeout --kill-after=10 "$t" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    say "$name: exit $rc after $(( $(date +%s) - began ))s (limit ${t}s) $(tail -1 "$OUT/$name.log")"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    "$PY" -c "import sys, torch, triton; print(sys.version); print('torch', torch.__version__,
'cuda', torch.version.cuda, 'triton', triton.__version__)"
    "$PY" -c "import transformers; print('transformers', transformers.__version__)"
} > "$OUT/env.txt" 2>&1
say "env: $(tr '\n' ' ' < "$OUT/env.txt" | cut -c1-300)"

step install 120 "$PY" -m pip install --no-deps --no-build-isolation \
    -e . -e plugins/triton -e plugins/cpp -e plugins/fx

pytest_step() {  # name, cap, pytest arguments...
    local name=$1 cap=$2
    shift 2
    step "$name" "$cap" "$PY" -m pytest -q -rs -p no:cacheprovider \
        --junitxml="$OUT/$name.xml" "$@"
}
pytest_step test-cudagraphs 150 tests/test_cudagraphs.py &
pytest_step test-aot-triton 150 tests/test_aot_triton.py &
pytest_step test-threads-cuda 150 \
    tests/test_threads.py::test_one_triton_function_from_many_threads_on_cuda &
wait

step bench-aot-cuda "${POLYDUCT_FLEET_AOT_S:-120}" "$PY" -m bench.aot --device cuda --repeats 2 --out "$OUT/aot_cuda.json"
[ -n "${POLYDUCT_FLEET_NO_TIMING:-}" ] && { say "total: $(( $(date +%s) - START ))s"; exit; }
step bench-reduce-overhead 240 "$PY" -m bench.reduce_overhead \
    --models mlp gpt2 llama --budget 2 --out "$OUT/reduce_overhead.json"

say "total: $(( $(date +%s) - START ))s"
