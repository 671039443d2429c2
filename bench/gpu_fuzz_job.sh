#!/usr/bin/env bash
# The fuzz campaign on a CUDA machine, run from the repository root (torch and Triton installed, no
# Halide, no network): install the core and the C++ and Triton plugins into the machine's Python,
# then run `polyduct fuzz --backend triton --device cuda` and, beside it on the spare cores, a C++
# and a reference campaign on other seeds, each under `timeout`. Results in $OUT: per campaign a
# directory (results.jsonl, shrunk reproducers fail_*.py, the summary table) and a log, and
# $OUT/summary.txt with the counts of every campaign (written even when a campaign ran out of time).
#
#   OUT=out/gpu-fuzz POLYDUCT_FUZZ_GRAPHS=2000 POLYDUCT_FUZZ_JOBS=8 bash bench/gpu_fuzz_job.sh
#
# POLYDUCT_FUZZ_GRAPHS   CUDA programs (default 2000)      POLYDUCT_FUZZ_JOBS      CUDA workers (8)
# POLYDUCT_FUZZ_CPU_GRAPHS programs per CPU campaign (2000) POLYDUCT_FUZZ_CPU_JOBS workers each (3)
# POLYDUCT_FUZZ_LIMIT    seconds each campaign may run (3000)  POLYDUCT_FUZZ_SEED  CUDA seed (1)
# POLYDUCT_FUZZ_CPU=0    no CPU campaigns                  POLYDUCT_FUZZ_NO_INSTALL=1  skip pip
set -uo pipefail
OUT=${OUT:-out/gpu-fuzz}
GRAPHS=${POLYDUCT_FUZZ_GRAPHS:-2000}
JOBS=${POLYDUCT_FUZZ_JOBS:-8}
CPU_GRAPHS=${POLYDUCT_FUZZ_CPU_GRAPHS:-2000}
CPU_JOBS=${POLYDUCT_FUZZ_CPU_JOBS:-3}
LIMIT=${POLYDUCT_FUZZ_LIMIT:-3000}
SEED=${POLYDUCT_FUZZ_SEED:-1}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 POLYDUCT_CACHE_DIR=${POLYDUCT_CACHE_DIR:-/tmp/polyduct-fuzz-cache}
unset TRITON_INTERPRET
if [ -z "${POLYDUCT_FUZZ_NO_INSTALL:-}" ]; then
    "$PYTHON" -m pip install -q --no-deps --no-build-isolation -e . -e plugins/cpp -e plugins/triton \
        2>&1 | tail -3
fi
"$PYTHON" -m polyduct backends > "$OUT/backends.txt" 2>&1

campaign() {  # name backend device seed graphs jobs
    local name=$1 backend=$2 device=$3 seed=$4 graphs=$5 jobs=$6
    local start=$SECONDS
    timeout "$LIMIT" "$PYTHON" -m polyduct fuzz --backend "$backend" --device "$device" \
        --seed "$seed" --graphs "$graphs" --jobs "$jobs" --timeout 300 --shrink-seconds 120 \
        --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc after $((SECONDS - start)) s" | tee -a "$OUT/exits.txt"
}

campaign cuda-triton triton cuda "$SEED" "$GRAPHS" "$JOBS" &
if [ "${POLYDUCT_FUZZ_CPU:-1}" != 0 ]; then
    # kernels on the CPU run one thread each: the cores are the campaigns' workers
    OMP_NUM_THREADS=1 campaign cpu-cpp cpp cpu "$((SEED + 1000))" "$CPU_GRAPHS" "$CPU_JOBS" &
    OMP_NUM_THREADS=1 campaign cpu-reference reference cpu "$((SEED + 2000))" "$CPU_GRAPHS" \
        "$CPU_JOBS" &
fi
wait

# counts from results.jsonl (a campaign stopped by `timeout` writes no summary table of its own)
"$PYTHON" - "$OUT" > "$OUT/summary.txt" <<'EOF'
import json
import sys
from collections import Counter
from pathlib import Path

out = Path(sys.argv[1])
for results in sorted(out.glob("*/results.jsonl")):
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    counts = Counter(r["status"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    rate = len(rows) / seconds if seconds else 0.0
    parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"{results.parent.name}: {len(rows)} graphs ({parts}); {rate:.2f} graphs/s per worker")
    for r in rows:
        if r["status"] in ("mismatch", "crash", "timeout"):
            first = (r["detail"].strip().splitlines() or [""])[0][:160]
            print(f"  g{r['index']} {r['status']}: {first}  {r['repro']}")
EOF
cat "$OUT/summary.txt"
