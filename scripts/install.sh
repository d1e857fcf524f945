#!/usr/bin/env bash
# Installs what sackli needs to build and test: the system zstd library and
# the zstd command (the tests train dictionaries with it), and for the
# engine's C++ tests (tests/test_native_engine.py) cmake, ninja and
# GoogleTest, via apt when missing, then the package with its test extras, into the Python given by
# $PYTHON (default: python3, e.g. an activated venv's). Every dependency is
# held to the version pinned in requirements/dev.lock (scripts/lock.sh).
#   SACKLI_EXTRAS=test,bench   which extras (default: test; bench adds what
#                              benchmarks/*.py need)
# Extra arguments go to pip install, e.g. --config-settings=... (see
# scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${SACKLI_EXTRAS:-test}"
LOCK=requirements/dev.lock

have_zstd() {
  { command -v pkg-config >/dev/null && pkg-config --exists libzstd; } || [ -f /usr/include/zstd.h ]
}

have_gtest() {
  [ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ]
}

if ! have_zstd || ! command -v pkg-config >/dev/null || ! command -v zstd >/dev/null ||
   ! have_gtest || ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  if command -v apt-get >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "== installing libzstd-dev, zstd, pkg-config, libgtest-dev, cmake and ninja-build with apt-get"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libzstd-dev zstd pkg-config \
      libgtest-dev cmake ninja-build >/dev/null
  elif ! have_zstd; then
    echo "sackli needs the zstd library and headers: install libzstd-dev (Debian/Ubuntu)," >&2
    echo "libzstd-devel (Fedora) or zstd (Homebrew), then run this again." >&2
    exit 1
  fi
fi

# zstd 1.5.7 compiled in (Debian 12 ships 1.5.4, ~1.6x slower on small
# records); the system's libzstd when it cannot be fetched.
ZSTD_ARGS=()
if ZSTD_SOURCE="$("$PYTHON" scripts/fetch_zstd.py)"; then
  echo "== compiling in zstd from $ZSTD_SOURCE"
  ZSTD_ARGS=(--config-settings="cmake.define.SACKLI_ZSTD_SOURCE=$ZSTD_SOURCE")
else
  echo "== could not fetch zstd 1.5.7: building against the system's libzstd"
fi

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
"${PIP[@]}" install --quiet --constraint "$LOCK" "${BUILD_PINS[@]}" "${ZSTD_ARGS[@]}" "$@" ".[$EXTRAS]"
