#!/usr/bin/env bash
# Set up, lint and type-check, then run the whole test suite; benches run once with timing off so they cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/lint.sh
.venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-disable "$@"
