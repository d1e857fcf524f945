#!/usr/bin/env bash
# The engine and its C++ tests cross-compiled for another CPU with Debian's
# cross compiler, GoogleTest included (from its source in
# /usr/src/googletest), then run under qemu user-mode emulation with the
# target's libraries from /usr/<triple>. The crc32c test must find the CPU's
# crc32c instructions (qemu's default CPU has them), so the hardware path is
# the one tested, not the table loop. Builds in build/cross-<arch> (kept
# between runs); installs what it needs with apt-get when missing. Ends with
# GoogleTest's summary; fails on any failing test. Extra arguments go to the
# test binary. See docs/platforms.md.
#   bash scripts/cross_test.sh aarch64
#   SACKLI_BUILD_JOBS=2   parallel compile jobs
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH="${1:-aarch64}"
[ "$#" -gt 0 ] && shift
case "$ARCH" in
  aarch64)
    TRIPLE=aarch64-linux-gnu
    QEMU=qemu-aarch64-static
    CRC32C=armv8-crc
    ;;
  *)
    echo "scripts/cross_test.sh: no cross build for '$ARCH' (known: aarch64)" >&2
    exit 2
    ;;
esac
BUILD="build/cross-$ARCH"
JOBS="${SACKLI_BUILD_JOBS:-2}"

packages=("g++-$TRIPLE" qemu-user-static libgtest-dev)
command -v cmake >/dev/null || packages+=(cmake)
command -v ninja >/dev/null || packages+=(ninja-build)
bash scripts/need_packages.sh "${packages[@]}"

echo "== cross-compiling the engine's C++ tests for $ARCH with $("$TRIPLE-g++" --version | head -1) in $BUILD"
mkdir -p "$BUILD"
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_TOOLCHAIN_FILE=$PWD/cmake/$TRIPLE.cmake" \
    -DSACKLI_ENGINE_ONLY=ON -DSACKLI_BUILD_TESTS=ON \
    -DSACKLI_GTEST_SOURCE=/usr/src/googletest >"$BUILD/configure.log" 2>&1; then
  cat "$BUILD/configure.log" >&2
  exit 1
fi
cmake --build "$BUILD" --target sackli_engine_tests --parallel "$JOBS"
"$TRIPLE-readelf" -h "$BUILD/sackli_engine_tests" | grep -E '^ *Machine:'

echo "== running them under $QEMU (crc32c must run on the $CRC32C instructions)"
SACKLI_EXPECT_CRC32C="$CRC32C" \
  "$QEMU" -L "/usr/$TRIPLE" "$BUILD/sackli_engine_tests" --gtest_brief=1 "$@"
