#!/usr/bin/env bash
# One device call (one H200), under 600 s, for what session 22 left unverified on the GPU:
# compute-sanitizer synccheck on CholeskyPool's tests after the __syncwarp of 3c26ad4 (decision
# 043 found divergent warps at a barrier at ae8a151), then memcheck and racecheck on them
# again, the applications' Cholesky tests, and the pool's device tests (the copies beside a
# running pool changed with decision 042). The full GPU check and the full bench follow in
# calls of their own: scripts/gpu-check.sh, then scripts/gpu-apps.sh on the warm machine.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/next-verify-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
scripts/gpu-build.sh "$work" weft_gpu_apps_device_tests weft_gpu_device_tests || exit 1
at built
for tool in synccheck memcheck racecheck; do
  at "$tool"
  timeout 90 compute-sanitizer --tool "$tool" --error-exitcode 3 --print-limit 5 \
    build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
    --gtest_filter='CholeskyOnGpu.TheWide*' 2>&1 | grep -vE "Host Frame|^=========  *$" | tail -12
done
at "apps' Cholesky tests"
timeout 60 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
  --gtest_filter='CholeskyOnGpu.*' 2>&1 | grep -vE "^Running main"
at "pool device tests"
timeout 120 build-gpu/tests/weft_gpu_device_tests --gtest_brief=1 2>&1 | grep -vE "^Running main"
at done
