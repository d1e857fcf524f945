#!/usr/bin/env bash
# The whole test suite, as CI runs it: install (build) the package, then run
# pytest against the installed package. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
echo "== running the test suite"
# PYTHONSAFEPATH keeps the source tree off sys.path: tests import the
# installed package, whose compiled engine the source tree lacks.
PYTHONSAFEPATH=1 exec "${PYTHON:-python3}" -m pytest "$@"
