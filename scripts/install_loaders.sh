#!/usr/bin/env bash
# Installs the data loaders tests/loaders/ runs sackli under (PyTorch's CPU
# build, torchdata, Grain) into the Python given by $PYTHON (default:
# python3), at the versions requirements/loaders.lock pins. scripts/test.sh
# (so CI) and scripts/install.sh (with the test extra) run it after the main
# lock. That lock is of Linux x86_64 CPython 3.11 (requirements/loaders.in
# says why it is a lock of its own); elsewhere this says so and installs
# nothing, and tests/loaders/ skips. The lock holds every dependency, so pip
# installs it as it is (--no-deps). pip finds torch's +cpu wheel where its
# configuration points (find-links, a mirror), or else on PyTorch's own
# index, https://download.pytorch.org/whl/cpu.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
LOADERS_LOCK=requirements/loaders.lock
PIP=("$PYTHON" -m pip --disable-pip-version-check --quiet)

if ! "$PYTHON" -c 'import platform, sys; sys.exit(not (sys.platform == "linux" and platform.machine() == "x86_64" and sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)))'; then
  echo "== $LOADERS_LOCK is for Linux x86_64 CPython 3.11: not installed here (tests/loaders/ skips)"
  exit 0
fi
echo "== installing the data loaders of tests/loaders/ ($LOADERS_LOCK)"
if ! "${PIP[@]}" install --no-deps -r "$LOADERS_LOCK" 2>/dev/null; then
  "${PIP[@]}" install --no-deps --extra-index-url https://download.pytorch.org/whl/cpu -r "$LOADERS_LOCK"
fi
