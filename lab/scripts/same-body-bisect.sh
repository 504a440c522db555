#!/usr/bin/env bash
# Builds lab/probes/same_body_probe.cu against several commits' pools (ab/<commit>/, made here
# by `lab/scripts/gpu-ab.sh prepare <commit>`; carry "ab" to the device) and against the working
# tree, all in parallel, then runs them in turn, <rounds> times, each run headed by its commit:
# which commit moved pool_vs_launch_same_body, on one machine instance.
#   device:  bash lab/scripts/same-body-bisect.sh <rounds> <commit>...
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=$1
shift
bin=${SAME_BODY_BIN:-$(mktemp -d)}  # the binaries (kept where SAME_BODY_BIN names a folder)
mkdir -p "$bin"
nv=(nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90)
pool_sources() { ls "$1"/src/gpu/*.cu "$1"/src/gpu/*.cpp | grep -v _unavailable; }
probe="$root/lab/probes/same_body_probe.cu"
sides=()
for c in "$@"; do
  d="$root/ab/$c"
  [[ -d "$d/include" ]] || { echo "no ab/$c: run 'lab/scripts/gpu-ab.sh prepare $c' here" >&2; exit 2; }
  "${nv[@]}" -I"$d/include" -I"$root/include" -I"$d/src" -I"$root/lab/probes" "$probe" \
    $(pool_sources "$d") -o "$bin/$c" > "$bin/$c.log" 2>&1 &
  sides+=("$c")
done
"${nv[@]}" -I"$root/include" -I"$root/src" -I"$root/lab/probes" "$probe" \
  $(pool_sources "$root") -o "$bin/tree" > "$bin/tree.log" 2>&1 &
sides+=(tree)
wait
for s in "${sides[@]}"; do
  [[ -x "$bin/$s" ]] || { echo "build of $s failed:"; tail -20 "$bin/$s.log"; }
done
for ((r = 1; r <= rounds; ++r)); do
  for s in "${sides[@]}"; do
    [[ -x "$bin/$s" ]] || continue
    echo "=== $s (round $r)"
    timeout 60 "$bin/$s" || echo "exit $?"
  done
done
