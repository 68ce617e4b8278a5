#!/usr/bin/env bash
# Lint, types and formatting, as CI runs them (after set-up): ruff over the tree, mypy over the public API,
# the compiled module's stubs against the module itself, clang-format over csrc/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
"$BIN/ruff" check src tests benches scripts
# mypy skips the body of a function without annotations and says so in a note; a note is a failure here, so
# every function on the public API has its body checked.
mypy_out=$("$BIN/mypy" $(cat scripts/mypy-modules.txt)) || { echo "$mypy_out"; exit 1; }
echo "$mypy_out"
if grep -q "annotation-unchecked" <<<"$mypy_out"; then
    echo "lint: mypy left function bodies unchecked (above): annotate those functions" >&2
    exit 1
fi
"$BIN/python" -m mypy.stubtest benchmint._core
"$BIN/clang-format" --dry-run --Werror csrc/*.cpp csrc/*.hpp
echo "lint: ruff, mypy, stubtest and clang-format clean"
