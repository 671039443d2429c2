#!/usr/bin/env bash
# The fuzz campaigns of a CUDA machine, run from the repository root (torch and Triton installed,
# no network): install the core and the C++ and Triton plugins into the machine's Python (and the
# Halide plugin where `import halide` works, e.g. from a wheel put on PYTHONPATH), then run `polyduct fuzz --backend triton --device cuda` and, beside it on the spare
# cores, the CPU campaigns listed in POLYDUCT_FUZZ_CPU_CAMPAIGNS, each under `timeout`. Results
# in $OUT: per campaign a directory (results.jsonl, shrunk reproducers fail_*.py, the summary
# table) and a log, and $OUT/summary.txt with the counts of every campaign (written even when a
# campaign ran out of time). A campaign cut short by the limit continues in a later run with
# `start` set to the first index its results.jsonl lacks.
#
#   OUT=out/gpu-fuzz POLYDUCT_FUZZ_GRAPHS=2000 POLYDUCT_FUZZ_JOBS=8 bash bench/gpu_fuzz_job.sh
#   OUT=out/gpu-fuzz POLYDUCT_FUZZ_GRAPHS=0 \
#       POLYDUCT_FUZZ_CPU_CAMPAIGNS="cpp:9201:0:10000:7 triton:9202:0:10000:7" \
#       bash bench/gpu_fuzz_job.sh
#
# POLYDUCT_FUZZ_GRAPHS   CUDA programs (2000; 0: none)  POLYDUCT_FUZZ_JOBS  CUDA workers (8)
# POLYDUCT_FUZZ_SEED     CUDA seed (1)                   POLYDUCT_FUZZ_START first CUDA index (0)
# POLYDUCT_FUZZ_CPU_CAMPAIGNS  space-separated backend:seed:start:graphs:jobs, run on the CPU
#                        (triton under its interpreter); default "cpp:1001:0:2000:3
#                        reference:2001:0:2000:3"; empty: none
# POLYDUCT_FUZZ_LIMIT    seconds each campaign may run (3000)
# POLYDUCT_FUZZ_NO_INSTALL=1  skip pip
set -uo pipefail
OUT=${OUT:-out/gpu-fuzz}
GRAPHS=${POLYDUCT_FUZZ_GRAPHS:-2000}
JOBS=${POLYDUCT_FUZZ_JOBS:-8}
SEED=${POLYDUCT_FUZZ_SEED:-1}
START=${POLYDUCT_FUZZ_START:-0}
CPU_CAMPAIGNS=${POLYDUCT_FUZZ_CPU_CAMPAIGNS-"cpp:1001:0:2000:3 reference:2001:0:2000:3"}
LIMIT=${POLYDUCT_FUZZ_LIMIT:-3000}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
CACHE=${POLYDUCT_CACHE_DIR:-/tmp/polyduct-fuzz-cache}
unset TRITON_INTERPRET
if [ -z "${POLYDUCT_FUZZ_NO_INSTALL:-}" ]; then
    plugins=(-e plugins/cpp -e plugins/triton)
    if "$PYTHON" -c "import halide" 2>/dev/null; then plugins+=(-e plugins/halide); fi
    "$PYTHON" -m pip install -q --no-deps --no-build-isolation -e . "${plugins[@]}" 2>&1 | tail -3
fi
"$PYTHON" -m polyduct backends > "$OUT/backends.txt" 2>&1

campaign() {  # name backend device seed start graphs jobs
    local name=$1 backend=$2 device=$3 seed=$4 start=$5 graphs=$6 jobs=$7
    local begun=$SECONDS
    POLYDUCT_CACHE_DIR="$CACHE-$name" timeout "$LIMIT" "$PYTHON" -m polyduct fuzz \
        --backend "$backend" --device "$device" --seed "$seed" --start "$start" \
        --graphs "$graphs" --jobs "$jobs" --timeout 300 --shrink-seconds 120 \
        --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc after $((SECONDS - begun)) s" | tee -a "$OUT/exits.txt"
}

if [ "$GRAPHS" -gt 0 ]; then
    campaign cuda-triton triton cuda "$SEED" "$START" "$GRAPHS" "$JOBS" &
fi
for spec in $CPU_CAMPAIGNS; do
    IFS=: read -r backend seed start graphs jobs <<< "$spec"
    # kernels on the CPU run one thread each: the cores are the campaigns' workers
    if [ "$backend" = triton ]; then
        TRITON_INTERPRET=1 OMP_NUM_THREADS=1 \
            campaign "cpu-$backend" "$backend" cpu "$seed" "$start" "$graphs" "$jobs" &
    else
        OMP_NUM_THREADS=1 campaign "cpu-$backend" "$backend" cpu "$seed" "$start" "$graphs" "$jobs" &
    fi
done
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
    done = sorted(r["index"] for r in rows)
    span = f"indices {done[0]}..{done[-1]}" if done else "no programs"
    gaps = sorted(set(range(done[0], done[-1] + 1)) - set(done)) if done else []
    print(f"{results.parent.name}: {len(rows)} graphs, {span}, {len(gaps)} missing inside "
          f"({parts}); {rate:.2f} graphs/s per worker")
    for r in rows:
        if r["status"] in ("mismatch", "crash", "timeout"):
            first = (r["detail"].strip().splitlines() or [""])[0][:160]
            print(f"  g{r['index']} {r['status']}: {first}  {r['repro']}")
EOF
cat "$OUT/summary.txt"
