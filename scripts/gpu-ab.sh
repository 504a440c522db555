#!/usr/bin/env bash
# A/B of a GPU-pool probe between an older commit's pool and the working tree's, on ONE machine
# instance of the device tool. Host-bound figures differ by up to 2x between instances
# (bench/results/h100/probes/README.md), so a change is judged by old and new built side by
# side and run alternately in the same call, not by runs from different calls.
#
#   here:    scripts/gpu-ab.sh prepare <commit>
#            copies that commit's include/ and src/gpu/ into ab/<commit>/ (ignored by git; pass
#            "ab" in the device tool's carry list so that it travels with the tree)
#   device:  scripts/gpu-ab.sh run <commit> <probe> <rounds> [-D...] [-- probe arguments]
#            builds scripts/probes/<probe>.cu against ab/<commit>/ and against the tree, then
#            runs old, new, old, new ... (<rounds> each), every run headed "=== old <commit>"
#            or "=== new"; compile flags (e.g. -DWEFT_POOL_PROFILE) go before "--".
#
# Example (what bench/results/h100/probes/latency_ab-bff043d.txt was made by, by hand):
#   scripts/gpu-ab.sh prepare 48d179e
#   device: scripts/gpu-ab.sh run 48d179e latency_trace 2 -DWEFT_POOL_TRACE | tee $OUT/ab.txt
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  sed -n '2,17p' "$0" >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
cmd=$1
commit=$2
dir="$root/ab/$commit"
case "$cmd" in
  prepare)
    git -C "$root" rev-parse --verify --quiet "$commit^{commit}" >/dev/null ||
      { echo "gpu-ab: $commit is not a commit of this repository" >&2; exit 2; }
    rm -rf "$dir"
    mkdir -p "$dir"
    git -C "$root" archive "$commit" include src/gpu | tar -x -C "$dir"
    echo "gpu-ab: $commit's include/ and src/gpu/ are in ab/$commit (carry \"ab\" to the device)"
    ;;
  run)
    [[ $# -ge 4 ]] || usage
    probe=$3
    rounds=$4
    shift 4
    flags=()
    while [[ $# -gt 0 && $1 != "--" ]]; do flags+=("$1"); shift; done
    [[ $# -gt 0 ]] && shift  # the "--"
    [[ -d "$dir/include" ]] || { echo "gpu-ab: no ab/$commit: run 'prepare $commit' first" >&2; exit 2; }
    src="$root/scripts/probes/$probe.cu"
    [[ -f "$src" ]] || { echo "gpu-ab: no probe $src" >&2; exit 2; }
    [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-ab: rounds must be a positive number" >&2; exit 2; }
    bin=$(mktemp -d)
    nv=(nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 "${flags[@]}")
    # The old build finds the old headers first; the probe's own headers (scripts/probes/*.cuh)
    # are the tree's, beside the probe.
    "${nv[@]}" -I"$dir/include" -I"$root/include" "$src" "$dir"/src/gpu/*.cu \
      "$dir"/src/gpu/host_blocks.cpp -o "$bin/old" &
    old_pid=$!
    "${nv[@]}" -I"$root/include" "$src" "$root"/src/gpu/device_blocks.cu \
      "$root"/src/gpu/host_blocks.cpp -o "$bin/new"
    wait "$old_pid"
    for ((r = 1; r <= rounds; ++r)); do
      echo "=== old $commit (round $r)"
      "$bin/old" "$@" || echo "gpu-ab: old exited with status $?"
      echo "=== new (round $r)"
      "$bin/new" "$@" || echo "gpu-ab: new exited with status $?"
    done
    ;;
  *) usage ;;
esac
