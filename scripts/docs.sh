#!/usr/bin/env bash
# Builds the documentation site (mkdocs.yml, docs/) into build/site/ with
# `mkdocs build --strict`: any warning (a broken link or anchor, a missing
# reference, a docstring the API reference cannot parse) fails it.
# MkDocs, Material for MkDocs and mkdocstrings live in the virtualenv
# .venv-docs/ (made on first use, then reused), at the versions pinned in
# requirements/dev.lock; pip runs again only when the lock changes. The API
# reference is read from the source tree by static analysis: sackli need not
# be built or installed.
#   BASE_PYTHON=python3.12   the interpreter the virtualenv is made from
#                            (default: python3)
# Extra arguments go to mkdocs build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-docs
LOCK=requirements/dev.lock
PACKAGES=(mkdocs mkdocs-material 'mkdocstrings[python]')

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating the virtualenv $VENV from ${BASE_PYTHON:-python3}"
  "${BASE_PYTHON:-python3}" -m venv "$VENV"
fi
# The stamp holds what the virtualenv was installed from: the lock's hash
# and the package list. Anything else means install again.
STAMP="$VENV/.sackli-docs-installed"
WANT="$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$LOCK") ${PACKAGES[*]}"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== installing ${PACKAGES[*]} into $VENV (pinned by $LOCK)"
  PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --quiet)
  "${PIP[@]}" install --constraint "$LOCK" pip
  "${PIP[@]}" install --constraint "$LOCK" "${PACKAGES[@]}"
  echo "$WANT" >"$STAMP"
fi

echo "== building the documentation into build/site"
export NO_MKDOCS_2_WARNING=1   # Material's notice about its successor is no warning of ours
# --strict: every warning (mkdocs', mkdocstrings', griffe's) is an error.
"$VENV/bin/mkdocs" build --strict --site-dir build/site "$@"
echo "== documentation built: build/site/index.html"
