#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from .clang-format's style (CI checks
# formatting: CONTRIBUTING.md). Fix with `make format`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "clang-format is not installed (make deps installs it)" >&2
  exit 1
fi
files=$(git ls-files '*.hpp' '*.cpp' '*.cuh' '*.cu' 2>/dev/null || find include src tests tools bench apps -name '*.[ch]pp')
clang-format --dry-run --Werror $files
echo "formatting: $(echo "$files" | wc -w) files match .clang-format"
