#!/usr/bin/env bash
# Checks the built docs site in headless Chromium (scripts/check_docs_layout.py):
# on every page, at 1280 and 800 px, no code block or table is wider than
# its box. Builds the site first (scripts/docs.sh) unless build/site exists
# and SACKLI_DOCS_BUILT=1. Chromium comes from Debian (scripts/need_packages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/need_packages.sh chromium
if [ "${SACKLI_DOCS_BUILT:-}" != "1" ] || [ ! -d build/site ]; then
  bash scripts/docs.sh
fi
python3 scripts/check_docs_layout.py build/site
