#!/usr/bin/env bash
# The engine and its C++ tests built with Debian's clang and libc++ (the
# compiler and C++ library of macOS), GoogleTest included (from its source
# in /usr/src/googletest: the system's libgtest is built for libstdc++ and
# does not link with libc++), then run; and the Python bindings
# (native/python/, every part) compiled against libc++ for errors only (-fsyntax-only),
# with pybind11 at the version requirements/dev.lock pins (installed into
# build/clang-libcxx/venv) and python3's headers. Builds in build/clang-libcxx (kept between runs); installs what
# it needs with apt-get when missing. Ends with GoogleTest's summary; fails
# on any failure. Extra arguments go to the test binary, e.g.
# --gtest_filter='LocalFile.*'. See docs/platforms.md.
#   SACKLI_BUILD_JOBS=2   parallel compile jobs
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build/clang-libcxx
JOBS="${SACKLI_BUILD_JOBS:-2}"

packages=(clang libc++-dev libc++abi-dev libgtest-dev)
command -v cmake >/dev/null || packages+=(cmake)
command -v ninja >/dev/null || packages+=(ninja-build)
bash scripts/need_packages.sh "${packages[@]}"

echo "== building the engine's C++ tests with $(clang++ --version | head -1) and libc++ in $BUILD"
mkdir -p "$BUILD"
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS=-stdlib=libc++ -DCMAKE_EXE_LINKER_FLAGS=-stdlib=libc++ \
    -DSACKLI_ENGINE_ONLY=ON -DSACKLI_BUILD_TESTS=ON \
    -DSACKLI_GTEST_SOURCE=/usr/src/googletest >"$BUILD/configure.log" 2>&1; then
  cat "$BUILD/configure.log" >&2
  exit 1
fi
cmake --build "$BUILD" --target sackli_engine_tests --parallel "$JOBS"

# Proof of the library: a test binary that fell back to libstdc++ would
# pass without testing anything new.
if ! ldd "$BUILD/sackli_engine_tests" | grep -q 'libc++\.so'; then
  echo "scripts/clang_test.sh: $BUILD/sackli_engine_tests does not link libc++:" >&2
  ldd "$BUILD/sackli_engine_tests" >&2
  exit 1
fi

# The bindings: the same flags as the module's build, no object written.
pybind11_of() { "$1" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null; }
PYTHON="$BUILD/venv/bin/python"
if ! PYBIND11="$(pybind11_of "$PYTHON")"; then
  echo "== installing pybind11 (the version requirements/dev.lock pins) into $BUILD/venv"
  rm -rf "$BUILD/venv"
  python3 -m venv "$BUILD/venv"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    --constraint requirements/dev.lock pybind11
  PYBIND11="$(pybind11_of "$PYTHON")"
fi
PYTHON_INCLUDE="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [ ! -f "$PYTHON_INCLUDE/Python.h" ]; then
  if [ "$(command -v python3)" = /usr/bin/python3 ]; then
    bash scripts/need_packages.sh python3-dev
  else
    echo "scripts/clang_test.sh: no Python.h in $PYTHON_INCLUDE: install $(command -v python3)'s headers" >&2
    exit 1
  fi
fi
echo "== compiling the bindings (native/python/**/*.cc) against libc++ for errors"
find native/python -name "*.cc" | xargs -P "$JOBS" -n 1 clang++ -stdlib=libc++ -std=c++17 -fsyntax-only \
  -Wall -Wextra -Inative -Ithird_party/zstd -isystem "$PYBIND11" -isystem "$PYTHON_INCLUDE"

echo "== running the tests"
"$BUILD/sackli_engine_tests" --gtest_brief=1 "$@"
