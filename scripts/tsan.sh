#!/usr/bin/env bash
# The engine's C++ tests (native/*/tests/, tests/core/test_native_engine.py) under
# ThreadSanitizer: the engine and the tests are built with -fsanitize=thread
# into build/tsan (kept between runs) and run; any data race or lock-order
# report fails the run. Needs cmake, ninja and GoogleTest
# (scripts/dev_tools.sh installs them when it may). Extra arguments go to the test binary, e.g.
# --gtest_filter='Writer.*' --gtest_repeat=20.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/dev_tools.sh
BUILD=build/tsan
FLAGS="-fsanitize=thread -fno-omit-frame-pointer -O1 -g"
echo "== building the engine's C++ tests with ThreadSanitizer in $BUILD"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSACKLI_BUILD_TESTS=ON -DSACKLI_ENGINE_ONLY=ON \
  "-DCMAKE_CXX_FLAGS=$FLAGS" \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build "$BUILD" --target sackli_engine_tests
# halt_on_error: the first report fails the run. die_after_fork=0: the
# thread pool's fork test starts threads in the child, which ThreadSanitizer
# otherwise refuses to allow after a fork of a threaded process.
# scripts/tsan.supp says why each suppression is not a race.
echo "== running them"
TSAN_OPTIONS="halt_on_error=1 die_after_fork=0 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}" \
  "$BUILD/sackli_engine_tests" --gtest_brief=1 "$@"
echo "== scripts/tsan.sh: no ThreadSanitizer reports"
