#!/usr/bin/env bash
# Installs what sackli needs to build and test: the system zstd library and
# the zstd command (the tests train dictionaries with it), via apt when
# missing, then the package with its test extras, into the Python given by
# $PYTHON (default: python3, e.g. an activated venv's).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

have_zstd() {
  { command -v pkg-config >/dev/null && pkg-config --exists libzstd; } || [ -f /usr/include/zstd.h ]
}

if ! have_zstd || ! command -v pkg-config >/dev/null || ! command -v zstd >/dev/null; then
  if command -v apt-get >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "== installing libzstd-dev, zstd and pkg-config with apt-get"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libzstd-dev zstd pkg-config >/dev/null
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

echo "== building and installing sackli[test] into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
"$PYTHON" -m pip install --quiet --disable-pip-version-check "${ZSTD_ARGS[@]}" ".[test]"
