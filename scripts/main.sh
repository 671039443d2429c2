#!/usr/bin/env bash
# Set up, then the main job: the conformance matrix of every installed backend, and a compiled
# example with its speedup over eager and Inductor.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TRITON_INTERPRET=1
mkdir -p out
.venv/bin/polyduct backends
.venv/bin/polyduct conformance --html out/conformance.html --json out/conformance.json \
    --junit out/conformance.xml || echo "conformance: failures listed above (exit code $?)"
.venv/bin/python examples/speedup.py
