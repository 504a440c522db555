#!/usr/bin/env bash
# The README's example must be apps/quickstart/main.cpp (less its first comment line), which
# make test builds and runs: a README that drifts from compiling code fails the tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
readme_example=$(awk '/^```cpp$/{f=1;next} /^```$/{if(f){exit}} f' "$root/README.md")
app=$(tail -n +2 "$root/apps/quickstart/main.cpp")
if [[ "$readme_example" != "$app" ]]; then
  echo "README.md's example differs from apps/quickstart/main.cpp" >&2
  diff <(printf '%s\n' "$readme_example") <(printf '%s\n' "$app") >&2 || true
  exit 1
fi
echo "README example matches apps/quickstart/main.cpp"
