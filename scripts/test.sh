#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run), against the wheel a
# user would install: a fresh virtualenv .venv-test/ (a previous one is
# deleted first); scripts/wheel.sh builds the sdist and, from it, the
# manylinux wheel into dist/; the wheel is installed binary-only, then its
# pinned test dependencies and the data loaders (scripts/install_loaders.sh);
# pytest runs against the installed package (the Beam worker test gets the
# wheel as SACKLI_WHEEL). Extra arguments go to pytest.
#   BASE_PYTHON=python3.12   the interpreter the virtualenv is made from
#                            (default: python3)
#   PYTHON=/path/to/python   skip the fresh virtualenv: install into and test
#                            with this interpreter (e.g. a venv of your own)
#   SACKLI_WHEEL=dist/x.whl  test this wheel instead of building one
# Exits non-zero when any test fails and when no test ran (pytest's code 5).
#
#   bash scripts/test.sh --quick [pytest args]
# The quick subset (tests/quick.txt, under 3 minutes on 2 cores) against the
# environment scripts/setup.sh made (.venv/, or $PYTHON): no fresh
# virtualenv, no wheel; sackli is rebuilt into it first when this tree
# changed since (2-4 minutes more). For a check while editing; CI runs the
# whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/dev.lock

if [ "${1:-}" = "--quick" ]; then
  shift
  PYTHON="${PYTHON:-$PWD/.venv/bin/python}"
  if [ ! -x "$PYTHON" ]; then
    echo "scripts/test.sh --quick: no environment at $PYTHON: run 'bash scripts/setup.sh' first" >&2
    echo "(or name one with PYTHON=/path/to/python)" >&2
    exit 2
  fi
  # What the installed sackli was built from: rebuilt (2-4 minutes) only
  # when a file it is made of changed since.
  STAMP="$("$PYTHON" -c 'import sys; print(sys.prefix)')/.sackli-quick-built-from"
  TREE="$(find native sackli cmake CMakeLists.txt pyproject.toml -type f ! -name '*.pyc' -print0 \
          | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$STAMP" 2>/dev/null)" != "$TREE" ]; then
    echo "== the tree changed since sackli was installed: rebuilding it into $PYTHON's environment"
    "$PYTHON" -m pip --disable-pip-version-check install --quiet --no-deps --constraint "$LOCK" .
    echo "$TREE" >"$STAMP"
  fi
  mapfile -t QUICK < <(grep -v '^\s*\(#\|$\)' tests/quick.txt)
  echo "== running the quick subset (tests/quick.txt: ${#QUICK[@]} entries)"
  PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH" \
    PYTHONSAFEPATH=1 exec "$PYTHON" -m pytest -q -p no:cacheprovider "${QUICK[@]}" "$@"
fi
if [ -z "${PYTHON:-}" ]; then
  VENV=.venv-test
  echo "== creating a fresh virtualenv $VENV from ${BASE_PYTHON:-python3}"
  rm -rf "$VENV"
  "${BASE_PYTHON:-python3}" -m venv "$VENV"
  export PYTHON="$PWD/$VENV/bin/python"
fi
# GoogleTest, cmake and ninja for the engine's C++ tests, when allowed.
bash scripts/dev_tools.sh

if [ -z "${SACKLI_WHEEL:-}" ]; then
  SACKLI_WHEEL="$(BASE_PYTHON="$PYTHON" bash scripts/wheel.sh | tee /dev/stderr | tail -n 1)"
fi
SACKLI_WHEEL="$(cd "$(dirname "$SACKLI_WHEEL")" && pwd)/$(basename "$SACKLI_WHEEL")"
export SACKLI_WHEEL
PIP=("$PYTHON" -m pip --disable-pip-version-check --quiet)
if "$PYTHON" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  "${PIP[@]}" install --constraint "$LOCK" pip
fi
echo "== installing $(basename "$SACKLI_WHEEL") binary-only, then its test dependencies"
"${PIP[@]}" install --only-binary=:all: --no-deps --force-reinstall "$SACKLI_WHEEL"
"${PIP[@]}" install --constraint "$LOCK" "$SACKLI_WHEEL[test]"
bash scripts/install_loaders.sh

echo "== running the test suite"
# PYTHONSAFEPATH keeps the source tree off sys.path: tests import the
# installed package, whose compiled engine the source tree lacks. The
# environment's scripts folder goes first on PATH, as activating it would:
# tests run the installed `sackli` command.
status=0
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH" \
  PYTHONSAFEPATH=1 "$PYTHON" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests: that is a failure" >&2
fi
exit "$status"
