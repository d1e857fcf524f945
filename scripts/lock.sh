#!/usr/bin/env bash
# Refreshes requirements/dev.lock, the exact versions scripts/install.sh (so
# scripts/test.sh, scripts/sanitize.sh and CI) installs: pyproject.toml's test
# and bench extras plus requirements/dev.in (pip and the build's own
# dependencies). One universal resolution, from PyPI only (uv reads no
# pip.conf), valid for Python 3.10 and newer on every platform; versions that
# differ between Pythons carry markers. Then it checks that every pinned
# version has a Linux x86_64 wheel for Python 3.10-3.14.
#
# Then requirements/loaders.lock (scripts/install_loaders.sh installs it):
# requirements/loaders.in (PyTorch's CPU build, torchdata, Grain) resolved
# for Linux x86_64 CPython 3.11 only, within dev.lock's pins, taking torch's
# +cpu wheel from PyTorch's index (https://download.pytorch.org/whl/cpu;
# TORCH_WHEELS=/a/folder takes it from a folder of wheels instead). It is
# kept out of the universal lock: PyPI's torch for Linux pulls the CUDA
# libraries, gigabytes the tests do not need.
#
#   pip install uv && bash scripts/lock.sh     # UV=/path/to/uv picks another uv
#
# Pins already in the lock are kept where the requirements still allow them;
# extra arguments go to uv pip compile: --upgrade moves everything to the
# newest versions, --upgrade-package duckdb one package. Review the diff and
# run bash scripts/test.sh before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-uv}"
if ! command -v "$UV" >/dev/null; then
  echo "scripts/lock.sh needs uv: pip install uv (or set UV=/path/to/uv)" >&2
  exit 1
fi
INDEX=https://pypi.org/simple
LOCK=requirements/dev.lock

"$UV" pip compile --quiet --no-config --default-index "$INDEX" \
  --universal --python-version 3.10 \
  --custom-compile-command "bash scripts/lock.sh" \
  "$@" \
  pyproject.toml requirements/dev.in --extra test --extra bench \
  --output-file "$LOCK"

# bags (the reference sackli.datasets is tested against) and dill (the
# version apache-beam[dill] pins, for --pickle_library=dill) are pure Python
# and ship only an sdist: they are left out of the wheel check.
SDIST_ONLY='^(bags|dill)=='
WHEEL_PINS="$(mktemp)"
trap 'rm -f "$WHEEL_PINS"' EXIT
grep -Ev "$SDIST_ONLY" "$LOCK" >"$WHEEL_PINS"
for version in 3.10 3.11 3.12 3.13 3.14; do
  if ! "$UV" pip compile --quiet --no-config --default-index "$INDEX" \
      --python-platform x86_64-manylinux_2_28 --python-version "$version" \
      --only-binary :all: --no-deps "$WHEEL_PINS" --output-file /dev/null; then
    echo "scripts/lock.sh: a version in $LOCK has no Linux x86_64 wheel for Python $version" >&2
    exit 1
  fi
done
echo "wrote $LOCK ($(grep -c '^[A-Za-z0-9]' "$LOCK") pins)"

LOADERS_LOCK=requirements/loaders.lock
if [ -n "${TORCH_WHEELS:-}" ]; then
  TORCH_SOURCE=(--find-links "$TORCH_WHEELS")
else
  TORCH_SOURCE=(--index https://download.pytorch.org/whl/cpu)
fi
# unsafe-best-match: PyTorch's index holds some of PyPI's packages too; the
# best version of each wins, wherever it is (dev.lock's pins hold them).
"$UV" pip compile --quiet --no-config --default-index "$INDEX" "${TORCH_SOURCE[@]}" \
  --index-strategy unsafe-best-match \
  --python-platform x86_64-manylinux_2_28 --python-version 3.11 \
  --custom-compile-command "bash scripts/lock.sh" \
  --constraint "$LOCK" requirements/loaders.in --output-file "$LOADERS_LOCK"
echo "wrote $LOADERS_LOCK ($(grep -c '^[A-Za-z0-9]' "$LOADERS_LOCK") pins)"
