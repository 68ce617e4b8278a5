#!/usr/bin/env bash
# The main job on the bundled sample data (after set-up).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/benchmint demo --out demo-out "$@"
