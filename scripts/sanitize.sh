#!/usr/bin/env bash
# The corruption tests against an engine built with AddressSanitizer and
# UndefinedBehaviorSanitizer (CMake option SACKLI_SANITIZE; docs/testing.md):
# sackli is built (in build/asan-*, apart from the normal build) and installed
# with the pinned test dependencies into the virtualenv .venv-asan/ (made on
# first use; delete it for a fresh one), then pytest runs the tests listed in
# TESTS below (the corruption tests of every engine read path, and
# tests/fuzz/test_fuzz.py when it exists) with the
# sanitizer runtime preloaded into Python and into every interpreter the
# tests start. A sanitizer report aborts that process, so the test fails.
# Extra arguments go to pytest, e.g. -k bad_limits -x.
#   BASE_PYTHON=python3.12   the interpreter the virtualenv is made from
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-asan
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating the virtualenv $VENV from ${BASE_PYTHON:-python3}"
  "${BASE_PYTHON:-python3}" -m venv "$VENV"
fi
export PYTHON="$PWD/$VENV/bin/python"
# install.strip=false: scikit-build-core strips the installed module by
# default, and the reports would lose function names and lines.
bash scripts/install.sh \
  --config-settings=cmake.define.SACKLI_SANITIZE=ON \
  "--config-settings=build-dir=build/asan-{wheel_tag}" \
  --config-settings=install.strip=false

# Python is not instrumented, so the ASan runtime the module links against
# has to be loaded before anything else: LD_PRELOAD. libstdc++ is preloaded
# with it: ASan finds the real __cxa_throw (which it intercepts) only in
# libraries loaded at start-up, and Python itself does not link libstdc++;
# without it the first C++ exception aborts with "CHECK failed ...
# real___cxa_throw". (The UBSan runtime is an ordinary dependency.)
MODULE="$(ls "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')"/sackli/_engine*.so)"
LIBASAN="$(ldd "$MODULE" | awk '$1 ~ /^libasan\.so/ { print $3 }')"
LIBSTDCXX="$(ldd "$MODULE" | awk '$1 ~ /^libstdc\+\+\.so/ { print $3 }')"
if [ ! -f "$LIBASAN" ] || [ ! -f "$LIBSTDCXX" ]; then
  echo "scripts/sanitize.sh: $MODULE does not link libasan and libstdc++: not a sanitizer build?" >&2
  exit 1
fi

# Plus the read paths that lend engine memory out: repeated indices (shared
# and copied records) and the Arrow C stream's buffers and release callbacks;
# sackli.maps' parser and lookups on damaged maps; the Arrow row codec on
# hostile rows; and dataset batches (refs parsed and values made in C++) on
# damaged datasets.
TESTS=(tests/core/test_corruption.py tests/core/test_file_changes.py tests/core/test_engine_bindings.py
       tests/core/test_reader_arrow_stream.py tests/maps/test_maps_corruption.py
       tests/arrow/test_arrow_row_corruption.py tests/arrow/test_arrow_row_oracle.py
       tests/datasets/test_datasets_engine_batches.py)
[ -f tests/fuzz/test_fuzz.py ] && TESTS+=(tests/fuzz/test_fuzz.py)
echo "== running ${TESTS[*]} under ASan + UBSan ($LIBASAN)"
# detect_leaks=0: CPython frees little at exit, by design. handle_sigbus=0:
# the engine's own SIGBUS handler turns a file truncated under a mapping into
# an error (native/bagz/fault_guard.h); ASan's would report it as a crash.
# PYTHONMALLOC=malloc: every Python object (each bytes the engine decodes
# into) gets its own malloc'd block with ASan's red zones around it, instead
# of a slot in a pymalloc arena, where an overflow would go unseen.
status=0
env LD_PRELOAD="$LIBASAN:$LIBSTDCXX${LD_PRELOAD:+:$LD_PRELOAD}" \
  ASAN_OPTIONS="detect_leaks=0:handle_sigbus=0:abort_on_error=1:halt_on_error=1:print_summary=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
  PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH" \
  PYTHONMALLOC=malloc PYTHONSAFEPATH=1 \
  "$PYTHON" -m pytest "${TESTS[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "scripts/sanitize.sh: pytest collected no tests: that is a failure" >&2
fi
exit "$status"
