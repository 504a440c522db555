#!/usr/bin/env bash
# Installs, with apt-get, exactly the Debian packages of "$@" that are not installed yet.
# Idempotent: with everything present it prints one line and changes nothing. Not root and
# something missing: says what is missing and how to install it, and lets the build go on.
set -euo pipefail

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "weft deps: not a Debian-like system (no dpkg-query); install these yourself: $*" >&2
  exit 0
fi

missing=()
for pkg in "$@"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "weft deps: all ${#} Debian packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  # Not a failure: the build goes on with what is there (peers and optional parts are skipped,
  # and CMake names anything required that is missing).
  echo "weft deps: NOT installing (not root) the missing Debian packages: ${missing[*]}" >&2
  echo "weft deps: to install them: sudo apt-get install ${missing[*]}" >&2
  exit 0
fi

echo "weft deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
