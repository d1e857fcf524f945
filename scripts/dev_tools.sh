#!/usr/bin/env bash
# The optional tools for development that pip cannot bring: GoogleTest (the
# engine's C++ tests: tests/core/test_native_engine.py, scripts/tsan.sh), and
# cmake and ninja for building those tests outside pip. Installs what is
# missing with apt-get when this user may (root, or sudo without a
# password); otherwise says what is missing and carries on: nothing else
# needs them. scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libgtest-dev)
command -v cmake >/dev/null || packages+=(cmake)
command -v ninja >/dev/null || packages+=(ninja-build)
bash scripts/need_packages.sh --optional "${packages[@]}"
