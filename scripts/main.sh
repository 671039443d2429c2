#!/usr/bin/env bash
# Set up, then the main job: the conformance matrix of every installed backend, and a compiled
# example with its speedup over eager and Inductor. Each backend's suite runs in its own process,
# so one backend that crashes or runs out of memory cannot take the others' reports with it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TRITON_INTERPRET=1
mkdir -p out
.venv/bin/polyduct backends
backends=$(.venv/bin/python -c \
    'from polyduct.plugins import load; print(" ".join(load().kernel_backends.names()))')
for backend in $backends; do
    .venv/bin/polyduct conformance --backend "$backend" --html "out/conformance-$backend.html" \
        --json "out/conformance-$backend.json" --junit "out/conformance-$backend.xml" \
        || echo "conformance $backend: exit code $? (failures are listed above)"
done
.venv/bin/python examples/speedup.py
