#!/usr/bin/env bash
# The engine and its C++ tests built with zig's clang (PyPI's ziglang: clang
# with libc++, musl and macOS's SDK stubs for every target) for platforms
# this machine is not. See docs/platforms.md.
#   musl   x86_64-linux-musl, linked statically, so the tests run here; and
#          no object of the engine or zstd may use initial-exec TLS, which
#          musl refuses to load in a module (a musllinux wheel's).
#   macos  aarch64-macos and x86_64-macos: the engine, GoogleTest and the
#          tests compiled and linked into Mach-O executables against macOS's
#          libSystem and libc++ (every call must exist there); not run.
# Usage: bash scripts/portable_build.sh [musl] [macos]   (default: both;
# musl goes last, so the output ends with GoogleTest's summary). Builds in
# build/zig-<target>, zig's caches in build/zig-cache (both kept between
# runs); zig comes from a Python that has ziglang (ZIG_PYTHON, else python3),
# else from build/zig-venv with the version requirements/dev.lock pins.
# GoogleTest is built from /usr/src/googletest (libgtest-dev), installed
# with apt-get when missing, as are cmake and ninja. Fails on any failure.
#   SACKLI_BUILD_JOBS=2   parallel compile jobs
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${SACKLI_BUILD_JOBS:-2}"
WHAT=("$@")
[ "${#WHAT[@]}" -eq 0 ] && WHAT=(macos musl)
for what in "${WHAT[@]}"; do
  case "$what" in
    musl | macos) ;;
    *) echo "scripts/portable_build.sh: unknown target '$what' (known: musl, macos)" >&2; exit 2 ;;
  esac
done

packages=(libgtest-dev binutils)
command -v cmake >/dev/null || packages+=(cmake)
command -v ninja >/dev/null || packages+=(ninja-build)
bash scripts/need_packages.sh "${packages[@]}"

# zig itself: the binary inside the ziglang package.
zig_of() {
  "$1" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' \
    2>/dev/null
}
ZIG=""
for python in "${ZIG_PYTHON:-}" python3; do
  [ -n "$python" ] && ZIG="$(zig_of "$python")" && [ -x "$ZIG" ] && break
  ZIG=""
done
if [ -z "$ZIG" ]; then
  VENV=build/zig-venv
  if ! ZIG="$(zig_of "$VENV/bin/python")" || [ ! -x "$ZIG" ]; then
    echo "== installing ziglang (the version requirements/dev.lock pins) into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      --constraint requirements/dev.lock ziglang
    ZIG="$(zig_of "$VENV/bin/python")"
  fi
fi
export ZIG_GLOBAL_CACHE_DIR="$PWD/build/zig-cache"
export ZIG_LOCAL_CACHE_DIR="$PWD/build/zig-cache"
echo "== zig $("$ZIG" version) ($("$ZIG" cc --version | head -1)) from $ZIG"

# What is built for each zig target, and how: "link" builds the test
# executable; "compile" only compiles every object of it (the engine, zstd,
# GoogleTest, the tests) and links nothing, which spares zig building libc++
# and the C library for the target. Builds that are not run are not
# optimised: they take half the time.
CHECK_ONLY=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0)
# CMake's Darwin platform wants install_name_tool for shared libraries;
# nothing here makes one.
MACOS=(-DCMAKE_SYSTEM_NAME=Darwin -DCMAKE_INSTALL_NAME_TOOL=/bin/true "${CHECK_ONLY[@]}")
mode_of() {
  case "$1" in
    x86_64-macos) echo compile ;;  # linking adds little to what arm64 shows
    *) echo link ;;
  esac
}
cmake_args_of() {
  case "$1" in
    aarch64-macos) CMAKE_ARGS=("${MACOS[@]}" -DCMAKE_SYSTEM_PROCESSOR=arm64) ;;
    x86_64-macos) CMAKE_ARGS=("${MACOS[@]}" -DCMAKE_SYSTEM_PROCESSOR=x86_64
                              -DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY) ;;
    *) CMAKE_ARGS=() ;;
  esac
}

