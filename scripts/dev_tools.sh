#!/usr/bin/env bash
# The optional tools for development that pip cannot bring: GoogleTest (the
# engine's C++ tests, tests/test_native_engine.py and scripts/tsan.sh), and
# cmake and ninja for building those tests outside pip. Installs what is
# missing with apt-get when this user may (root, or sudo without a
# password); otherwise says what is missing and carries on: nothing else
# needs them. scripts/test.sh runs it.
set -euo pipefail

have_gtest() {
  [ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ]
}

missing=()
have_gtest || missing+=(libgtest-dev)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[ "${#missing[@]}" -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    SUDO="none"
  fi
fi
if [ "$SUDO" = "none" ] || ! command -v apt-get >/dev/null; then
  echo "== not installed: ${missing[*]} (the engine's C++ tests need them; install them" \
       "with your package manager)" >&2
  exit 0
fi
echo "== installing ${missing[*]} with apt-get (the engine's C++ tests)"
$SUDO apt-get update -qq </dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" </dev/null >/dev/null
