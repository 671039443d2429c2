#!/usr/bin/env bash
# A new user's install: wheels of the core and every plugin, installed into a fresh virtual
# environment with their declared dependencies only (torch pinned to the CPU wheel; nothing
# editable, no dev tools), then the CLI, a conformance slice, torch.compile on every installed
# kernel and wrapper backend, and the pytest plugin, all run from a directory outside the
# repository. An import that a distribution does not declare fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
export TRITON_INTERPRET=1  # the Triton backend runs on this CPU under its interpreter
root=$PWD
PY=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/polyduct-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
quiet=(-q --disable-pip-version-check)
no_compile=(--no-compile)  # bytecode is compiled on import, for what is imported

echo "install test: wheels"
# The build tools come from the development environment (.venv); the wheels hold only the sources.
.venv/bin/python -m pip wheel "${quiet[@]}" --no-deps --no-build-isolation -w "$work/dist" \
    . plugins/*/ > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
rm -rf build plugins/*/build  # setuptools' staging directories, not wanted in the source tree

echo "install test: fresh environment (wheels built in ${SECONDS}s)"
"$PY" -m venv "$work/venv"
echo "torch==2.13.0" > "$work/constraints.txt"
"$work/venv/bin/python" -m pip install "${quiet[@]}" "${no_compile[@]}" -c "$work/constraints.txt" \
    "$work"/dist/*.whl
bin=$work/venv/bin
echo "install test: installed with declared dependencies in ${SECONDS}s"
mkdir "$work/elsewhere"
cd "$work/elsewhere"  # nothing from the repository is importable from here

"$bin/polyduct" --version
"$bin/polyduct" backends --strict
"$bin/polyduct" conformance --backend cpp --backend reference --ops '^(add|exp|where|sum)$' \
    --dtypes float32,int32 --junit slice.xml
"$bin/python" "$root/scripts/install_check.py"

echo "install test: the pytest plugin, from a directory of its own"
"$bin/python" -m pip install "${quiet[@]}" "${no_compile[@]}" -c "$work/constraints.txt" "pytest>=8"
mkdir "$work/mybackend" && cd "$work/mybackend"
mkdir tests && echo 'pytest_plugins = ["polyduct.conformance.plugin"]' > tests/conftest.py
"$bin/python" -m pytest -q -p no:cacheprovider tests --polyduct-backend=cpp \
    --polyduct-ops='^(exp|add)$' --polyduct-dtypes=float32
mkdir "$work/other" && cd "$work/other"
"$bin/python" -m pytest -q -p no:cacheprovider -p polyduct.conformance.plugin \
    --polyduct-backend=reference --polyduct-ops='^exp$' --polyduct-dtypes=float32
echo "install test: passed in ${SECONDS}s"