# Configures build/zig-$1 for zig's target $1: the compiler, archiver and
# ranlib are small scripts that run zig for that target. Output goes to
# build/zig-$1/configure.log.
configure_for() {
  local target="$1"
  local build="build/zig-$target"
  local tools="$PWD/$build/zig-tools"
  mkdir -p "$tools"
  local tool
  for tool in cc c++ ar ranlib; do
    local line="exec \"$ZIG\" $tool"
    case "$tool" in cc | c++) line="$line -target $target" ;; esac
    # Rewritten only when it changes: CMake remembers the compilers.
    if [ "$(cat "$tools/$tool" 2>/dev/null)" != "$(printf '#!/bin/sh\n%s "$@"' "$line")" ]; then
      printf '#!/bin/sh\n%s "$@"\n' "$line" >"$tools/$tool"
      chmod +x "$tools/$tool"
    fi
  done
  cmake_args_of "$target"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_C_COMPILER=$tools/cc" "-DCMAKE_CXX_COMPILER=$tools/c++" \
    "-DCMAKE_AR=$tools/ar" "-DCMAKE_RANLIB=$tools/ranlib" \
    -DSACKLI_ENGINE_ONLY=ON -DSACKLI_BUILD_TESTS=ON \
    -DSACKLI_GTEST_SOURCE=/usr/src/googletest "${CMAKE_ARGS[@]}" >"$build/configure.log" 2>&1
}

# The engine's libraries, one per part (CMakeLists.txt): libsackli_<part>.a.
ENGINE_PARTS=(sackli_bagz sackli_arrow sackli_rows sackli_maps sackli_datasets)

# Builds what mode_of says for the configured target $1.
build_for() {
  local target="$1"
  local build="build/zig-$target"
  echo "== building the engine's C++ tests for $target in $build ($(mode_of "$target"), at ${SECONDS}s)"
  if [ "$(mode_of "$target")" = link ]; then
    cmake --build "$build" --target sackli_engine_tests --parallel "$JOBS"
    return
  fi
  local objects
  objects=($(cd "$build" && ninja -t targets all |
               grep -oE '^CMakeFiles/sackli_engine_tests\.dir/[^:]*\.o'))
  if [ "${#objects[@]}" -lt 10 ]; then
    echo "scripts/portable_build.sh: found only ${#objects[@]} test objects in $build" >&2
    exit 1
  fi
  cmake --build "$build" --parallel "$JOBS" --target "${ENGINE_PARTS[@]}" gtest gtest_main "${objects[@]}"
}

# $1 is a 64-bit Mach-O executable for CPU type $2 (little-endian hex).
check_macho() {
  local header
  header="$(od -A n -t x1 -N 8 "$1" | tr -d ' \n')"
  if [ "$header" != "cffaedfe$2" ]; then
    echo "scripts/portable_build.sh: $1 is not a Mach-O executable for CPU $2 (starts $header)" >&2
    exit 1
  fi
}

# musl last, whatever the order asked: its tests' summary ends the output.
TARGETS=()
[[ " ${WHAT[*]} " == *" macos "* ]] && TARGETS+=(aarch64-macos x86_64-macos)
[[ " ${WHAT[*]} " == *" musl "* ]] && TARGETS+=(x86_64-linux-musl)

# Configuring a target is where zig first builds its libc++ and C library,
# mostly on one core: all targets at once.
echo "== configuring ${TARGETS[*]} (zig builds each one's libc++ and C library on first use)"
pids=()
for target in "${TARGETS[@]}"; do
  configure_for "$target" &
  pids+=($!)
done
for i in "${!TARGETS[@]}"; do
  if ! wait "${pids[$i]}"; then
    cat "build/zig-${TARGETS[$i]}/configure.log" >&2
    echo "scripts/portable_build.sh: configuring build/zig-${TARGETS[$i]} failed" >&2
    exit 1
  fi
done
echo "== configured (at ${SECONDS}s)"

for target in "${TARGETS[@]}"; do
  build_for "$target"
  build="build/zig-$target"
  case "$target" in
    aarch64-macos) check_macho "$build/sackli_engine_tests" 0c000001 ;;
    x86_64-macos)
      echo "== macOS: the engine and its tests compile and link for arm64, compile for x86_64" ;;
    x86_64-linux-musl)
      if readelf -lW "$build/sackli_engine_tests" | grep -q INTERP; then
        echo "scripts/portable_build.sh: $build/sackli_engine_tests is not static" >&2
        exit 1
      fi
      # Initial-exec TLS shows as GOTTPOFF/TPOFF relocations in PIC objects
      # (the general-dynamic TLS musl supports as DTPOFF).
      libs=()
      for part in "${ENGINE_PARTS[@]}"; do libs+=("$build/lib$part.a"); done
      if readelf -rW "${libs[@]}" "$build/libsackli_zstd.a" |
          grep -E 'R_X86_64_(GOTTPOFF|TPOFF32|TPOFF64)'; then
        echo "scripts/portable_build.sh: initial-exec TLS in the engine: musl would refuse" \
             "to load it in a Python module (see native/bagz/fault_guard.cc)" >&2
        exit 1
      fi
      echo "== running them (x86_64-linux-musl, static, at ${SECONDS}s)"
      "$build/sackli_engine_tests" --gtest_brief=1
      ;;
  esac
done
