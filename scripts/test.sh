#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run): a fresh virtualenv
# .venv-test/ (a previous one is deleted first), the package built and
# installed in it with the pinned test dependencies (scripts/install.sh), then
# pytest against the installed package. Extra arguments go to pytest.
#   BASE_PYTHON=python3.12   the interpreter the virtualenv is made from
#                            (default: python3)
#   PYTHON=/path/to/python   skip the fresh virtualenv: install into and test
#                            with this interpreter (e.g. a venv of your own)
# Exits non-zero when any test fails and when no test ran (pytest's code 5).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  VENV=.venv-test
  echo "== creating a fresh virtualenv $VENV from ${BASE_PYTHON:-python3}"
  rm -rf "$VENV"
  "${BASE_PYTHON:-python3}" -m venv "$VENV"
  export PYTHON="$PWD/$VENV/bin/python"
fi
bash scripts/install.sh
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
