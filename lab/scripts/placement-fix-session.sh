#!/usr/bin/env bash
# One short device call (one H200) for the placement fix (decision 016, "A stale look at the
# queue"): the device suite ten times, the one-per-SM test 100 times, the host and apps suites,
# racecheck on the device suite. Console only.   bash lab/scripts/placement-fix-session.sh
set -uo pipefail
logs=$(mktemp -d)
scripts/gpu-build.sh "$logs" weft_gpu_device_tests weft_gpu_host_tests weft_gpu_apps_device_tests || exit 1
t=build-gpu/tests
timeout 60 $t/weft_gpu_device_tests --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' --gtest_repeat=100 \
  > "$logs/one.log" 2>&1
echo "one-per-SM: $(grep -c '\[       OK \]' "$logs/one.log") of 100 passed"
grep -E -A6 'Failure' "$logs/one.log" | head -12
timeout 90 $t/weft_gpu_device_tests --gtest_repeat=10 --gtest_brief=1 > "$logs/dev.log" 2>&1
echo "device suite x10: rc $?, $(grep -c 'FAILED  \] GpuPool' "$logs/dev.log") failure lines"
grep -E -A6 'Failure' "$logs/dev.log" | head -12
timeout 120 $t/weft_gpu_host_tests --gtest_brief=1 2>&1 | tail -3
timeout 60 $t/weft_gpu_apps_device_tests --gtest_brief=1 2>&1 | tail -3
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $t/weft_gpu_device_tests --gtest_brief=1 \
  --gtest_filter='-*OnePerSm*' 2>&1 | tail -3
