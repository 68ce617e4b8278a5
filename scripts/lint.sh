#!/usr/bin/env bash
# Lint, types and formatting, as CI runs them (after set-up): ruff over the tree, mypy over the public API,
# the compiled module's stubs against the module itself, clang-format over csrc/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
"$BIN/ruff" check src tests benches scripts
"$BIN/mypy" $(cat scripts/mypy-modules.txt)
"$BIN/python" -m mypy.stubtest benchmint._core
"$BIN/clang-format" --dry-run --Werror csrc/*.cpp csrc/*.hpp
echo "lint: ruff, mypy, stubtest and clang-format clean"
