#!/usr/bin/env bash
# Builds sackli from this source tree and installs it, with its extras, into
# the Python given by $PYTHON (default: python3, e.g. an activated venv's).
# The build needs only that Python and a C++17 compiler: zstd 1.5.7 is
# compiled in from third_party/zstd, and pip brings the build's own tools
# (scikit-build-core, pybind11, and cmake and ninja when the machine has
# none). No root, no apt, no network beyond the package index. Every
# dependency is held to the version pinned in requirements/dev.lock
# (scripts/lock.sh); with the test extra, scripts/install_loaders.sh adds the
# data loaders tests/loaders/ runs under (requirements/loaders.lock).
#   SACKLI_EXTRAS=test,bench   which extras (default: test; bench adds what
#                              benchmarks/*.py need)
# Extra arguments go to pip install, e.g. --config-settings=... (see
# scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${SACKLI_EXTRAS:-test}"
LOCK=requirements/dev.lock

PIP=("$PYTHON" -m pip --disable-pip-version-check)
# In a virtualenv, pip itself first goes to the pinned version: only pip >=
# 25.3 can also hold the build's own dependencies (scikit-build-core,
# pybind11, cmake, ninja) to the lock. Another Python's pip is left alone.
if "$PYTHON" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  "${PIP[@]}" install --quiet --constraint "$LOCK" pip
fi
BUILD_PINS=()
if "${PIP[@]}" install --help | grep -- --build-constraint >/dev/null; then
  BUILD_PINS=(--build-constraint "$LOCK")
else
  echo "== pip $("${PIP[@]}" --version | cut -d' ' -f2) cannot pin build dependencies (needs >= 25.3): building with the newest"
fi

echo "== building and installing sackli[$EXTRAS] into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
"${PIP[@]}" install --quiet --constraint "$LOCK" "${BUILD_PINS[@]}" "$@" ".[$EXTRAS]"
if [[ ",$EXTRAS," == *,test,* ]]; then
  PYTHON="$PYTHON" bash scripts/install_loaders.sh
fi
