#!/usr/bin/env bash
# Set up, then lint (ruff), type-check the core (mypy) and run the test suite.
# The Triton backend runs under its CPU interpreter here (TRITON_INTERPRET=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TRITON_INTERPRET=1 POLYDUCT_STRICT_PLUGINS=1
export POLYDUCT_CACHE_DIR="${POLYDUCT_CACHE_DIR:-$PWD/.cache/polyduct}"
.venv/bin/ruff check core plugins tests bench
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
