#!/usr/bin/env bash
# One step for a newcomer, as an ordinary user (no root, no apt): builds and
# installs sackli from this source tree with its test extras (needs only
# Python 3.10+ and a C++17 compiler; zstd is compiled in from
# third_party/zstd), then runs the quickstart example (writes a sharded bag
# set, reads it back at random, prints what it did).
# It installs into the virtualenv .venv/ (made when missing) unless a
# virtualenv is active or PYTHON names an interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -n "${VIRTUAL_ENV:-}" ]; then
    PYTHON="$VIRTUAL_ENV/bin/python"
  else
    if [ ! -x .venv/bin/python ]; then
      echo "== creating the virtualenv .venv from ${BASE_PYTHON:-python3}"
      "${BASE_PYTHON:-python3}" -m venv .venv
    fi
    PYTHON="$PWD/.venv/bin/python"
  fi
fi
export PYTHON
bash scripts/install.sh
echo "== running examples/quickstart.py"
"$PYTHON" examples/quickstart.py
if [ "$PYTHON" = "$PWD/.venv/bin/python" ]; then
  echo "== sackli is installed in .venv: 'source .venv/bin/activate' to use it"
fi
