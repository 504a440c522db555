#!/usr/bin/env bash
# One device call for prepared graph shapes (decision 017, "The host's share"): builds, runs the
# device and apps device tests, memcheck on the graph tests, the quick Cholesky bench (weft =
# CholeskyPlan, its graph shape prepared once) and the per-task trace, whose wall time against
# the device span shows what the host still adds. On the GPU machine, from the repository root
# (writes into $OUT, or ./shape-session-out):
#   bash lab/scripts/shape-session.sh
set -uo pipefail
out=${OUT:-shape-session-out}
mkdir -p "$out"
logs=$(mktemp -d)  # at most 8 files come back from a device call: the logs' tails go to one
step() {  # name, command...
  local name=$1
  shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(($(date +%s) - t0))s" | tee -a "$out/summary.txt"
  { echo "== $name (rc=$rc)"; tail -n 60 "$logs/$name.log"; } >> "$out/logs.txt"
}
step build scripts/gpu-build.sh "$logs/build" weft_gpu_device_tests weft_gpu_apps_device_tests \
  weft_cli
t=build-gpu/tests/weft_gpu_device_tests
step device_tests timeout 200 "$t" --gtest_brief=1
step apps_tests timeout 200 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1
step memcheck timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" \
  --gtest_filter='*Graph*:*Shape*:*Mailbox*:-*TaskGraphsRunEach*:*EveryBlockBusy*:*FreeBlock*:*Overtakes*'
step bench timeout 200 build-gpu/tools/weft/weft bench gpu-apps --quick --only cholesky \
  --json "$out/cholesky-quick.json"
step trace timeout 200 bash lab/probes/graph_trace_probe.sh 1024 2048 4096
grep -v "warning\|instantiation\|^ \|^$\|Remark\|^\.\.\|patching\|Hunk" "$logs/trace.log" \
  > "$out/trace.txt"
