#!/usr/bin/env bash
# Set up, then run the whole test suite; benches run once with timing off so they cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-disable "$@"
