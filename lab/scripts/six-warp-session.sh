#!/usr/bin/env bash
# One device call (one H200), about 200 s: the FP64 tile body on six warps against decision
# 040's on eight, with and without the pool's 168-register cap (lab/probes/six_warp_tile_probe.cu,
# decision 043), and the device test that copies beside a running pool (both kernels, then
# memcheck on it), which changed with decision 042.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/six-warp-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Iinclude -Iapps/gpu \
  -Ilab/probes lab/probes/six_warp_tile_probe.cu -o "$work/six" > "$work/build-probe.log" 2>&1 &
scripts/gpu-build.sh "$work" weft_gpu_device_tests || exit 1
wait
grep -E "registers|spill" "$work/build-probe.log"
at "six-warp probe"
timeout 120 "$work/six" | tee "$work/six.txt"
at "device tests"
timeout 120 build-gpu/tests/weft_gpu_device_tests --gtest_brief=1 2>&1 | grep -vE "^Running main"
at "memcheck, copies"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 \
  build-gpu/tests/weft_gpu_device_tests --gtest_brief=1 \
  --gtest_filter='GpuPool.CopiesOnAStream*' 2>&1 | tail -3
at done
