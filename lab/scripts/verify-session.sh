#!/usr/bin/env bash
# One device call that checks the tree on the GPU: builds the device and apps tests, runs the
# device tests several times with their whole output kept (a failure that shows in one run of
# several is named, not cut off), the apps tests once, and memcheck on the graph, shape and
# mailbox tests. On the GPU machine, from the repository root (writes into $OUT, or
# ./verify-session-out):
#   bash lab/scripts/verify-session.sh [runs]     (runs of the device tests, default 3)
set -uo pipefail
out=${OUT:-verify-session-out}
runs=${1:-3}
mkdir -p "$out"
logs=$(mktemp -d)
step() {  # name, command...
  local name=$1
  shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(($(date +%s) - t0))s" | tee -a "$out/summary.txt"
  # Every failure line and the whole output of each failed test, not only the log's tail.
  grep -E "^\[  FAILED  \]|Failure|error|Expected|Which is|timed out" "$logs/$name.log" \
    | head -80 | sed "s/^/$name: /" >> "$out/failures.txt"
  tail -n 8 "$logs/$name.log" | sed "s/^/$name: /" >> "$out/tails.txt"
}
step build scripts/gpu-build.sh "$logs/build" weft_gpu_device_tests weft_gpu_apps_device_tests
t=build-gpu/tests/weft_gpu_device_tests
for ((r = 1; r <= runs; ++r)); do
  step "device_tests_$r" timeout 200 "$t"
done
step apps_tests timeout 200 build-gpu/tests/weft_gpu_apps_device_tests
step memcheck timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" \
  --gtest_filter='*Graph*:*Shape*:*Mailbox*:-*TaskGraphsRunEach*:*EveryBlockBusy*:*FreeBlock*:*Overtakes*'
tail -n 30 "$logs/build/build.log" > "$out/build-tail.txt" 2>/dev/null || true
