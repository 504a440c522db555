#!/usr/bin/env bash
# One device call for the branch graph-kernel-out-of-line: the graph kernel with its graph code
# called, not inlined. Builds the same-body probe against ab/<commit> (`lab/scripts/gpu-ab.sh
# prepare <commit>` here first; carry "ab") and the tree, and the device tests; runs the graph,
# copy and every-GPU tests, synccheck on the graph tests, then the probes alternately. On the
# GPU machine, from the repository root (writes into $OUT, or ./graph-kernel-out):
#   bash lab/scripts/graph-kernel-session.sh <commit>
set -uo pipefail
base=$1
out=${OUT:-graph-kernel-out}
mkdir -p "$out"
logs=$(mktemp -d)
step() {  # name, command...
  local name=$1
  shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(($(date +%s) - t0))s" | tee -a "$out/summary.txt"
  grep -E "^\[  FAILED  \]|Failure|Which is|ERROR SUMMARY|Barrier error|Hazard|blocks serve" \
    "$logs/$name.log" | head -30 | sed "s/^/$name: /" >> "$out/failures.txt"
}
export SAME_BODY_BIN=$logs/probe
(bash lab/scripts/same-body-bisect.sh 0 "$base" > "$logs/probe-build.log" 2>&1) &
step build scripts/gpu-build.sh "$logs/build" weft_gpu_device_tests
wait
t=build-gpu/tests/weft_gpu_device_tests
graph='*Graph*:*Shapes*:*Copies*:*EveryGpu*:*OnePerSm*'
step graph_tests timeout 60 "$t" "--gtest_filter=$graph"
step graph_tests_2 timeout 60 "$t" "--gtest_filter=$graph"
step synccheck timeout 90 compute-sanitizer --tool synccheck --error-exitcode 3 "$t" \
  '--gtest_filter=*Graph*:*Shapes*:-*FreeBlock*:*EveryBlockBusy*:*Overtakes*'
for r in 1 2; do
  for s in "$base" tree; do
    echo "=== $s (round $r)" >> "$out/probe.txt"
    timeout 30 "$SAME_BODY_BIN/$s" 20 2>&1 | sed 's/  (GPU 0.*//' >> "$out/probe.txt"
  done
done
grep -E "error" "$logs/probe-build.log" | head >> "$out/failures.txt"
cat "$out/summary.txt"
