#!/usr/bin/env bash
# Set up, then lint (ruff), type-check the core (mypy) and run the test suites: the core's from the
# repository root, and each plugin's from its own directory, as that plugin's own repository would.
# The Triton backend runs under its CPU interpreter here (TRITON_INTERPRET=1). Last, the install
# test: wheels of every distribution in a fresh environment, as a new user gets them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the remote cache's tests start their own redis-server (they skip, saying so, without one)
bash scripts/redis.sh install || echo "test.sh: could not install redis-server" >&2
export TRITON_INTERPRET=1 POLYDUCT_STRICT_PLUGINS=1
export POLYDUCT_CACHE_DIR="${POLYDUCT_CACHE_DIR:-$PWD/.cache/polyduct}"
root=$PWD
.venv/bin/ruff check core tests bench examples scripts
.venv/bin/ruff check --config pyproject.toml plugins
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
for plugin in plugins/*/; do
    if compgen -G "$plugin/tests/test_*.py" > /dev/null; then
        echo "== $plugin"
        (cd "$plugin" && "$root/.venv/bin/python" -m pytest -q -p no:cacheprovider tests)
    fi
done
bash scripts/install_test.sh
