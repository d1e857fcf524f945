#!/usr/bin/env bash
# Checks the release configuration that cannot run here (pyproject.toml's
# [tool.cibuildwheel], used by .github/workflows/wheels.yml): cibuildwheel,
# at the version pinned in requirements/dev.lock, must read it and list
# exactly the wheels we promise: CPython 3.10-3.14 for Linux x86_64 and
# aarch64 (manylinux and musllinux) and macOS arm64 and x86_64. The tools
# live in the virtualenv .venv-wheel/ (shared with scripts/wheel.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/dev.lock
VENV=.venv-wheel
[ -x "$VENV/bin/python" ] || "${BASE_PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --constraint "$LOCK" cibuildwheel

expected() {
  local platform="$1" tags="$2"
  for version in 310 311 312 313 314; do
    for tag in $tags; do echo "cp$version-$tag"; done
  done | sort
}
status=0
check() {
  local platform="$1" tags="$2" listed
  # From another folder: cibuildwheel reads the project it is given, and
  # must not mistake this checkout for its own output.
  listed="$(cd "${TMPDIR:-/tmp}" && "$OLDPWD/$VENV/bin/python" -m cibuildwheel \
            --print-build-identifiers --platform "$platform" "$OLDPWD" | sort)"
  if [ "$listed" != "$(expected "$platform" "$tags")" ]; then
    echo "scripts/release_check.sh: cibuildwheel lists for $platform:" >&2
    echo "$listed" >&2
    echo "expected:" >&2
    expected "$platform" "$tags" >&2
    status=1
  else
    echo "== cibuildwheel --platform $platform: $(echo "$listed" | wc -l) wheels," \
         "$(echo "$listed" | head -1) ... $(echo "$listed" | tail -1)"
  fi
}
check linux "manylinux_x86_64 manylinux_aarch64 musllinux_x86_64 musllinux_aarch64"
check macos "macosx_x86_64 macosx_arm64"
exit "$status"
