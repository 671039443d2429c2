#!/usr/bin/env bash
# Create (or refresh) .venv with the core, every plugin under plugins/, and the dev tools.
# torch is pinned to the CPU wheel so pip never pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
pip() { .venv/bin/python -m pip "$@"; }
pip install -q --disable-pip-version-check torch==2.13.0
pip install -q --disable-pip-version-check "pluggy>=1.5" "sympy>=1.13" "numpy>=1.24" "setuptools>=68" pytest expecttest \
    ruff mypy matplotlib "halide>=21,<22" "triton>=3.6" transformers==5.25.0 "redis>=5,<9"
pip install -q --disable-pip-version-check --no-deps -e .
for plugin in plugins/*/; do
    if [ -f "$plugin/pyproject.toml" ]; then
        pip install -q --disable-pip-version-check --no-deps -e "$plugin"
    fi
done
echo "setup: $(.venv/bin/python -c 'import torch; print("torch", torch.__version__)') ready in .venv"
