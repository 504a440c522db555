#!/usr/bin/env bash
# One device call for the branch graphs-opt-in-kernel (decision 017, "Then: two kernels"):
# builds, runs the device, fault and apps tests, synccheck and racecheck on the device tests
# (graph_done's "missing wait" is the open question), and the same-body probe against the pool
# before task graphs and against 6de3e22 (run `lab/scripts/gpu-ab.sh prepare bd0d196` and
# `prepare 6de3e22` here first; carry "ab"). On the GPU machine, from the repository root
# (writes into $OUT, or ./opt-in-session-out):
#   bash lab/scripts/opt-in-kernel-session.sh
set -uo pipefail
out=${OUT:-opt-in-session-out}
mkdir -p "$out"
logs=$(mktemp -d)
step() {  # name, command...
  local name=$1
  shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(($(date +%s) - t0))s" | tee -a "$out/summary.txt"
  grep -E "^\[  FAILED  \]|Failure|Which is|ERROR SUMMARY|Barrier error|Hazard" "$logs/$name.log" \
    | head -40 | sed "s/^/$name: /" >> "$out/failures.txt"
}
export SAME_BODY_BIN=$logs/probe
(bash lab/scripts/same-body-bisect.sh 0 bd0d196 6de3e22 > "$logs/probe-build.log" 2>&1) &
step build scripts/gpu-build.sh "$logs/build" weft_gpu_device_tests weft_gpu_fault_tests \
  weft_gpu_apps_device_tests
wait
t=build-gpu/tests/weft_gpu_device_tests
step device_tests_1 timeout 150 "$t"
step device_tests_2 timeout 150 "$t"
step fault_tests timeout 60 build-gpu/tests/weft_gpu_fault_tests
step apps_tests timeout 120 build-gpu/tests/weft_gpu_apps_device_tests
filter='--gtest_filter=-*Million*:*Watchdog*:*IdlePool*:*OnePerSm*:*FreeBlock*:*EveryBlockBusy*:*Overtakes*'
step synccheck timeout 200 compute-sanitizer --tool synccheck --error-exitcode 3 "$t" "$filter"
step racecheck timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 "$t" "$filter"
for r in 1 2; do
  for s in bd0d196 6de3e22 tree; do
    echo "=== $s (round $r)" >> "$out/probe.txt"
    timeout 30 "$SAME_BODY_BIN/$s" 20 2>&1 | sed 's/  (GPU 0.*//' >> "$out/probe.txt"
  done
done
cp "$logs/synccheck.log" "$out/" 2>/dev/null
cat "$out/summary.txt"
