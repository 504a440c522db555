#!/usr/bin/env bash
# One device call on two H200s (nvidia-h200-x2) for branch gpu-verify-14: the multi-GPU GEMM at
# full sizes (n = 4096, 8192, 16384) through the harness, then the one-per-SM device tests
# (held tasks over the default lanes, and one lane unheld) 20 times, the whole device suite
# once, and memcheck, racecheck and synccheck on the two placement tests.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/x2-session.sh
# Output: $OUT/gpu-apps.{json,md,log} (and its chart), $OUT/tests.txt, $OUT/session.tar.gz.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work/build" weft_cli weft_gpu_device_tests > "$work/build.txt" 2>&1
echo "build rc=$? at $(($(date +%s) - t0)) s" | tee "$out/tests.txt"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout 300 build-gpu/tools/weft/weft bench gpu-apps \
  --only multi_gpu_gemm --samples 3 --json "$out/gpu-apps.json" > "$out/gpu-apps.log" 2>&1
echo "gpu-apps rc=$? at $(($(date +%s) - t0)) s" | tee -a "$out/tests.txt"
t=build-gpu/tests/weft_gpu_device_tests
{
  echo "== the one-per-SM tests, 20 times"
  timeout 120 $t --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' --gtest_repeat=20 \
    > "$work/one.log" 2>&1
  echo "rc=$?: $(grep -c '\[       OK \] GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm (' "$work/one.log") held" \
    "and $(grep -c '\[       OK \] GpuPool.ABatchOfOneTaskPerSmRunsOnePerSmWithOneLane' "$work/one.log")" \
    "one-lane of 20 passed"
  grep -E -A3 'Failure' "$work/one.log" | head -20
  echo "== the device suite"
  timeout 240 $t --gtest_brief=1 2>&1 | tail -15
  for tool in memcheck racecheck synccheck; do
    echo "== $tool on the placement tests"
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $t \
      --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' 2>&1 | tail -3
  done
  echo "done at $(($(date +%s) - t0)) s"
} 2>&1 | tee -a "$out/tests.txt"
