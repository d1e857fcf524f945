#!/usr/bin/env bash
# One step for a newcomer: install everything, then run the quickstart example
# (writes a sharded bag set, reads it back at random, prints what it did).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
echo "== running examples/quickstart.py"
"${PYTHON:-python3}" examples/quickstart.py
