#!/usr/bin/env bash
# Installs weft from build dir $1 into a scratch prefix, then configures, builds and runs a
# separate project that uses it through find_package(weft).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
echo "installed weft found and used by an outside project"
