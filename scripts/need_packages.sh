#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed yet,
# with apt-get, when this user may (root, or sudo without a password); fails,
# saying what is missing, when it cannot. For the scripts that build the
# engine with other toolchains (clang_test.sh, cross_test.sh,
# portable_build.sh; docs/platforms.md). Waits for another apt-get holding
# the package lock instead of failing. With --optional first, a user who
# may not install gets a note and exit 0 instead (scripts/dev_tools.sh).
#   bash scripts/need_packages.sh clang libc++-dev
set -euo pipefail
OPTIONAL=0
if [ "${1:-}" = "--optional" ]; then
  OPTIONAL=1
  shift
fi

missing=()
for package in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    SUDO="none"
  fi
fi
if [ "$SUDO" = "none" ] || ! command -v apt-get >/dev/null; then
  echo "== missing: ${missing[*]} (Debian package names); install them and run this again" >&2
  exit $((1 - OPTIONAL))
fi
echo "== installing ${missing[*]} with apt-get"
APT=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
"${APT[@]}" update -qq </dev/null
"${APT[@]}" install -y -qq "${missing[@]}" </dev/null >/dev/null
